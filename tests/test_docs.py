"""Every code block of the README and of the documentation site (docs/**/*.md) runs as written.

By language:

- ```python: run as a script of its own (a process forked from a Python that has already started,
  ``tests/forkcli.py``), in a fresh folder (its SQLite files land there), with ``examples/`` importable
  (snippets may import the example modules the docs name).
- ```bash (and sh, shell): the blocks of one page run in order, each with ``bash -euo pipefail`` in one
  fresh folder of the page, with the venv's ``jobloom`` on PATH and ``myapp.jobs:app``
  (tests/snippets/myapp) importable, its store ``sqlite:///jobloom.db`` in that folder. If a block
  of the page calls ``localhost:8080``, the test first starts a real ``jobloom serve --app
  myapp.jobs:app`` for the page on a free port (the blocks' ``localhost:8080`` is replaced by it)
  with ``$JOBLOOM_TOKEN`` (scope admin) and ``$WORKER_TOKEN`` (scope worker) set. ``curl`` fails the
  block on an answer that no example expects: no connection, 401, 403, 404, 405, 415 or a 5xx.
- ```json, ```toml, ```yaml, ```ini: parsed (a json block may also be JSON lines; ini as systemd reads a unit).
- ```text, ```mermaid and unlabelled blocks show output or drawings: nothing to run (the architecture
  page's state diagram is checked by tests/unit/test_architecture_doc.py).
- any other language: only with a skip directive.

A comment on the line before a block may say how to run it:

- ``<!-- snippet: continues -->``: the python block goes on from the one before (both run as one script);
- ``<!-- snippet: postgres -->``: the python block's ``postgresql://...`` URL is replaced by the test
  PostgreSQL server's, and its ``schema="..."`` by a private schema, migrated first and dropped after;
- ``<!-- snippet: skip REASON -->``: not run, for the reason given (a block cannot opt out without one).

Any new block, on any page, is checked the same way, with no change here.
"""

from __future__ import annotations

import configparser
import json
import os
import re
import signal
import subprocess
import sys
import time
import tomllib
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import forkcli

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").rglob("*.md"))]
DIRECTIVE = re.compile(r"^<!--\s*snippet:\s*(?P<kind>[\w-]+)\s*(?P<reason>.*?)\s*-->$")
FENCE = re.compile(r"^(?P<indent>\s*)```(?P<lang>[\w+-]*)\s*$")
KINDS = ("continues", "postgres", "skip")
SHELL = ("bash", "sh", "shell")
PARSED = ("json", "toml", "yaml", "ini")
SHOWN = ("", "text", "mermaid")
SERVER = "localhost:8080"

pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class Snippet:
    """One fenced block: its page, where it starts, its language, its code, and how it is run."""

    page: str
    line: int
    lang: str
    code: str
    kind: str
    reason: str
    program: str  # what runs: the block, after the blocks it continues

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def snippets(path: Path) -> list[Snippet]:
    """A page's fenced blocks, in order."""
    page = str(path.relative_to(ROOT))
    found: list[Snippet] = []
    lines = path.read_text().splitlines()
    i = 0
    while i < len(lines):
        fence = FENCE.match(lines[i])
        if fence is None:
            i += 1
            continue
        start, indent = i, len(fence["indent"])
        end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == "```"), None)
        assert end is not None, f"{page}:{start + 1}: a block that never ends"
        code = "\n".join(line[indent:] for line in lines[start + 1:end]) + "\n"
        before = next((lines[j].strip() for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        match = DIRECTIVE.match(before)
        kind, reason = (match["kind"], match["reason"]) if match else ("run", "")
        program = code
        if kind == "continues":
            previous = [s for s in found if s.lang == fence["lang"]]
            assert previous, f"{page}:{start + 1}: a first block cannot continue another"
            program = previous[-1].program + "\n" + code
        found.append(Snippet(page, start + 1, fence["lang"], code, kind, reason, program))
        i = end + 1
    return found


ALL = [s for page in PAGES for s in snippets(page)]


def _runs(lang: str, *kinds: str) -> list[Snippet]:
    return [s for s in ALL if s.lang == lang and s.kind in kinds]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_directive_is_known_and_every_block_can_be_checked(page: Path) -> None:
    name = str(page.relative_to(ROOT))
    for n, line in enumerate(page.read_text().splitlines(), 1):
        if "<!-- snippet" in line:
            match = DIRECTIVE.match(line.strip())
            assert match and match["kind"] in KINDS, f"{name}:{n}: unknown snippet directive {line.strip()!r}"
            if match["kind"] == "skip":
                assert len(match["reason"]) >= 10, f"{name}:{n}: a skipped snippet must say why"
    for s in snippets(page):
        known = ("python", *SHELL, *PARSED, *SHOWN)
        assert s.lang in known or s.kind == "skip", (
            f"{s.where}: a ```{s.lang} block cannot be run: say why with <!-- snippet: skip REASON -->")
        assert s.kind in ("run", "skip") or s.lang == "python", f"{s.where}: {s.kind} applies to python blocks"


def test_the_docs_have_snippets_of_every_kind() -> None:
    assert len(_runs("python", "run", "continues")) >= 10
    assert _runs("python", "postgres")
    assert any(SERVER in s.code for s in ALL if s.lang == "bash" and s.kind == "run")


# -- python -----------------------------------------------------------------------------------------


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBLOOM_")}
    path = os.pathsep.join(p for p in (str(ROOT / "examples"), str(ROOT / "tests" / "snippets"),
                                       os.environ.get("PYTHONPATH", "")) if p)
    bin_dir = str(Path(sys.executable).parent)
    env.update(PYTHONPATH=path, JOBLOOM_SIGNING_SECRET="a-secret-of-at-least-16-bytes", NO_COLOR="1",
               PATH=os.pathsep.join([bin_dir, env.get("PATH", "")]), COLUMNS="120")
    return env


def _run(snippet: Snippet, program: str, folder: Path) -> None:
    script = folder / "snippet.py"
    script.write_text(program)
    # ``python snippet.py``, forked from a Python that has already started (``tests/forkcli.py``): the
    # script runs in a namespace of its own, its folder first on ``sys.path``, as ``__main__``
    code = (f"import runpy, sys; sys.argv[:] = [{str(script)!r}]; sys.path[0] = {str(folder)!r}; "
            "runpy.run_path(sys.argv[0], run_name='__main__')")
    done = forkcli.run([], code=code, cwd=folder, env=_env(), timeout=300)
    assert done.returncode == 0, f"{snippet.where}: the snippet failed:\n{program}\n{done.stdout}\n{done.stderr}"


@pytest.mark.parametrize("snippet", _runs("python", "run", "continues"), ids=lambda s: s.where)
def test_snippet_runs_as_written(snippet: Snippet, tmp_path: Path) -> None:
    _run(snippet, snippet.program, tmp_path)


@pytest.mark.postgres
@pytest.mark.parametrize("snippet", _runs("python", "postgres"), ids=lambda s: s.where)
def test_postgres_snippet_runs_against_the_test_server(snippet: Snippet, tmp_path: Path) -> None:
    from .conftest import INSTALL_POSTGRES, POSTGRES_URL, require_module, require_postgres

    require_module("jobloom.store.postgres", INSTALL_POSTGRES)
    require_postgres()
    import psycopg

    schema = f"jl_readme_{uuid.uuid4().hex[:10]}"
    program = re.sub(r"postgresql://[^\"' ]+", POSTGRES_URL, snippet.program)
    program = re.sub(r'schema="[^"]*"', f'schema="{schema}"', program)
    assert POSTGRES_URL in program, f"{snippet.where}: a postgres snippet names no postgresql:// URL"
    migrate = [sys.executable, "-m", "jobloom.cli", "migrate", "--url", POSTGRES_URL, "--schema", schema]
    try:
        done = forkcli.run(migrate[3:], cwd=tmp_path, env=_env(), timeout=60)
        assert done.returncode == 0, done.stderr
        _run(snippet, program, tmp_path)
    finally:
        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


# -- json, toml, yaml -------------------------------------------------------------------------------


@pytest.mark.parametrize("snippet", [s for s in ALL if s.lang in PARSED and s.kind == "run"], ids=lambda s: s.where)
def test_data_block_parses(snippet: Snippet) -> None:
    if snippet.lang == "json":
        try:
            json.loads(snippet.code)
        except json.JSONDecodeError:  # JSON lines: one document per line
            for line in filter(None, (x.strip() for x in snippet.code.splitlines())):
                json.loads(line)
    elif snippet.lang == "toml":
        tomllib.loads(snippet.code)
    elif snippet.lang == "ini":
        units = configparser.ConfigParser(strict=False, interpolation=None)
        units.optionxform = str  # type: ignore[assignment,method-assign]
        units.read_string(snippet.code)
        assert units.sections(), f"{snippet.where}: no section"
    else:
        import yaml

        list(yaml.safe_load_all(snippet.code))


# -- shell ------------------------------------------------------------------------------------------

CURL = r"""
curl() {  # the answer as curl prints it; an answer no example expects fails the block
  local out status
  out=$(command curl -sS -w '\n%{http_code}' "$@") || { echo "curl $*: no answer" >&2; return 1; }
  status=${out##*$'\n'}
  printf '%s\n' "${out%$'\n'*}"
  case $status in
    000|401|403|404|405|415|5??) echo "curl $*: HTTP $status" >&2; return 1 ;;
  esac
}
"""


def _cli(folder: Path, *args: str) -> str:
    done = forkcli.run(args, cwd=folder, env=_env(), timeout=60)
    assert done.returncode == 0, f"jobloom {' '.join(args)}: {done.stderr}"
    return done.stdout.strip()


@contextmanager
def _served(folder: Path) -> Iterator[tuple[str, dict[str, str]]]:
    """A real ``jobloom serve --app myapp.jobs:app`` on the folder's store: its address and the tokens' env."""
    import httpx

    from tests.dashboard.conftest import free_port

    url = "sqlite:///jobloom.db"
    _cli(folder, "migrate", "--url", url)
    tokens = {"JOBLOOM_TOKEN": _cli(folder, "tokens", "create", "docs-admin", "--scopes", "admin", "--url", url),
              "WORKER_TOKEN": _cli(folder, "tokens", "create", "docs-worker", "--scopes", "worker", "--url", url)}
    port = free_port()
    log = folder / "serve.log"
    command = [sys.executable, "-m", "jobloom.cli", "serve", "--app", "myapp.jobs:app", "--port", str(port),
               "--log-level", "warning"]
    with log.open("w") as out:
        proc = subprocess.Popen(command, cwd=folder, env=_env(), stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, f"jobloom serve exited: {log.read_text()}"
            try:
                if httpx.get(f"http://127.0.0.1:{port}/v1/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, f"jobloom serve did not answer: {log.read_text()}"
            time.sleep(0.05)
        yield f"127.0.0.1:{port}", tokens
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


SHELL_PAGES = sorted({s.page for s in ALL if s.lang in SHELL and s.kind == "run"})


@pytest.mark.parametrize("page", SHELL_PAGES)
def test_shell_blocks_of_the_page_run_as_written(page: str, tmp_path: Path) -> None:
    blocks = [s for s in ALL if s.page == page and s.lang in SHELL and s.kind == "run"]
    env = _env()
    with _served(tmp_path) if any(SERVER in s.code for s in blocks) else _nothing() as (address, tokens):
        env.update(tokens)
        forks = forkcli.ShellServer(env)  # `jobloom` forked from a Python that has imported it, not started anew
        try:
            for block in blocks:
                program = block.code.replace(SERVER, address) if address else block.code
                # a generous bound: a block of 20 commands takes a minute when each starts Python on a loaded machine
                done = subprocess.run(["bash", "-euo", "pipefail", "-c", CURL + forkcli.BASH_FUNCTION + program],
                                      cwd=tmp_path, env={**env, "FORKCLI_PORT": str(forks.port)},
                                      capture_output=True, text=True, timeout=600)
                assert done.returncode == 0, (f"{block.where}: the block failed (status {done.returncode}):\n"
                                              f"{program}\n{done.stdout}\n{done.stderr}")
        finally:
            forks.close()


@contextmanager
def _nothing() -> Iterator[tuple[str, dict[str, str]]]:
    yield "", {}


# -- the README as a front page ---------------------------------------------------------------------

FIGURE = re.compile(r"\b\d[\d,.]*\s*(?:jobs/s|jobs per second|ms per|µs per|MB\b)")


def test_the_readme_is_a_front_page_of_at_most_200_lines() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines: move the detail into docs/"
    for page in ("docs/tutorials/first-job.md", "docs/reference/cli.md", "docs/explanation/performance.md"):
        assert f"]({page})" in README.read_text(), f"the README does not link {page}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_benchmark_figures_live_on_the_performance_page_only(page: Path) -> None:
    """Every figure is in one place, with its date, machine and command: benchmarks/RESULTS.md, or the
    performance page for the few measured elsewhere; every other page links there."""
    if page.name == "performance.md":
        return
    found = [m.group(0) for m in FIGURE.finditer(page.read_text())]
    assert not found, f"{page.relative_to(ROOT)} quotes figures {found}: link the performance page instead"
