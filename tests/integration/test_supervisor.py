"""The supervisor under real crashes and real signals: restart rule, backoff, give-up, no orphans."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import re
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

import jobloom
from jobloom.engine import supervisor
from tests.helpers import eventually, eventually_sync

from .conftest import Processes

pytestmark = pytest.mark.slow

SERVE = textwrap.dedent("""
    import json, logging, sys
    from jobloom.engine.supervisor import serve
    logging.basicConfig(level=logging.INFO, format="%(created).6f %(name)s %(message)s", stream=sys.stderr)
    options = json.loads(sys.argv[2])
    sys.exit(serve(sys.argv[1], **options))
""")
LINE = re.compile(r"^(\d+\.\d+) jobloom\.supervisor (\w+) (.*)$")

SUPERVISE = textwrap.dedent("""
    import importlib.util, json, logging, sys
    spec = importlib.util.spec_from_file_location("supervisor_alone", sys.argv[1])
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    logging.basicConfig(level=logging.INFO, format="%(created).6f jobloom.supervisor %(message)s", stream=sys.stderr)
    sys.exit(module.supervise(json.loads(sys.argv[2]), **json.loads(sys.argv[3])))
""")
STUB = textwrap.dedent("""
    import os, random, sys, time
    if random.random() < 0.85 and not os.path.exists(os.environ["STUB_STOP"]):
        sys.exit(3)  # once the stop has begun, every process waits for its SIGTERM (or is killed later)
    os.write(int(sys.argv[-1]), b"R")
    time.sleep(60)
""")
HEALTHY_APP = textwrap.dedent("""
    import os, subprocess
    import jobloom

    class Noop(jobloom.Performer[dict, None]):
        async def perform(self, payload: dict) -> None:
            return None

    app = jobloom.App(os.environ["JOBLOOM_SUP_URL"], performers=[Noop], auto_migrate=True)

    @app.on_startup
    def list_inherited_fds() -> None:
        # What a job's subprocess inherits from this worker process (close_fds=False: everything inheritable).
        with open(os.path.join(os.environ["JOBLOOM_SUP_DIR"], f"fds-{os.getpid()}"), "w") as out:
            subprocess.run(["ls", "-1", "/proc/self/fd"], stdout=out, close_fds=False, check=True)
""")


class Event:
    """One supervisor log line: its time, its name and its key=value fields."""

    def __init__(self, at: float, name: str, rest: str) -> None:
        self.at = at
        self.name = name
        self.text = rest
        self.fields = dict(kv.split("=", 1) for kv in rest.split() if "=" in kv)

    def __getitem__(self, key: str) -> str:
        return self.fields[key]

    def __repr__(self) -> str:
        return f"{self.at:.3f} {self.name} {self.text}"


class Supervisor:
    """A supervisor in its own process (and process group), its log parsed into events."""

    def __init__(self, path: Path, env: dict[str, str], args: list[str]) -> None:
        self.log_path = path / f"supervisor-{time.monotonic_ns()}.log"
        with self.log_path.open("w") as log:
            self.proc = subprocess.Popen([sys.executable, *args], cwd=path, env={**env, "PYTHONPATH": str(path)},
                                         stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    @classmethod
    def serve(cls, path: Path, env: dict[str, str], app_ref: str, **options: Any) -> Supervisor:
        """``jobloom.engine.supervisor.serve()`` of ``app_ref``, with real worker processes."""
        options = {"grace": 2.0, "kill_margin": 2.0, "log_level": "warning", **options}
        return cls(path, env, ["-c", SERVE, app_ref, json.dumps(options)])

    def events(self, name: str | None = None, **fields: str) -> list[Event]:
        out = []
        for line in self.log_path.read_text().splitlines():
            m = LINE.match(line)
            if m:
                ev = Event(float(m[1]), m[2], m[3])
                if (name is None or ev.name == name) and all(ev.fields.get(k) == v for k, v in fields.items()):
                    out.append(ev)
        return out

    def group_alive(self) -> list[psutil.Process]:
        """Every live process of the supervisor's process group (the supervisor and each worker process)."""
        alive = []
        for p in psutil.process_iter():
            try:
                if os.getpgid(p.pid) == self.proc.pid and p.status() != psutil.STATUS_ZOMBIE:
                    alive.append(p)
            except (ProcessLookupError, psutil.NoSuchProcess):
                continue
        return alive

    def stop(self, timeout: float) -> int:
        """SIGTERM; the exit status, which must come within ``timeout`` seconds."""
        self.proc.send_signal(signal.SIGTERM)
        return self.wait(timeout)

    def wait(self, timeout: float) -> int:
        return self.proc.wait(timeout=timeout)

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)

    def log(self) -> str:
        return self.log_path.read_text()


