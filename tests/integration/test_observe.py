"""Operating jobloom, through real worker processes: the supervisor's metrics endpoint for all of its
processes (kill -9 of one included), JSON logs, OpenTelemetry traces continued across processes, and
no import of prometheus-client or OpenTelemetry when neither is enabled."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

import jobloom
from tests.helpers import eventually

HERE = Path(__file__).parent
pytestmark = pytest.mark.slow


def load_obsapp() -> ModuleType:
    spec = importlib.util.spec_from_file_location("obsapp_under_test", HERE / "obsapp.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Lines:
    """A process's stderr, read line by line on a thread (so it never blocks on a full pipe)."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.lines: list[str] = []
        assert proc.stderr is not None
        self._thread = threading.Thread(target=self._read, args=(proc.stderr,), daemon=True)
        self._thread.start()

    def _read(self, stream: Any) -> None:
        for raw in stream:
            self.lines.append(raw.decode("utf-8", "replace").rstrip("\n"))

    def records(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in list(self.lines) if line.startswith("{")]

    def events(self, name: str) -> list[dict[str, Any]]:
        return [r for r in self.records() if r.get("event") == name]

    def join(self) -> None:
        self._thread.join(10)


@pytest.fixture
def folder(tmp_path: Path, store_url: str) -> Iterator[tuple[Path, dict[str, str]]]:
    shutil.copy(HERE / "obsapp.py", tmp_path / "obsapp.py")
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "JOBLOOM_OBS_URL": store_url, "JOBLOOM_OBS_DIR": str(tmp_path)}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    yield tmp_path, env


@pytest.fixture
async def app(store_url: str) -> Any:
    obs = load_obsapp()
    app = jobloom.App(store_url, performers=[obs.Ok, obs.Boom, obs.Hold, obs.Step], flows=[obs.pipeline],
                      auto_migrate=True, lease=2.0)
    await app.migrate()
    yield app
    await app.close()


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def scrape(port: int) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str) -> float:
    """The sum of the samples of ``name`` whose labels include ``labels``."""
    want = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and want <= ls)


