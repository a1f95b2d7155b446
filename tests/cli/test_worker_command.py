"""``jobloom worker``: one process by default, and a supervisor that never loads the app."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path

import psutil  # type: ignore[import-untyped,unused-ignore]
import pytest

from tests.cli.test_cli import DEADLINE, Env
from tests.helpers import eventually_sync

pytestmark = pytest.mark.slow


@pytest.fixture
def env(tmp_path: Path, _sqlite_template: str) -> Env:
    return Env(tmp_path).migrated(_sqlite_template)


def _start(env: Env, *args: str) -> subprocess.Popen[bytes]:
    log = (env.path / "worker.log").open("w")
    try:
        return subprocess.Popen(env.command("worker", "jobs_app:app", "--grace", "5", *args), cwd=env.path,
                                env=env.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    finally:
        log.close()


def _stop(proc: subprocess.Popen[bytes]) -> int:
    try:
        proc.send_signal(signal.SIGTERM)
        return proc.wait(timeout=DEADLINE)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)


def _loads_pydantic(pid: int) -> bool:
    """Whether a process has pydantic's compiled core mapped (an app loaded in it would have)."""
    return "pydantic_core" in Path(f"/proc/{pid}/maps").read_text()


def test_with_no_flags_the_worker_is_one_process_that_runs_jobs(env: Env) -> None:
    job = env.enqueue("SendMail", '{"to": "a@example.com"}')
    proc = _start(env)
    try:
        eventually_sync(lambda: env.job(job)["state"] == "succeeded", timeout=DEADLINE, what="the job to succeed")
        me = psutil.Process(proc.pid)
        assert me.children(recursive=True) == [], "no supervisor, no child: the worker is this process"
        assert "jobloom.process" in me.cmdline(), me.cmdline()  # the CLI's own modules are gone (exec)
        [attempt] = env.json("jobs", "show", str(job), "--url", env.url)["attempts"]
        assert int(attempt["worker"].split(":")[1]) == proc.pid, "the process started is the one that ran the job"
    finally:
        assert _stop(proc) == 0
    log = (env.path / "worker.log").read_text()
    assert "concurrency=100 sync_concurrency=16" in log, log


def test_the_supervisor_loads_no_app_and_restarts_a_killed_worker(env: Env) -> None:
    proc = _start(env, "--supervise", "--concurrency", "4")
    try:
        sup = psutil.Process(proc.pid)
        first = eventually_sync(lambda: sup.children(), timeout=DEADLINE, what="a worker process")[0]
        eventually_sync(lambda: _loads_pydantic(first.pid), timeout=DEADLINE, what="the worker to load the app")
        assert "jobloom.engine.supervisor" in sup.cmdline(), sup.cmdline()
        assert not _loads_pydantic(proc.pid), "the supervisor must not import the app"
        assert sup.memory_info().rss < 25 * 2**20, sup.memory_info().rss
        first.kill()
        eventually_sync(lambda: [c for c in sup.children() if c.pid != first.pid], timeout=DEADLINE,
                        what="the killed worker process to be restarted")
        job = env.enqueue("SendMail", '{"to": "b@example.com"}')
        eventually_sync(lambda: env.job(job)["state"] == "succeeded", timeout=DEADLINE, what="the job to succeed")
    finally:
        assert _stop(proc) == 0
    log = (env.path / "worker.log").read_text()
    assert "concurrency=4 sync_concurrency=4" in log, log


def test_every_way_to_start_refuses_a_mistake_with_the_same_line(env: Env) -> None:
    """A worker process alone checks the app and its store itself; with a supervisor or a metrics endpoint
    the command checks them before it starts any process. Either way a mistake is the same error line and
    exit status 1, and no process starts."""
    (env.path / "idle_app.py").write_text(f"import jobloom\napp = jobloom.App({env.url!r})\n")
    mistakes = {
        ("idle_app:app",): "error: idle_app:app has no performers: nothing to work on",
        ("jobs_app:app", "--bindings", "Nope"): "error: unknown binding 'Nope'; known bindings: ",
        ("jobs_app:app", "--pool-max", "2"): "error: invalid pool_max: 2; expected an option of a PostgreSQL store",
    }
    for args, line in mistakes.items():
        for way in ((), ("--processes", "2"), ("--supervise",), ("--metrics-port", "0")):
            done = env.run("worker", *args, *way, rc=1)
            assert done.stderr.startswith(line), (args, way, done.stderr)
