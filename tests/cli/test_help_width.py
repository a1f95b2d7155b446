"""Help text wraps to the terminal: no line of any command's ``--help`` is wider than ``COLUMNS``."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import typer.main
from click.testing import CliRunner

from jobloom.cli.main import cli
from jobloom.cli.usage import plain_flags, visible_commands


@pytest.mark.parametrize("width", [60, 40])
def test_every_commands_help_fits_the_terminal_width(width: int) -> None:
    command = plain_flags(typer.main.get_command(cli))
    paths = [[], *visible_commands(command)]
    assert ["runs", "list"] in paths and ["stats"] in paths
    env = {"COLUMNS": str(width), "NO_COLOR": "1", "TERM": "dumb"}
    for path in paths:
        result = CliRunner().invoke(command, [*path, "--help"], prog_name="jobloom", env=env)
        assert result.exit_code == 0, result.output
        wide = [line for line in result.output.splitlines() if len(line) > width]
        assert not wide, (path, wide)


def test_a_long_help_line_wraps_in_a_real_process_at_columns_60() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("TERMINAL_WIDTH", "JOBLOOM_APP", "JOBLOOM_URL")}
    env.update(COLUMNS="60", NO_COLOR="1")
    done = subprocess.run([sys.executable, "-m", "jobloom.cli", "worker", "--help"], env=env, capture_output=True,
                          text=True, timeout=60, check=True)
    lines = done.stdout.splitlines()
    assert max(len(line) for line in lines) <= 60, done.stdout
    # --processes' help (about 190 characters) is there whole, folded over the lines up to --supervise
    start = next(i for i, line in enumerate(lines) if "--processes" in line)
    end = next(i for i, line in enumerate(lines) if "--supervise" in line)
    assert end - start >= 4, done.stdout
    words = " ".join(line.strip("│ ").split("  ")[-1].strip() for line in lines[start:end])
    assert "does not load the app" in " ".join(words.split()), done.stdout