async def test_one_metrics_endpoint_for_every_worker_process_and_json_logs(
    folder: tuple[Path, dict[str, str]], app: jobloom.App
) -> None:
    tmp, env = folder
    proc = subprocess.Popen(
        [sys.executable, "-m", "jobloom.cli", "worker", "obsapp:app", "--processes", "2", "--concurrency", "8",
         "--grace", "2", "--metrics-port", "0", "--log-format", "json"],
        env=env, cwd=tmp, stderr=subprocess.PIPE)
    out = Lines(proc)
    try:
        serving = await eventually(lambda: out.events("metrics_serving"), timeout=30, what="metrics endpoint")
        port = int(serving[0]["port"])
        await eventually(lambda: len(out.events("worker_process_ready")) >= 2, timeout=30, what="2 ready processes")

        oks = await app.enqueue_many([(app.spec("Ok").cls, {"n": i}) for i in range(20)])
        booms = await app.enqueue_many([(app.spec("Boom").cls, {}) for _ in range(3)])

        async def all_done() -> bool:
            return all([(await app.get_job(j.id)).state in ("succeeded", "failed") for j in [*oks, *booms]])

        await eventually(all_done, timeout=30, what="the jobs to finish")
        first = await eventually(lambda: (s := scrape(port)) and value(
            s, "jobloom_jobs_finished_total", binding="Ok") == 20 and s, timeout=10, what="Ok outcomes counted")
        assert value(first, "jobloom_jobs_finished_total", binding="Ok", outcome="succeeded") == 20
        assert value(first, "jobloom_jobs_finished_total", binding="Boom", outcome="permanent") == 3
        assert value(first, "jobloom_jobs_started_total", binding="Ok") == 20
        assert value(first, "jobloom_job_run_seconds_count", binding="Ok") == 20
        assert value(first, "jobloom_job_wait_seconds_count", binding="Boom") == 3
        assert value(first, "jobloom_job_run_seconds_bucket", binding="Ok", le="+Inf") == 20
        assert value(first, "jobloom_worker_cycles_total") > 0
        assert value(first, "jobloom_store_up") == 1
        assert value(first, "jobloom_jobs", binding="Boom", state="failed") == 3
        assert value(first, "jobloom_jobs", binding="Ok", state="queued") == 0
        assert value(first, "jobloom_binding_concurrency_limit", binding="Ok") == 4
        assert value(first, "jobloom_binding_rate_limit", binding="Ok") == 1000
        assert 0 <= value(first, "jobloom_binding_rate_tokens", binding="Ok") <= 50
        assert ("jobloom_binding_concurrency_limit", frozenset({("binding", "Boom")})) not in first  # unlimited

        # kill -9 the process running a job: what it counted stays, its replacement counts on
        held = await app.enqueue(app.spec("Hold").cls, {})
        holding = await eventually(lambda: list(tmp.glob("holding-*")), timeout=20, what="a process to hold")
        victim = int(holding[0].name.split("-")[1])
        os.kill(victim, signal.SIGKILL)
        await eventually(lambda: any(e.get("pid") == victim for e in out.events("worker_process_exited")),
                         timeout=10, what="the supervisor to see the kill")
        after_kill = scrape(port)
        assert value(after_kill, "jobloom_jobs_finished_total", binding="Ok", outcome="succeeded") == 20
        assert value(after_kill, "jobloom_job_run_seconds_count", binding="Ok") == 20
        (tmp / "release").write_text("")
        await eventually(lambda: len(out.events("worker_process_ready")) >= 3, timeout=30, what="the replacement")
        more = await app.enqueue_many([(app.spec("Ok").cls, {"n": i}) for i in range(5)])
        await eventually(lambda: app.wait(held.id, timeout=20), timeout=25, what="the held job, retried")
        for j in more:
            await app.wait(j.id, timeout=20)
        last = await eventually(lambda: (s := scrape(port)) and value(
            s, "jobloom_jobs_finished_total", binding="Ok") == 25 and s, timeout=10, what="the later outcomes")
        assert value(last, "jobloom_jobs_finished_total", binding="Hold", outcome="succeeded") == 1
        assert value(last, "jobloom_jobs_finished_total", binding="Hold", outcome="lost") == 1  # reaped
        assert value(last, "jobloom_jobs_finished_total", binding="Ok", outcome="succeeded") == 25
        pids = {e["pid"] for e in out.events("worker_process_started")}
        assert len(pids) >= 3  # two, and the one that replaced the killed one
    finally:
        stop(proc)
        out.join()
    assert proc.returncode == 0

    # every line is one JSON object; one record per outcome, with its fields
    assert out.lines and all(line.startswith("{") for line in out.lines), out.lines[:5]
    outcomes = out.events("job_outcome")
    ok = [r for r in outcomes if r["binding"] == "Ok"]
    assert len(ok) == 25
    assert {r["job_id"] for r in ok} == {j.id for j in [*oks, *more]}
    for r in outcomes:
        assert {"job_id", "binding", "attempt", "outcome", "duration", "worker", "time", "level", "logger"} <= set(r)
        assert r["logger"] == "jobloom.worker" and r["duration"] >= 0
    assert {r["outcome"] for r in outcomes if r["binding"] == "Boom"} == {"permanent"}
    assert all("boom" in r["error"] for r in outcomes if r["binding"] == "Boom")
    started, stopped = out.events("worker_started"), out.events("worker_stopped")
    assert len(started) >= 3 and len(stopped) >= 2  # the killed one never logged its stop
    assert {r["worker"] for r in stopped} <= {r["worker"] for r in started}
    assert out.events("worker_process_stopped")


