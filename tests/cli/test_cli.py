"""The ``jobloom`` command line, run as a real process against a SQLite file and a tiny app module."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests import forkcli

APP_MODULE = '''
from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass

import jobloom


@dataclass
class Mail:
    to: str


class SendMail(jobloom.Performer[Mail, str]):
    async def perform(self, payload: Mail) -> str:
        return f"sent to {payload.to}"


class Boom(jobloom.Performer[Mail, None]):
    max_attempts = 1

    def perform(self, payload: Mail) -> None:
        raise RuntimeError(f"cannot mail {payload.to}")


class Sleepy(jobloom.Performer[Mail, None]):
    async def perform(self, payload: Mail) -> None:
        await asyncio.sleep(60)


app = jobloom.App(URL, performers=[SendMail, Boom, Sleepy])
_hook_calls = 0


@app.on_startup
def warm_up() -> None:
    """Fails on its first two calls in each process, then succeeds."""
    global _hook_calls
    _hook_calls += 1
    with open(HOOK_LOG, "a") as f:
        f.write(f"{os.getpid()} {_hook_calls}\\n")
    if _hook_calls <= 2:
        raise ConnectionError(f"warm-up failed (call {_hook_calls})")
'''

DEADLINE = 30.0


class Env:
    """A temporary folder with the app module, its SQLite file, and a way to run ``jobloom``."""

    def __init__(self, tmp_path: Path) -> None:
        self.path = tmp_path
        self.db = tmp_path / "jobs.db"
        self.url = f"sqlite:///{self.db}"
        self.hook_log = tmp_path / "hooks.log"
        source = APP_MODULE.replace("URL", repr(self.url), 1).replace("HOOK_LOG", repr(str(self.hook_log)), 1)
        (tmp_path / "jobs_app.py").write_text(textwrap.dedent(source))
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("JOBLOOM_")}
        path = os.pathsep.join(p for p in (str(tmp_path), os.environ.get("PYTHONPATH", "")) if p)
        self.env.update(PYTHONPATH=path, COLUMNS="200", NO_COLOR="1")

    def command(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "jobloom.cli", *args]

    def run(self, *args: str, rc: int = 0, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        """``jobloom ARGS`` as a process of its own (forked from a started Python: ``tests/forkcli.py``)."""
        done = forkcli.run(args, cwd=self.path, env={**self.env, **(env or {})}, timeout=60)
        shown = f"jobloom {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
        assert done.returncode == rc, shown
        if rc == 1:
            assert "Traceback" not in done.stderr, done.stderr
            lines = done.stderr.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
        return done

    def json(self, *args: str) -> Any:
        return json.loads(self.run(*args, "--json").stdout)

    def enqueue(self, binding: str, payload: str, *options: str) -> int:
        job = self.json("enqueue", binding, payload, "--app", "jobs_app:app", *options)
        return int(job["id"])

    def job(self, job_id: int) -> dict[str, Any]:
        return dict(self.json("jobs", "show", str(job_id), "--url", self.url)["job"])

    def drain(self) -> None:
        """Run every due job once, in a process of its own (``App.drain``)."""
        code = "import asyncio, jobs_app; asyncio.run(jobs_app.app.drain())"
        done = forkcli.run([], code=code, cwd=self.path, env=self.env, timeout=60)
        assert done.returncode == 0, done.stderr


    def migrated(self, template: str) -> Env:
        """This env with its SQLite file a copy of one the migrations built (``_sqlite_template`` in
        ``tests/conftest.py``): what ``jobloom migrate`` makes, without a process that makes it again for
        every test (``test_migrate_applies_then_reports_up_to_date`` runs the command itself)."""
        shutil.copyfile(template, self.db)
        return self


@pytest.fixture
def cli(tmp_path: Path, _sqlite_template: str) -> Env:
    return Env(tmp_path).migrated(_sqlite_template)


def wait_for(what: str, check: Callable[[], bool], timeout: float = DEADLINE) -> None:
    deadline = time.monotonic() + timeout
    delay = 0.05
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(delay)
        delay = min(delay * 2, 0.5)


# -- migrate, enqueue, list, show -------------------------------------------------------------------


def test_migrate_applies_then_reports_up_to_date(tmp_path: Path) -> None:
    env = Env(tmp_path)
    first = env.run("migrate", "--app", "jobs_app:app")
    assert "applied 0027_baseline" in first.stdout
    again = env.run("migrate", "--url", env.url)
    assert "up to date" in again.stdout


def test_enqueue_prints_id_and_state(cli: Env) -> None:
    out = cli.run("enqueue", "SendMail", '{"to": "a@example.com"}', "--app", "jobs_app:app").stdout
    assert out.strip() == "job 1 (SendMail) queued"
    later = cli.json("enqueue", "SendMail", '{"to": "b@example.com"}', "--app", "jobs_app:app", "--delay", "300",
                     "--priority", "7", "--unique-key", "u-1", "--concurrency-key", "tenant-1", "--max-attempts", "9")
    assert later["state"] == "scheduled"
    assert (later["priority"], later["unique_key"], later["concurrency_key"], later["max_attempts"]) == (
        7, "u-1", "tenant-1", 9)
    same = cli.enqueue("SendMail", '{"to": "c@example.com"}', "--unique-key", "u-1")
    assert same == later["id"], "a unique key that is taken returns the existing job"


def test_jobs_list_filters_and_json(cli: Env) -> None:
    ok = cli.enqueue("SendMail", '{"to": "a@example.com"}')
    boom = cli.enqueue("Boom", '{"to": "b@example.com"}')
    cli.drain()
    table = cli.run("jobs", "list", "--url", cli.url).stdout
    assert "SendMail" in table and "succeeded" in table
    assert "RuntimeError: cannot mail b@example.com" in table
    listed = cli.json("jobs", "list", "--url", cli.url)
    assert [j["id"] for j in listed] == [boom, ok], "newest first"
    failed = cli.json("jobs", "list", "--url", cli.url, "--state", "failed")
    assert [j["id"] for j in failed] == [boom]
    by_binding = cli.json("jobs", "list", "--app", "jobs_app:app", "--binding", "SendMail")
    assert [(j["id"], j["state"], j["result"]) for j in by_binding] == [(ok, "succeeded", "sent to a@example.com")]
    assert [j["id"] for j in cli.json("jobs", "list", "--url", cli.url, "--limit", "1")] == [boom]
    assert [j["id"] for j in cli.json("jobs", "list", "--url", cli.url, "--before", str(boom))] == [ok]


def test_jobs_show_has_fields_attempts_and_traceback(cli: Env) -> None:
    boom = cli.enqueue("Boom", '{"to": "b@example.com"}')
    cli.drain()
    out = cli.run("jobs", "show", str(boom), "--url", cli.url).stdout
    assert "Boom" in out and "failed" in out and "1 of 1" in out
    assert "attempts" in out and "outcome" in out
    assert "traceback of attempt 1:" in out
    assert 'raise RuntimeError(f"cannot mail {payload.to}")' in out
    assert "late report" not in out
    shown = cli.json("jobs", "show", str(boom), "--url", cli.url)
    assert shown["job"]["state"] == "failed"
    [attempt] = shown["attempts"]
    assert attempt["attempt"] == 1 and attempt["outcome"] == "failed"
    assert attempt["error"] == "RuntimeError: cannot mail b@example.com"
    assert "Traceback" in attempt["traceback"]


def test_late_report_column_appears_when_a_report_was_fenced_off() -> None:
    from datetime import UTC, datetime

    from rich.console import Console

    from jobloom.cli.jobs import attempts_table
    from jobloom.core.types import Attempt

    now = datetime.now(UTC)
    attempts = [
        Attempt(1, 1, "w1", now, now, "lost", "lease expired", None, reported_outcome="succeeded", reported_at=now),
        Attempt(1, 2, "w2", now, now, "succeeded", None, None),
    ]
    console = Console(width=200, record=True)
    console.print(attempts_table(attempts))
    text = console.export_text()
    assert "late report" in text and "succeeded at" in text
    console = Console(width=200, record=True)
    console.print(attempts_table(attempts[1:]))
    assert "late report" not in console.export_text()


def test_counts(cli: Env) -> None:
    cli.enqueue("SendMail", '{"to": "a@example.com"}')
    cli.enqueue("SendMail", '{"to": "b@example.com"}', "--delay", "600")
    cli.enqueue("Boom", '{"to": "c@example.com"}')
    assert cli.json("jobs", "counts", "--url", cli.url) == {
        "Boom": {"queued": 1}, "SendMail": {"queued": 1, "scheduled": 1}
    }
    table = cli.run("jobs", "counts", "--url", cli.url).stdout
    assert "scheduled" in table and "total" in table
    cli.drain()
    assert cli.json("jobs", "counts", "--url", cli.url) == {"Boom": {"failed": 1}, "SendMail": {"scheduled": 1}}
    table = cli.run("jobs", "counts", "--url", cli.url).stdout
    header = table.splitlines()[1]
    assert "failed" in header and "succeeded" not in header
    assert "succeeded and skipped jobs not counted (--finished counts them)" in table
    assert cli.json("jobs", "counts", "--finished", "--url", cli.url) == {
        "Boom": {"failed": 1}, "SendMail": {"scheduled": 1, "succeeded": 1}
    }
    assert "not counted" not in cli.run("jobs", "counts", "--finished", "--url", cli.url).stdout


# -- retry and cancel -------------------------------------------------------------------------------


def test_retry_and_cancel(cli: Env) -> None:
    boom = cli.enqueue("Boom", '{"to": "b@example.com"}')
    cli.drain()
    assert cli.job(boom)["state"] == "failed"
    out = cli.run("jobs", "retry", str(boom), "--url", cli.url).stdout
    assert out.strip() == f"job {boom} (Boom) retried: queued"
    assert cli.job(boom)["state"] == "queued"

    later = cli.enqueue("SendMail", '{"to": "a@example.com"}', "--delay", "600")
    out = cli.run("jobs", "cancel", str(later), "--app", "jobs_app:app").stdout
    assert out.strip() == f"job {later} (SendMail) cancelled: cancelled"
    again = cli.run("jobs", "cancel", str(later), "--url", cli.url, rc=1)
    assert f"cannot cancel job {later}: it is cancelled" in again.stderr
    back = cli.run("jobs", "retry", str(later), "--url", cli.url).stdout
    assert "queued" in back

    done = cli.enqueue("SendMail", '{"to": "c@example.com"}')
    cli.drain()
    refused = cli.run("jobs", "retry", str(done), "--url", cli.url, rc=1)
    assert f"cannot retry job {done}: it is succeeded" in refused.stderr
    missing = cli.run("jobs", "show", "999", "--url", cli.url, rc=1)
    assert "no job with id 999" in missing.stderr


def test_search_and_bulk_actions(cli: Env) -> None:
    booms = [cli.enqueue("Boom", f'{{"to": "{i}@example.com"}}') for i in range(3)]
    cli.drain()
    ok = cli.enqueue("SendMail", '{"to": "a@example.com"}', "--delay", "600")
    failed = cli.json("jobs", "list", "--url", cli.url, "--state", "failed", "--binding", "Boom", "--limit", "2")
    assert [j["id"] for j in failed] == sorted(booms, reverse=True)[:2]
    paged = cli.run("jobs", "list", "--url", cli.url, "--state", "failed", "--limit", "2")
    assert "more: --cursor j1." in paged.stderr
    cursor = paged.stderr.split("--cursor ")[1].split()[0]
    rest = cli.json("jobs", "list", "--url", cli.url, "--state", "failed", "--limit", "2", "--cursor", cursor)
    assert [j["id"] for j in rest] == [min(booms)]
    both = cli.json("jobs", "list", "--url", cli.url, "--state", "failed", "--state", "scheduled")
    assert sorted(j["id"] for j in both) == sorted([*booms, ok])
    assert cli.json("jobs", "list", "--url", cli.url, "--created-after", "2999-01-01") == []
    assert "--all" in cli.run("jobs", "retry", "--url", cli.url, "--state", "failed", rc=1).stderr
    asked = cli.run("jobs", "retry", "--url", cli.url, "--state", "failed", "--all", rc=1)  # not a terminal
    assert "retry the failed, stalled and cancelled jobs matching state=failed? Not confirmed" in asked.stderr
    assert cli.json("jobs", "list", "--url", cli.url, "--state", "failed") != []
    out = cli.run("jobs", "retry", "--url", cli.url, "--state", "failed", "--binding", "Boom", "--all", "--yes")
    assert out.stdout.strip() == "3 jobs retried"
    out = cli.run("jobs", "cancel", "--url", cli.url, "--binding", "SendMail", "--all", "--yes")
    assert out.stdout.strip() == "1 job cancelled"
    out = cli.run("jobs", "delete", "--url", cli.url, "--state", "cancelled", "--state", "queued", "--all", "--yes")
    assert out.stdout.strip() == "0 jobs deleted"  # SQLite keeps the newest job; queued ones are not finished
    assert cli.job(ok)["state"] == "cancelled"


# -- mistakes ---------------------------------------------------------------------------------------


def test_bad_json_names_the_problem(cli: Env) -> None:
    done = cli.run("enqueue", "SendMail", '{"to": ', "--app", "jobs_app:app", rc=1)
    assert "invalid JSON payload" in done.stderr and "Expecting value" in done.stderr


def test_payload_is_validated_by_the_performer(cli: Env) -> None:
    done = cli.run("enqueue", "SendMail", '{"too": "a"}', "--app", "jobs_app:app", rc=1)
    assert "invalid payload for SendMail" in done.stderr and "'to'" in done.stderr


def test_unknown_binding(cli: Env) -> None:
    done = cli.run("enqueue", "SendMial", "{}", "--app", "jobs_app:app", rc=1)
    assert "unknown binding 'SendMial'" in done.stderr and "SendMail" in done.stderr
    worker = cli.run("worker", "jobs_app:app", "--bindings", "SendMail,Nope", rc=1)
    assert "unknown binding 'Nope'" in worker.stderr


def test_invalid_options(cli: Env) -> None:
    attempts = cli.run("enqueue", "SendMail", '{"to": "a"}', "--app", "jobs_app:app", "--max-attempts", "0", rc=1)
    assert "invalid max_attempts" in attempts.stderr
    delivery = cli.run("enqueue", "SendMail", '{"to": "a"}', "--app", "jobs_app:app", "--delivery", "twice", rc=1)
    assert "invalid delivery" in delivery.stderr
    state = cli.run("jobs", "list", "--url", cli.url, "--state", "done", rc=1)
    assert "invalid state: 'done'" in state.stderr and "succeeded" in state.stderr
    rate = cli.run("limits", "set", "SendMail", "--rate-limit", "10/fortnight", "--url", cli.url, rc=1)
    assert "invalid rate_limit" in rate.stderr
    # Values the parser itself rejects are usage errors: exit status 2, naming the option.
    usage = cli.run("jobs", "list", "--url", cli.url, "--limit", "many", rc=2)
    assert "--limit" in usage.stderr and "Traceback" not in usage.stderr


def _one_usage_line(done: subprocess.CompletedProcess[str]) -> str:
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert "Traceback" not in done.stderr and "╭" not in done.stderr, done.stderr
    return lines[0]


def test_usage_errors_are_one_line_saying_what_to_give(cli: Env) -> None:
    show = _one_usage_line(cli.run("jobs", "show", "abc", "--url", cli.url, rc=2))
    assert "JOB_ID 'abc' is not a whole number" in show and "jobloom jobs show --help" in show
    delay = _one_usage_line(cli.run("enqueue", "SendMail", "{}", "--delay", "soon", "--app", "jobs_app:app", rc=2))
    assert "--delay 'soon' is not a number: give a number" in delay
    for command in (("enqueue", "SendMail", "{}"), ("schedules", "trigger", "nightly")):
        line = _one_usage_line(cli.run(*command, "--url", cli.url, rc=2))
        assert "takes --app MODULE:ATTR" in line and "not --url" in line, line
    typo = _one_usage_line(cli.run("jobs", "list", "--jsn", "--url", cli.url, rc=2))
    assert "--jsn" in typo and "--json" in typo
    assert "missing argument 'MODULE:ATTR'" in _one_usage_line(cli.run("worker", rc=2))


def test_help_shows_no_type_after_plain_flags(cli: Env) -> None:
    for command in (("jobs", "list"), ("jobs", "counts"), ("migrate",), ()):
        text = cli.run(*command, "--help").stdout
        assert "--json" in text or "--help" in text
        assert "<bool>" not in text, text
    assert "SECONDS" in cli.run("jobs", "list", "--help").stdout  # --wait still shows what it takes


def test_enqueue_with_a_huge_priority_is_one_error_line(cli: Env) -> None:
    done = cli.run("enqueue", "SendMail", '{"to": "a"}', "--app", "jobs_app:app", "--priority", str(10**30), rc=1)
    assert "invalid priority" in done.stderr and "-2147483648 to 2147483647" in done.stderr


def test_enqueue_with_a_payload_nested_10000_deep_is_one_error_line(cli: Env) -> None:
    deep = "[" * 10_000 + "]" * 10_000
    done = cli.run("enqueue", "SendMail", deep, "--app", "jobs_app:app", rc=1)
    assert "invalid JSON payload" in done.stderr and "nested deeper than 64" in done.stderr


def test_enqueue_with_nan_in_the_payload_is_one_error_line(cli: Env) -> None:
    done = cli.run("enqueue", "SendMail", '{"to": NaN}', "--app", "jobs_app:app", rc=1)
    assert "invalid JSON payload" in done.stderr and "NaN is not JSON" in done.stderr
    inf = cli.run("enqueue", "SendMail", '{"to": "a"}', "--app", "jobs_app:app", "--delay", "inf", rc=1)
    assert "invalid delay" in inf.stderr
    digits = cli.run("enqueue", "SendMail", "[" + "9" * 5000 + "]", "--app", "jobs_app:app", rc=1)
    assert "invalid JSON payload" in digits.stderr


def test_target_mistakes(cli: Env) -> None:
    nothing = cli.run("jobs", "list", rc=1)
    assert "--app" in nothing.stderr and "--url" in nothing.stderr
    both = cli.run("jobs", "list", "--app", "jobs_app:app", "--url", cli.url, rc=1)
    assert "not both" in both.stderr
    assert "cannot import 'nowhere'" in cli.run("jobs", "list", "--app", "nowhere:app", rc=1).stderr
    assert "must look like MODULE:ATTR" in cli.run("worker", "jobs_app", rc=1).stderr
    assert "unsupported store URL" in cli.run("jobs", "list", "--url", "mysql://db/jobs", rc=1).stderr
    needs_code = cli.run("enqueue", "SendMail", '{"to": "a"}', "--url", cli.url, rc=2)
    assert "--url" in needs_code.stderr
    (cli.path / "other.db").touch()
    unmigrated = cli.run("jobs", "list", "--url", f"sqlite:///{cli.path / 'other.db'}", rc=1)
    assert "run `jobloom migrate`" in unmigrated.stderr
    schema = cli.run("migrate", "--url", cli.url, "--schema", "jobs", rc=1)
    assert "PostgreSQL" in schema.stderr
    app_schema = cli.run("jobs", "list", "--app", "jobs_app:app", "--schema", "jobs", rc=1)
    assert "--schema goes with --url" in app_schema.stderr


def test_environment_gives_defaults(cli: Env) -> None:
    job = cli.run("enqueue", "SendMail", '{"to": "a"}', "--json", env={"JOBLOOM_APP": "jobs_app:app"})
    job_id = json.loads(job.stdout)["id"]
    listed = json.loads(cli.run("jobs", "list", "--json", env={"JOBLOOM_URL": cli.url}).stdout)
    assert [j["id"] for j in listed] == [job_id]
    # Both in the environment: the app wins (it knows its store); a flag wins over the environment.
    both = {"JOBLOOM_APP": "jobs_app:app", "JOBLOOM_URL": "mysql://nowhere"}
    assert json.loads(cli.run("jobs", "list", "--json", env=both).stdout)[0]["id"] == job_id
    flag = cli.run("jobs", "list", "--json", "--url", cli.url, env={"JOBLOOM_APP": "nowhere:app"})
    assert json.loads(flag.stdout)[0]["id"] == job_id


def test_read_only_commands_refuse_a_missing_sqlite_file(cli: Env) -> None:
    missing = cli.path / "typo.db"
    url = f"sqlite:///{missing}"
    for command in (("jobs", "list"), ("jobs", "show", "1"), ("jobs", "counts"), ("schedules", "list"),
                    ("limits", "list"), ("bindings", "list"), ("jobs", "retry", "1")):
        done = cli.run(*command, "--url", url, rc=1)
        assert f"no SQLite store at {missing}" in done.stderr and "jobloom migrate" in done.stderr, command
    assert not missing.exists()
    # An app whose store file is not there yet: reading through it creates nothing either.
    (cli.path / "fresh_app.py").write_text(f"import jobloom\napp = jobloom.App({url!r})\n")
    assert f"no SQLite store at {missing}" in cli.run("jobs", "list", "--app", "fresh_app:app", rc=1).stderr
    assert not missing.exists()


def test_migrate_and_worker_refuse_a_missing_folder(cli: Env) -> None:
    folder = cli.path / "no" / "such"
    url = f"sqlite:///{folder / 'jobs.db'}"
    done = cli.run("migrate", "--url", url, rc=1)
    assert f"no folder {folder}" in done.stderr
    (cli.path / "far_app.py").write_text(
        cli.path.joinpath("jobs_app.py").read_text().replace(repr(cli.url), repr(url), 1)
    )
    assert f"no folder {folder}" in cli.run("worker", "far_app:app", rc=1).stderr
    pool = cli.run("worker", "jobs_app:app", "--pool-max", "2", rc=1).stderr
    assert "invalid pool_max: 2; expected an option of a PostgreSQL store" in pool
    assert f"no folder {folder}" in cli.run("enqueue", "SendMail", '{"to": "a"}', "--app", "far_app:app", rc=1).stderr
    assert not (cli.path / "no").exists()


def _closed_port() -> int:
    import socket

    with socket.socket() as s:  # a port the system just handed out and nothing listens on once it is closed
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# Bounds the time a command takes to give up, far enough from its waits to run beside other tests: 6.3 s
# for the 5 s wait (bound 10 s) and 2.2 s for the 1 s one (bound 5 s) beside three busy loops on two cores
def test_a_refused_postgresql_port_fails_within_the_wait(tmp_path: Path) -> None:
    from ..conftest import INSTALL_POSTGRES, require_module

    require_module("jobloom.store.postgres", INSTALL_POSTGRES)
    env = Env(tmp_path)
    port = _closed_port()
    url = f"postgresql://postgres@127.0.0.1:{port}/test"
    started = time.monotonic()
    done = env.run("migrate", "--url", url, rc=1)  # one line on stderr (checked by run)
    took = time.monotonic() - started
    assert f"127.0.0.1:{port}" in done.stderr and "gave up after 5.0 s" in done.stderr and "--wait" in done.stderr
    assert took < 10, took
    started = time.monotonic()
    done = env.run("jobs", "list", "--url", url, "--wait", "1", rc=1)
    assert "gave up after 1.0 s" in done.stderr and time.monotonic() - started < 5
    # the worker process makes the command's checks itself (without the CLI's memory), the same way
    (tmp_path / "down_app.py").write_text(
        "import jobloom\n\n\nclass Noop(jobloom.Performer[dict, None]):\n"
        "    async def perform(self, payload: dict) -> None:\n        pass\n\n\n"
        f"app = jobloom.App({url!r}, performers=[Noop])\n")
    started = time.monotonic()
    done = env.run("worker", "down_app:app", "--wait", "1", rc=1)
    assert "gave up after 1.0 s" in done.stderr and "--wait" in done.stderr and time.monotonic() - started < 5


@pytest.mark.postgres
def test_postgres_schema_through_url(tmp_path: Path) -> None:
    import uuid

    from ..conftest import INSTALL_POSTGRES, POSTGRES_URL, require_module, require_postgres

    require_module("jobloom.store.postgres", INSTALL_POSTGRES)

    require_postgres()
    import psycopg

    env = Env(tmp_path)
    schema = f"jl_cli_{uuid.uuid4().hex[:10]}"
    target = ("--url", POSTGRES_URL, "--schema", schema)
    try:
        assert "applied" in env.run("migrate", *target).stdout
        assert "up to date" in env.run("migrate", *target).stdout
        assert env.json("jobs", "list", *target) == []
        env.run("limits", "set", "SendMail", "--concurrency", "2", "--force", *target)
        [row] = env.json("limits", "list", *target)
        assert (row["binding"], row["concurrency"]) == ("SendMail", 2)
    finally:
        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


# -- limits -----------------------------------------------------------------------------------------


def test_limits_set_and_list(cli: Env) -> None:
    out = cli.run("limits", "set", "SendMail", "--concurrency", "3", "--rate-limit", "10/s", "--app",
                  "jobs_app:app").stdout
    assert "SendMail" in out and "3 *" in out and "10/s *" in out
    cli.run("limits", "set", "SendMail", "--priority-aging", "none", "--key-concurrency", "2", "--url", cli.url)
    rows = {r["binding"]: r for r in cli.json("limits", "list", "--app", "jobs_app:app")}
    assert set(rows) == {"Boom", "SendMail", "Sleepy"}
    mail = rows["SendMail"]
    assert (mail["concurrency"], mail["key_concurrency"], mail["rate_per_second"], mail["priority_aging"]) == (
        3, 2, 10.0, None)
    assert mail["overridden"] == ["concurrency", "key_concurrency", "priority_aging", "rate_limit"]
    lifted = cli.run("limits", "set", "SendMail", "--concurrency", "none", "--url", cli.url).stdout
    assert "unlimited *" in lifted
    unknown = cli.run("limits", "set", "Nope", "--concurrency", "2", "--app", "jobs_app:app", rc=1)
    assert "unknown binding 'Nope'" in unknown.stderr
    bare = cli.run("limits", "set", "Later", "--concurrency", "2", "--force", "--url", cli.url)
    assert "no worker has registered 'Later' yet" in bare.stderr
    nothing = cli.run("limits", "set", "SendMail", "--url", cli.url, rc=1)
    assert "nothing to set" in nothing.stderr
    held = cli.run("limits", "set", "SendMail", "--concurrency", "0", "--url", cli.url).stdout
    assert "0 *" in held
    assert next(r for r in cli.json("limits", "list", "--url", cli.url) if r["binding"] == "SendMail")[
        "concurrency"] == 0
    bad = cli.run("limits", "set", "SendMail", "--concurrency", "-1", "--url", cli.url, rc=1)
    assert "invalid concurrency" in bad.stderr and "from 0 to" in bad.stderr
    cli.run("limits", "reset", "SendMail", "concurrency", "rate_limit", "--url", cli.url)
    mail = next(r for r in cli.json("limits", "list", "--app", "jobs_app:app") if r["binding"] == "SendMail")
    assert mail["overridden"] == ["key_concurrency", "priority_aging"] and mail["concurrency"] is None
    cli.run("limits", "reset", "SendMail", "--url", cli.url)
    assert next(r for r in cli.json("limits", "list", "--url", cli.url) if r["binding"] == "SendMail")[
        "overridden"] == []
    wrong = cli.run("limits", "reset", "SendMail", "speed", "--url", cli.url, rc=1)
    assert "speed" in wrong.stderr


def test_limits_set_a_rate_per_key(cli: Env) -> None:
    out = cli.run("limits", "set", "SendMail", "--key-rate-limit", "2/s", "--app", "jobs_app:app").stdout
    assert "2/s/key *" in out
    mail = next(r for r in cli.json("limits", "list", "--url", cli.url) if r["binding"] == "SendMail")
    assert (mail["key_rate_per_second"], mail["key_burst"], mail["overridden"]) == (2.0, 1.0, ["key_rate_limit"])
    bad = cli.run("limits", "set", "SendMail", "--key-rate-limit", "fast", "--url", cli.url, rc=1)
    assert "invalid key_rate_limit on SendMail: 'fast'" in bad.stderr
    cli.run("limits", "set", "SendMail", "--key-rate-limit", "none", "--url", cli.url)
    mail = next(r for r in cli.json("limits", "list", "--url", cli.url) if r["binding"] == "SendMail")
    assert mail["key_rate_per_second"] is None


# -- bindings ---------------------------------------------------------------------------------------


def test_bindings_pause_resume_and_list(cli: Env) -> None:
    cli.run("enqueue", "SendMail", '{"to": "a@example.com"}', "--app", "jobs_app:app")
    out = cli.run("bindings", "pause", "SendMail", "--app", "jobs_app:app").stdout
    assert "SendMail" in out and "paused" in out
    rows = {r["binding"]: r for r in cli.json("bindings", "list", "--url", cli.url)}
    mail = rows["SendMail"]
    assert mail["paused"] is True and mail["paused_at"] and mail["counts"] == {"queued": 1}
    assert mail["workers"] == []
    listed = cli.run("bindings", "list", "--app", "jobs_app:app").stdout
    assert "paused" in listed and "1 queued" in listed and "Sleepy" in listed
    [resumed] = cli.json("bindings", "resume", "SendMail", "--url", cli.url)
    assert resumed["paused"] is False and resumed["counts"] == {"queued": 1}
    unknown = cli.run("bindings", "pause", "Nope", "--url", cli.url, rc=1)
    assert "unknown binding 'Nope'" in unknown.stderr


# -- the bench slot ---------------------------------------------------------------------------------


def test_bench_plugs_in_when_its_module_exists(tmp_path: Path) -> None:
    code = textwrap.dedent('''
        import sys, types, typer
        bench_pkg = types.ModuleType("jobloom.bench")
        bench_pkg.__path__ = []
        bench_cli = types.ModuleType("jobloom.bench.cli")
        bench_cli.app = typer.Typer()

        @bench_cli.app.command()
        def enqueue() -> None:
            """Enqueue throughput."""
            print("bench enqueue ran")

        sys.modules["jobloom.bench"] = bench_pkg
        sys.modules["jobloom.bench.cli"] = bench_cli
        from jobloom.cli.main import main
        main(["bench", "enqueue"])
    ''')
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "bench enqueue ran" in done.stdout


# -- worker processes -------------------------------------------------------------------------------


def _hook_calls(env: Env) -> dict[int, int]:
    calls: dict[int, int] = {}
    if env.hook_log.exists():
        for line in env.hook_log.read_text().splitlines():
            pid, n = map(int, line.split())
            calls[pid] = max(calls.get(pid, 0), n)
    return calls


def _states(env: Env, ids: list[int]) -> dict[int, str]:
    listed = env.json("jobs", "list", "--url", env.url, "--limit", "1000")
    return {j["id"]: j["state"] for j in listed if j["id"] in ids}


@pytest.mark.slow
def test_worker_processes_jobs_survives_failing_startup_hooks_and_stops_on_sigterm(cli: Env) -> None:
    before = [cli.enqueue("SendMail", f'{{"to": "user{i}@example.com"}}') for i in range(6)]
    log = (cli.path / "worker.log").open("w")
    proc = subprocess.Popen(
        cli.command("worker", "jobs_app:app", "--processes", "2", "--concurrency", "4", "--grace", "5"),
        cwd=cli.path, env=cli.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    try:
        # Each process's start-up hook fails twice, is retried, and succeeds on its third call.
        wait_for("both worker processes to finish their start-up hooks",
                 lambda: len(_hook_calls(cli)) == 2 and all(n >= 3 for n in _hook_calls(cli).values()))
        assert all(n == 3 for n in _hook_calls(cli).values()), _hook_calls(cli)
        after = [cli.enqueue("SendMail", f'{{"to": "late{i}@example.com"}}') for i in range(4)]
        jobs = before + after
        wait_for("every job to succeed", lambda: set(_states(cli, jobs).values()) == {"succeeded"})
        sample = (jobs[0], jobs[-1])
        workers = {a["worker"] for j in sample for a in cli.json("jobs", "show", str(j), "--url", cli.url)["attempts"]}
        assert {int(w.split(":")[1]) for w in workers} <= set(_hook_calls(cli)), "only hooked processes ran jobs"

        sleepy = cli.enqueue("Sleepy", '{"to": "nobody@example.com"}')
        wait_for("the sleepy job to start", lambda: cli.job(sleepy)["state"] == "running")
        out = cli.run("jobs", "cancel", str(sleepy), "--url", cli.url).stdout
        # The worker may stop the task before the command reads the job back.
        assert out.strip() in (f"job {sleepy} (Sleepy) cancelled: running (cancel requested)",
                               f"job {sleepy} (Sleepy) cancelled: cancelled")
        wait_for("the running job to be cancelled", lambda: cli.job(sleepy)["state"] == "cancelled")

        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=DEADLINE) == 0
        with pytest.raises(ProcessLookupError):
            os.killpg(proc.pid, 0)  # no worker process outlives the supervisor
    finally:
        log.close()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=DEADLINE)
    text = (cli.path / "worker.log").read_text()
    assert "warm-up failed (call 2)" in text
    assert "Traceback" not in text, text


def test_the_command_line_loads_the_web_stack_only_to_serve() -> None:
    # `jobloom worker` checks the app in the CLI's process before it becomes the worker: what the CLI
    # imports is memory and start-up time every worker pays (fastapi, starlette, jinja2: about 16 MB)
    code = ("import sys, jobloom.cli.main; "
            "print(sorted(m for m in ('fastapi', 'starlette', 'jinja2', 'uvicorn', 'prometheus_client', 'psycopg', "
            "'psutil', 'jobloom.bench') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]", out.stdout


# -- job text is printed literally -------------------------------------------------------------------


HOSTILE = "[/var/data/in.csv] [bold]x[/] \x1b]0;pwned\x07\x1b[31mred\x1b[0m :heartbeat: \u202eevil"


def test_job_text_is_printed_literally_and_control_characters_escaped(cli: Env) -> None:
    payload = json.dumps({"to": HOSTILE})
    boom = cli.enqueue("Boom", payload, "--unique-key", "a[/oops]b")
    cli.drain()
    for args in (("jobs", "list", "--url", cli.url), ("jobs", "show", str(boom), "--url", cli.url)):
        out = cli.run(*args).stdout  # a MarkupError would exit 1 with a traceback
        assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out, repr(out)
        assert "[/var/data/in.csv]" in out and ":heartbeat:" in out, out
    shown = cli.run("jobs", "show", str(boom), "--url", cli.url).stdout
    assert "a[/oops]b" in shown and "[bold]x[/]" in shown, shown
    assert "\\x1b]0;pwned\\x07" in shown and "\\u202e" in shown, shown  # shown as escapes


def test_jobs_why_names_the_debounce_window_and_the_expiry(cli: Env) -> None:
    first = cli.enqueue("Boom", '{"to": "a@example.com"}', "--debounce", "600", "--debounce-key", "user:42",
                        "--expires-in", "3600")
    again = cli.enqueue("Boom", '{"to": "b@example.com"}', "--debounce", "600", "--debounce-key", "user:42",
                        "--expires-in", "3600")
    assert again == first and cli.job(first)["payload"] == {"to": "b@example.com"}
    out = cli.run("jobs", "why", str(first), "--url", cli.url).stdout
    assert "debounce_window" in out and "'user:42'" in out and "expires" in out, out
    got = cli.json("jobs", "why", str(first), "--url", cli.url)
    assert got["reasons"][0]["code"] == "debounce_window" and got["ready"] is False
    missing = cli.run("jobs", "why", "999", "--url", cli.url, rc=1)
    assert "999" in missing.stderr
