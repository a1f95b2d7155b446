"""``jobloom topics`` lists the topics the app's performers subscribe to."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from jobloom.cli.main import cli

SOURCE = """
import jobloom

class Mail(jobloom.Performer[dict, None]):
    triggers = ["order.created"]
    async def perform(self, payload: dict) -> None:
        return None

class Ledger(jobloom.Performer[dict, None]):
    triggers = ["order.created", "order.paid"]
    async def perform(self, payload: dict) -> None:
        return None

app = jobloom.App("sqlite:///{db}", performers=[Mail, Ledger])
"""


def test_topics_lists_topics_and_bindings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "topics_app.py").write_text(textwrap.dedent(SOURCE.format(db=tmp_path / "t.db")))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    out = runner.invoke(cli, ["topics", "--app", "topics_app:app", "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout) == [{"topic": "order.created", "bindings": ["Ledger", "Mail"]},
                                      {"topic": "order.paid", "bindings": ["Ledger"]}]
    table = runner.invoke(cli, ["topics", "--app", "topics_app:app"], env={"COLUMNS": "120"})
    assert table.exit_code == 0 and "order.paid" in table.stdout and "Ledger, Mail" in table.stdout