async def test_attempt_spans_continue_the_enqueuers_trace_across_processes(
    folder: tuple[Path, dict[str, str]], app: jobloom.App
) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from jobloom.observe.tracing import instrument

    tmp, env = folder
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrument(app, tracer_provider=provider)

    with provider.get_tracer("test").start_as_current_span("request") as request:
        job = await app.enqueue(app.spec("Ok").cls, {"n": 1}, meta={"request_id": "r-1"})
        step = await app.enqueue(app.spec("Step").cls, {})
    run = await app.start(app.flows["pipeline"], {"x": 1})
    assert (await app.get_job(job.id)).meta is not None
    assert (await app.get_job(job.id)).meta["request_id"] == "r-1"  # the caller's meta is kept beside the context

    proc = subprocess.Popen([sys.executable, "-m", "jobloom.process", "obsapp:app", "--log-level", "warning"],
                            env={**env, "JOBLOOM_OBS_TRACES": "1"}, cwd=tmp)
    try:
        await app.wait(job.id, timeout=30)
        await app.wait(step.id, timeout=30)
        await eventually(lambda: app.get_run(run.id), timeout=30)

        async def run_done() -> bool:
            return (await app.get_run(run.id)).state == "succeeded"

        await eventually(run_done, timeout=30, what="the flow run")
    finally:
        stop(proc)

    produced = {s.name: s for s in exporter.get_finished_spans() if s.name.startswith("send ")}
    send_ok = next(s for s in exporter.get_finished_spans()
                   if s.name == "send Ok" and s.attributes.get("messaging.message.id") == str(job.id))
    assert send_ok.kind.name == "PRODUCER"
    assert send_ok.parent is not None and send_ok.parent.span_id == request.get_span_context().span_id
    assert send_ok.attributes["messaging.system"] == "jobloom"
    assert send_ok.attributes["messaging.operation"] == "send"
    assert send_ok.attributes["messaging.destination.name"] == "Ok"
    assert produced

    spans = [json.loads(line) for f in tmp.glob("spans-*.jsonl") for line in f.read_text().splitlines()]
    consumed = next(s for s in spans if s["name"] == "process Ok" and s["attributes"]["messaging.message.id"]
                    == str(job.id))
    assert consumed["kind"] == "CONSUMER"
    assert consumed["trace_id"] == request.get_span_context().trace_id
    assert consumed["parent_id"] == send_ok.context.span_id
    assert consumed["links"] == [send_ok.context.span_id]
    for key, want in {"messaging.system": "jobloom", "messaging.operation": "process",
                      "messaging.destination.name": "Ok", "jobloom.attempt": 1,
                      "jobloom.outcome": "succeeded"}.items():
        assert consumed["attributes"][key] == want, key
    assert consumed["status"] == "UNSET"

    # a sync perform runs in a thread with the attempt's span current
    step_span = next(s for s in spans if s["name"] == "process Step")
    inside = next(s for s in spans if s["name"] == "inside-step")
    assert inside["parent_id"] == step_span["span_id"] and inside["trace_id"] == request.get_span_context().trace_id

    # the flow's nodes continue the trace of the run's start, and name their run
    start = next(s for s in exporter.get_finished_spans() if s.attributes.get("jobloom.run_id") == run.id)
    nodes = [s for s in spans if s["attributes"].get("jobloom.run_id") == run.id]
    assert sorted(s["attributes"]["jobloom.node"] for s in nodes) == ["first", "second"]
    assert all(s["trace_id"] == start.context.trace_id and s["parent_id"] == start.context.span_id for s in nodes)


async def test_a_worker_imports_neither_prometheus_nor_opentelemetry_unless_enabled(
    folder: tuple[Path, dict[str, str]], app: jobloom.App
) -> None:
    tmp, env = folder
    script = (
        "import asyncio, sys, jobloom, obsapp\n"
        "async def main():\n"
        "    await obsapp.app.migrate()\n"
        "    job = await obsapp.app.enqueue(obsapp.Ok, {})\n"
        "    worker = jobloom.Worker(obsapp.app)\n"
        "    task = asyncio.create_task(worker.run())\n"
        "    await obsapp.app.wait(job.id, timeout=20)\n"
        "    worker.stop(); await task; await obsapp.app.close()\n"
        "asyncio.run(main())\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('opentelemetry', 'prometheus_client')))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], env=env, cwd=tmp, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().strip().splitlines()[-1] == "[]"

    # and a real worker process of the command line, its imports listed by -X importtime
    proc = subprocess.Popen([sys.executable, "-X", "importtime", "-m", "jobloom.process", "obsapp:app"],
                            env=env, cwd=tmp, stderr=subprocess.PIPE)
    out = Lines(proc)
    try:
        job = await app.enqueue(app.spec("Ok").cls, {})
        await app.wait(job.id, timeout=30)  # it ran a job
    finally:
        stop(proc)
        out.join()
    imported = [line for line in out.lines if line.startswith("import time:")]
    assert any("jobloom.engine.worker" in line for line in imported)
    assert not [line for line in imported if "opentelemetry" in line or "prometheus_client" in line]


async def test_a_metrics_port_in_use_is_one_error_line(folder: tuple[Path, dict[str, str]], app: jobloom.App) -> None:
    tmp, env = folder
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "jobloom.cli", "worker", "obsapp:app", "--metrics-port", str(port)],
            env=env, cwd=tmp, capture_output=True, timeout=60)
    assert done.returncode == 1
    err = done.stderr.decode()
    assert f"error: --metrics-port {port}: cannot listen on 127.0.0.1:{port}" in err, err
    assert "Traceback" not in err