@pytest.fixture
def supervisors() -> Iterator[list[Supervisor]]:
    started: list[Supervisor] = []
    try:
        yield started
    finally:
        for s in started:
            s.kill()


def assert_no_orphans(sup: Supervisor) -> None:
    survivors = sup.group_alive()
    assert not survivors, f"processes outlived the supervisor: {survivors}\n{sup.log()}"
    with pytest.raises(ProcessLookupError):
        os.killpg(sup.proc.pid, 0)


@pytest.fixture
async def app(procs: Processes) -> Any:
    sys.path.insert(0, str(procs.state_dir))
    import importlib

    import itapp  # type: ignore[import-not-found]

    importlib.reload(itapp)
    app = jobloom.App(procs.url, performers=[itapp.app.specs[b].cls for b in itapp.app.specs],
                      flows=list(itapp.app.flows.values()), auto_migrate=True, lease=1.0)
    await app.store()
    yield app
    await app.close()
    sys.path.remove(str(procs.state_dir))


@pytest.mark.serial  # a time bound: a killed process is back within 1.5 s
async def test_a_worker_process_killed_every_second_is_back_promptly_and_jobs_finish(
    app: jobloom.App, procs: Processes, supervisors: list[Supervisor]
) -> None:
    sup = Supervisor.serve(procs.state_dir, {**procs.env, "JOBLOOM_IT_LEASE": "1.0"}, "itapp:app", processes=2,
                     concurrency=4)
    supervisors.append(sup)
    await eventually(lambda: len(sup.events("worker_process_ready")) == 2, timeout=30, what="both ready")
    jobs: list[int] = []
    back_in: list[float] = []
    last_kill = 0.0
    for _ in range(7):
        victim = int(sup.events("worker_process_ready", slot="0")[-1]["pid"])
        jobs += [j.id for j in await app.enqueue_many([("Plain", {"n": i}) for i in range(20)])]
        # One kill a second (or as soon as the new process is ready): the pace of the fault, not a wait.
        await asyncio.sleep(max(0.0, last_kill + 1.0 - time.monotonic()))
        last_kill = time.monotonic()
        killed_at = time.time()
        os.kill(victim, signal.SIGKILL)

        def since_kill(name: str, after: float = killed_at) -> list[Event]:
            return [e for e in sup.events(name, slot="0") if e.at > after]

        started = await eventually(lambda: since_kill("worker_process_started"), timeout=10, what="slot 0 restarted")
        back_in.append(started[0].at - killed_at)
        await eventually(lambda: since_kill("worker_process_ready"), timeout=30, what="slot 0 ready again")
    # Every death came after ready: restarted after the short delay each time, never backed off.
    exits = sup.events("worker_process_exited")
    assert [(e["slot"], e["ready"], e["restart_in"], e["signal"]) for e in exits] == [
        ("0", "yes", "0.10s", "SIGKILL")] * 7, exits
    assert max(back_in) < 1.5, back_in
    assert max(back_in) < min(back_in) + 0.5, f"restart delays grew: {back_in}"
    assert len(sup.events("worker_process_started", slot="1")) == 1  # the other slot was never touched

    async def all_done() -> bool:
        done = await app.list_jobs(binding="Plain", state="succeeded", limit=10_000)
        return len({j.id for j in done} & set(jobs)) == len(jobs)

    await eventually(all_done, timeout=60, interval=0.1, what="every job enqueued during the kills succeeded")
    assert sup.stop(timeout=2.0 + 2.0 + 5) == 0
    assert_no_orphans(sup)


def _write_app(path: Path, name: str, source: str) -> str:
    (path / f"{name}.py").write_text(source)
    return f"{name}:app"


