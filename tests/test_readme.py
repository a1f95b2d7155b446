"""Every Python snippet of the README runs as written.

Each ```python block is run as a script of its own, in a fresh folder (its SQLite files land there),
with ``examples/`` importable (snippets may import the example modules the README names). A comment
on the line before a block may say how to run it:

- ``<!-- snippet: continues -->``: the block goes on from the one before (both run as one script);
- ``<!-- snippet: postgres -->``: the block's ``postgresql://...`` URL is replaced by the test
  PostgreSQL server's, and its ``schema="..."`` by a private schema, migrated first and dropped after;
- ``<!-- snippet: skip REASON -->``: not run, for the reason given (a block cannot opt out without one).

Any new block is checked the same way, with no change here.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DIRECTIVE = re.compile(r"^<!--\s*snippet:\s*(?P<kind>[\w-]+)\s*(?P<reason>.*?)\s*-->$")
KINDS = ("continues", "postgres", "skip")

pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class Snippet:
    """One ```python block: where it starts, its code, and how it is run."""

    line: int
    code: str
    kind: str
    reason: str
    program: str  # what runs: the block, after the blocks it continues


def snippets(text: str) -> list[Snippet]:
    """The README's python blocks, in order."""
    found: list[Snippet] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].strip() != "```python":
            i += 1
            continue
        start = i
        end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```")
        code = "\n".join(lines[start + 1:end]) + "\n"
        before = next((lines[j].strip() for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        match = DIRECTIVE.match(before)
        kind, reason = (match["kind"], match["reason"]) if match else ("run", "")
        program = code
        if kind == "continues":
            assert found, f"README.md:{start + 1}: a first block cannot continue another"
            program = found[-1].program + "\n" + code
        found.append(Snippet(start + 1, code, kind, reason, program))
        i = end + 1
    return found


ALL = snippets(README.read_text())


def test_the_readme_has_snippets_and_every_directive_is_known_and_explained() -> None:
    assert len(ALL) >= 10
    text = README.read_text()
    for n, line in enumerate(text.splitlines(), 1):
        if "<!-- snippet" in line:
            match = DIRECTIVE.match(line.strip())
            assert match and match["kind"] in KINDS, f"README.md:{n}: unknown snippet directive {line.strip()!r}"
            if match["kind"] == "skip":
                assert len(match["reason"]) >= 10, f"README.md:{n}: a skipped snippet must say why"


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBLOOM_")}
    path = os.pathsep.join(p for p in (str(ROOT / "examples"), os.environ.get("PYTHONPATH", "")) if p)
    env.update(PYTHONPATH=path, JOBLOOM_SIGNING_SECRET="a-secret-of-at-least-16-bytes", NO_COLOR="1")
    return env


def _run(program: str, folder: Path, line: int) -> None:
    script = folder / "snippet.py"
    script.write_text(program)
    done = subprocess.run([sys.executable, str(script)], cwd=folder, env=_env(), capture_output=True, text=True,
                          timeout=90)
    assert done.returncode == 0, f"README.md:{line}: the snippet failed:\n{program}\n{done.stdout}\n{done.stderr}"


@pytest.mark.parametrize("snippet", [s for s in ALL if s.kind in ("run", "continues")], ids=lambda s: f"line{s.line}")
def test_snippet_runs_as_written(snippet: Snippet, tmp_path: Path) -> None:
    _run(snippet.program, tmp_path, snippet.line)


@pytest.mark.postgres
@pytest.mark.parametrize("snippet", [s for s in ALL if s.kind == "postgres"], ids=lambda s: f"line{s.line}")
def test_postgres_snippet_runs_against_the_test_server(snippet: Snippet, tmp_path: Path) -> None:
    from .conftest import INSTALL_POSTGRES, POSTGRES_URL, require_module, require_postgres

    require_module("jobloom.store.postgres", INSTALL_POSTGRES)
    require_postgres()
    import psycopg

    schema = f"jl_readme_{uuid.uuid4().hex[:10]}"
    program = re.sub(r"postgresql://[^\"' ]+", POSTGRES_URL, snippet.program)
    program = re.sub(r'schema="[^"]*"', f'schema="{schema}"', program)
    assert POSTGRES_URL in program, f"README.md:{snippet.line}: a postgres snippet names no postgresql:// URL"
    migrate = [sys.executable, "-m", "jobloom.cli", "migrate", "--url", POSTGRES_URL, "--schema", schema]
    try:
        subprocess.run(migrate, check=True, capture_output=True, timeout=60, env=_env())
        _run(program, tmp_path, snippet.line)
    finally:
        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
