"""``jobloom reencrypt`` turns plaintext rows into ciphertext of the app's first key, and says what it did."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

import jobloom
from jobloom.cli.main import cli
from jobloom.codecs import is_encrypted, new_key

SOURCE = """
import jobloom
from jobloom.codecs import Encrypted

class Mail(jobloom.Performer[dict, None]):
    async def perform(self, payload: dict) -> None:
        return None

app = jobloom.App("sqlite:///{db}", performers=[Mail], codec={codec})
"""


def _write(tmp_path: Path, name: str, codec: str) -> None:
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(SOURCE.format(db=tmp_path / "r.db", codec=codec)))


def test_reencrypt_encrypts_what_was_stored_before_encryption(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    _write(tmp_path, "plain_app", "None")
    _write(tmp_path, "keyed_app", f"Encrypted(keys=[{new_key()!r}])")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    import plain_app  # type: ignore[import-not-found]

    app: jobloom.App = plain_app.app

    async def enqueue() -> None:
        await app.migrate()
        for n in range(3):
            await app.enqueue("Mail", {"to": f"plain-{n}"})
        await app.close()

    asyncio.run(enqueue())
    runner = CliRunner()
    refused = runner.invoke(cli, ["reencrypt", "--app", "plain_app:app"])
    assert refused.exit_code == 1 and "no encrypting codec" in refused.output
    out = runner.invoke(cli, ["reencrypt", "--app", "keyed_app:app", "--batch", "2", "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout) == {"rewritten": {"payloads": 3, "results": 0, "steps": 0, "events": 0, "runs": 0},
                                      "changed_meanwhile": 0, "failed": []}
    with sqlite3.connect(tmp_path / "r.db") as conn:
        payloads = [r[0] for r in conn.execute("SELECT payload FROM jobloom_jobs")]
    assert len(payloads) == 3 and all(is_encrypted(p) for p in payloads)
    again = runner.invoke(cli, ["reencrypt", "--app", "keyed_app:app"])
    assert again.exit_code == 0 and "rewritten: 0" in again.output