def test_a_process_that_never_gets_ready_backs_off_then_the_supervisor_gives_up(
    tmp_path: Path, supervisors: list[Supervisor]
) -> None:
    # The first process to import the app claims the healthy role; every later import fails.
    ref = _write_app(tmp_path, "halfbroken", HEALTHY_APP + textwrap.dedent("""
        try:
            os.close(os.open(os.path.join(os.environ["JOBLOOM_SUP_DIR"], "healthy"), os.O_CREAT | os.O_EXCL))
        except FileExistsError:
            raise RuntimeError("this app cannot be imported") from None
    """))
    env = {**os.environ, "JOBLOOM_SUP_URL": f"sqlite:///{tmp_path}/sup.db", "JOBLOOM_SUP_DIR": str(tmp_path)}
    sup = Supervisor.serve(tmp_path, env, ref, processes=2, log_level="info", backoff_first=0.1, backoff_max=0.4,
                           give_up_after=5)
    supervisors.append(sup)
    status = sup.wait(timeout=60)
    assert status == 1, sup.log()
    ready = sup.events("worker_process_ready")
    assert len(ready) == 1, sup.log()
    bad = "1" if ready[0]["slot"] == "0" else "0"
    starts = sup.events("worker_process_started", slot=bad)
    exits = sup.events("worker_process_exited", slot=bad)
    assert [e["restart_in"] for e in exits] == ["0.10s", "0.20s", "0.40s", "0.40s"], exits
    assert all(e["code"] == "1" and e["ready"] == "no" for e in exits), exits
    # The measured pause between an exit and the next start: the configured delay, growing to the cap.
    gaps = [s.at - e.at for e, s in zip(exits, starts[1:], strict=True)]
    for gap, delay in zip(gaps, [0.1, 0.2, 0.4, 0.4], strict=True):
        assert delay - 0.01 <= gap < delay + 0.3, gaps
    gave_up = sup.events("worker_process_gave_up")
    assert len(gave_up) == 1, sup.log()
    assert (gave_up[0]["slot"], gave_up[0]["code"], gave_up[0]["crashes_before_ready"]) == (bad, "1", "5")
    log = sup.log()
    assert "worker_stopped" in log, "the healthy process was stopped gracefully"
    assert "worker_process_killed" not in log
    assert_no_orphans(sup)


def test_the_readiness_pipe_does_not_leak_into_subprocesses(tmp_path: Path, supervisors: list[Supervisor]) -> None:
    ref = _write_app(tmp_path, "healthy", HEALTHY_APP)
    env = {**os.environ, "JOBLOOM_SUP_URL": f"sqlite:///{tmp_path}/sup.db", "JOBLOOM_SUP_DIR": str(tmp_path)}
    sup = Supervisor.serve(tmp_path, env, ref)
    supervisors.append(sup)
    ready = eventually_sync(lambda: sup.events("worker_process_ready"), timeout=30, what="ready")
    child = psutil.Process(int(ready[0]["pid"]))
    cmdline = child.cmdline()
    fd = int(cmdline[cmdline.index("--ready-fd") + 1])
    inherited = (tmp_path / f"fds-{child.pid}").read_text().split()
    assert fd > 3 and str(fd) not in inherited, (fd, inherited)
    assert fd not in {f.fd for f in child.open_files()}
    assert not os.path.exists(f"/proc/{child.pid}/fd/{fd}") or "pipe" not in os.readlink(f"/proc/{child.pid}/fd/{fd}")
    assert sup.stop(timeout=2.0 + 2.0 + 5) == 0
    assert_no_orphans(sup)


def test_sigterm_at_any_moment_around_a_restart_reaches_every_process_and_leaves_no_orphan(
    tmp_path: Path, supervisors: list[Supervisor]
) -> None:
    # The supervisor module alone (no app to import: it starts in milliseconds), and worker processes
    # that mostly die at once before ready, else become ready and run until signalled: restarts all the time,
    # so a good share of the signals land while a process is being started.
    options = {"processes": 3, "stop_timeout": 3.0, "restart_delay": 0.0, "backoff_first": 0.001,
               "backoff_max": 0.005, "give_up_after": 1_000_000}
    args = ["-c", SUPERVISE, supervisor.__file__, json.dumps([sys.executable, "-S", "-c", STUB]), json.dumps(options)]
    rng = random.Random(int(os.environ.get("JOBLOOM_TEST_SEED", "0")) or None)
    started = reached = 0
    for i in range(30):
        stop_marker = tmp_path / f"stop-{i}"
        sup = Supervisor(tmp_path, {**os.environ, "STUB_STOP": str(stop_marker)}, args)
        supervisors.append(sup)

        def restarting(sup: Supervisor = sup) -> bool:
            return len(sup.events("worker_process_exited")) >= 3 or len(sup.events("worker_process_ready")) == 3

        eventually_sync(restarting, timeout=10, interval=0.005, what="restarts (or every process ready)")
        time.sleep(rng.uniform(0.0, 0.05))  # the moment of the signal is the input under test, not a wait
        stop_marker.touch()
        assert sup.stop(timeout=3.0 + 2) == 0, sup.log()
        assert_no_orphans(sup)
        # Every process alive at the stop got SIGTERM (one that was missed would run on and be killed).
        ends = {e["pid"]: e.fields.get("signal") or e["code"] for e in sup.events("worker_process_stopped")}
        # (none at all when every process happened to be between a crash and its restart: nothing to signal)
        assert set(ends.values()) <= {"SIGTERM", "3"}, sup.log()
        assert "worker_process_killed" not in sup.log()
        started += len(sup.events("worker_process_started"))
        reached += bool(ends)
    assert started > 150, f"the signals must come among many restarts ({started} starts in all)"
    assert reached, "no stop found a process alive: the signals never reached a worker"
