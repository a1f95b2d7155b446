"""``jobloom runs …``, ``jobloom stats`` and ``jobs show --json`` against a real store of each kind, and
their ``--json`` compared with what the HTTP API answers for the same store."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests import forkcli
from tests.cli.test_cli import Env
from tests.conftest import require_module

FLOW_APP = '''
from __future__ import annotations

import asyncio
import os

import jobloom


class Double(jobloom.Performer[int, int]):
    async def perform(self, payload: int) -> int:
        return payload * 2


class Tracked(jobloom.Performer[int, int]):
    async def perform(self, payload: int) -> int:
        await self.ctx.progress(0.5, "half way")
        deadline = asyncio.get_running_loop().time() + 30
        # finish once the progress is stored (the worker writes it within a second), so it is there to show
        while (await app.get_job(self.ctx.job_id)).progress is None:
            assert asyncio.get_running_loop().time() < deadline, "the progress was never written"
            await asyncio.sleep(0.05)
        return payload


class Finish(jobloom.Performer[dict, str]):
    max_attempts = 1

    async def perform(self, payload: dict) -> str:
        if not os.path.exists(FIXED):
            raise RuntimeError("not fixed yet [bold]x[/] \\x1b[31mred")
        return "done"


flow = jobloom.Flow("pipeline")
doubled = flow.map("double", Double, over=lambda inp, up: inp["items"])
flow.node("finish", Finish, after=[doubled], input=lambda inp, up: {"up": up["double"]})
app = jobloom.App(URL, performers=[Double, Finish, Tracked], flows=[flow])
'''


class FlowEnv(Env):
    """``Env`` on ``url`` (either store) with an app of one flow, as ``flow_app``."""

    def __init__(self, tmp_path: Path, url: str) -> None:
        super().__init__(tmp_path)
        self.url = url
        self.fixed = tmp_path / "fixed"
        source = FLOW_APP.replace("URL", repr(url), 1).replace("FIXED", repr(str(self.fixed)), 1)
        (tmp_path / "flow_app.py").write_text(textwrap.dedent(source))

    def script(self, body: str) -> str:
        """Run ``body`` (async code with ``app`` and ``flow`` in scope) in a process of its own; its stdout."""
        code = ("import asyncio\nfrom flow_app import app, flow\n"
                "from jobloom.housekeeping.stats import project_once\n"
                "async def go():\n" + textwrap.indent(textwrap.dedent(body), "    ")
                + "\n    await app.close()\nasyncio.run(go())\n")
        done = forkcli.run([], code=code, cwd=self.path, env=self.env, timeout=60)  # a process of its own
        assert done.returncode == 0, f"the script exited {done.returncode}:\n{code}\n{done.stdout}\n{done.stderr}"
        return done.stdout

    def drain(self) -> None:
        """Run every due job until none is left, then fold the events into the read model."""
        self.script("""
            while await app.drain():
                pass
            while await project_once(await app.store()):
                pass
        """)


@pytest.fixture
def fx(tmp_path: Path, store_url: str) -> FlowEnv:
    return FlowEnv(tmp_path, store_url)  # store_url is migrated already


def _failed_run(fx: FlowEnv, run_id: str = "r-1") -> None:
    fx.script(f"await app.start(flow, {{'items': [1, 2, 3]}}, id={run_id!r})")
    fx.drain()


def test_runs_list_and_show_give_state_nodes_input_and_times(fx: FlowEnv) -> None:
    _failed_run(fx)
    listed = fx.run("runs", "list", "--url", fx.url).stdout
    assert "r-1" in listed and "pipeline" in listed and "failed" in listed, listed
    assert "4 succeeded, 1 failed" in listed, listed
    shown = fx.run("runs", "show", "r-1", "--url", fx.url).stdout
    for text in ('{"items":[1,2,3]}', "nodes did not succeed: finish", "double", "finish",
                 "double: 3 children: 3 succeeded", " UTC"):
        assert text in shown, (text, shown)
    assert "[bold]x[/]" in shown and "\x1b" not in shown and "\\x1b[31m" in shown, shown  # job text, literally
    assert "double:1" not in shown
    assert "double:1" in fx.run("runs", "show", "r-1", "--children", "--url", fx.url).stdout
    doc = fx.json("runs", "show", "r-1", "--url", fx.url)
    assert doc["state"] == "failed" and doc["input"] == {"items": [1, 2, 3]}
    assert {n: v["state"] for n, v in doc["nodes"].items()} == {
        "double": "succeeded", "finish": "failed", "double:0": "succeeded", "double:1": "succeeded",
        "double:2": "succeeded"}
    assert doc["created_at"] and doc["finished_at"]
    assert fx.json("runs", "list", "--state", "succeeded", "--url", fx.url) == {"runs": [], "next_cursor": None}


def test_runs_list_pages_with_a_cursor(fx: FlowEnv) -> None:
    for run_id in ("a", "b", "c"):
        fx.script(f"await app.start(flow, {{'items': []}}, id={run_id!r})")
    first = fx.json("runs", "list", "--limit", "2", "--url", fx.url)
    assert [r["id"] for r in first["runs"]] == ["c", "b"] and first["next_cursor"] == "b"
    shown = fx.run("runs", "list", "--limit", "2", "--url", fx.url)
    assert "more: --cursor b" in shown.stderr, shown.stderr
    rest = fx.json("runs", "list", "--limit", "2", "--cursor", "b", "--url", fx.url)
    assert [r["id"] for r in rest["runs"]] == ["a"] and rest["next_cursor"] is None


def test_runs_resume_and_cancel(fx: FlowEnv) -> None:
    _failed_run(fx)
    fx.fixed.write_text("")
    out = fx.run("runs", "resume", "r-1", "--app", "flow_app:app").stdout
    assert out.strip() == "run r-1 (pipeline) resumed: running", out
    fx.drain()
    assert fx.json("runs", "show", "r-1", "--url", fx.url)["state"] == "succeeded"
    # a finished run cannot be resumed; the error names it
    done = fx.run("runs", "resume", "r-1", "--url", fx.url, rc=1)
    assert "r-1" in done.stderr, done.stderr
    fx.script("await app.start(flow, {'items': [5]}, id='r-2')")
    cancelled = fx.json("runs", "cancel", "r-2", "--url", fx.url)
    assert cancelled["state"] == "cancelled"
    assert {v["state"] for v in cancelled["nodes"].values()} == {"cancelled"}
    missing = fx.run("runs", "show", "nope", "--url", fx.url, rc=1)
    assert "no run with id 'nope'" in missing.stderr


def test_stats_shows_counts_throughput_and_percentiles(fx: FlowEnv) -> None:
    _failed_run(fx)
    fx.script("await app.enqueue('Double', 7)")
    out = fx.run("stats", "--url", fx.url).stdout
    assert "Double" in out and "Finish" in out and "p50" in out and "since" in out, out
    assert "jobloom.map" not in out, out
    assert "jobloom.map" in fx.run("stats", "--internal", "--url", fx.url).stdout
    doc = fx.json("stats", "--url", fx.url)
    assert doc["counts"]["Double"] == {"queued": 1} and doc["counts"]["Finish"] == {"failed": 1}
    assert doc["bindings"]["Double"]["succeeded"] == 3 and doc["bindings"]["Finish"]["failed"] == 1
    assert doc["bindings"]["Double"]["p50"] is not None
    assert doc["throughput"]["Double"] == pytest.approx(3 / 5)
    assert doc["queue_latency"]["Double"] >= 0
    assert "jobloom.map" not in doc["bindings"] and "jobloom.map" not in doc["counts"]
    one = fx.json("stats", "--binding", "Finish", "--url", fx.url)
    assert set(one["counts"]) == {"Finish"}


# -- the same shapes as the HTTP API ------------------------------------------------------------------


@pytest.fixture
def api(fx: FlowEnv) -> Iterator[tuple[Any, dict[str, str]]]:
    """The HTTP API over ``fx``'s store (a real server on a loopback port) and a read token's header."""
    httpx = require_module("httpx", 'pip install -e ".[dev]" to run the HTTP API tests')
    import jobloom
    from jobloom.http.factory import create_asgi
    from tests.http.server import serving

    token = fx.run("tokens", "create", "reader", "--scopes", "read", "--url", fx.url).stdout.strip()
    app = jobloom.App(fx.url, auto_migrate=False)
    try:
        with serving(create_asgi(app, auth="required", token_ttl=0.0)) as url, \
                httpx.Client(base_url=url, timeout=30) as client:
            yield client, {"Authorization": f"Bearer {token}"}
    finally:
        app.close_sync()


def test_json_output_is_the_http_apis_representation(fx: FlowEnv, api: tuple[Any, dict[str, str]]) -> None:
    client, auth = api
    _failed_run(fx)
    job_id = int(fx.script("print((await app.enqueue('Tracked', 21, tags=['nightly'], meta={'who': 'ops'})).id)"))
    fx.drain()
    finish = next(v["job_id"] for n, v in fx.json("runs", "show", "r-1", "--url", fx.url)["nodes"].items()
                  if n == "finish")
    for jid in (finish, job_id):
        shown = fx.json("jobs", "show", str(jid), "--url", fx.url)
        http = client.get(f"/v1/jobs/{jid}", headers=auth)
        assert http.status_code == 200, http.text
        assert shown["job"] == http.json()
        http_attempts = client.get(f"/v1/jobs/{jid}/attempts", headers=auth).json()["attempts"]
        assert shown["attempts"] == http_attempts
    node_job = fx.json("jobs", "show", str(finish), "--url", fx.url)["job"]
    assert node_job["run_id"] == "r-1" and node_job["node"] == "finish"
    tagged = fx.json("jobs", "show", str(job_id), "--url", fx.url)["job"]
    assert tagged["tags"] == ["nightly"] and tagged["meta"] == {"who": "ops"}
    assert tagged["progress"]["fraction"] == 0.5 and tagged["progress"]["message"] == "half way"
    assert fx.json("runs", "show", "r-1", "--url", fx.url) == client.get("/v1/runs/r-1", headers=auth).json()
    assert fx.json("runs", "list", "--limit", "100", "--url", fx.url) == client.get("/v1/runs", headers=auth).json()
    since = (datetime.now(UTC) - timedelta(hours=1)).isoformat()  # the same window for both, whenever they run
    cli_stats = fx.json("stats", "--internal", "--since", since, "--url", fx.url)
    http_stats = client.get("/v1/stats", params={"since": since}, headers=auth).json()
    assert {k: cli_stats[k] for k in http_stats} == http_stats


def test_internal_bindings_are_left_out_unless_asked_for(fx: FlowEnv) -> None:
    fx.script("await app.start(flow, {'items': [1, 2]}, id='r-1')")  # its fan-out node's job is queued
    fx.script("await app.enqueue('Finish', {})")
    fx.run("bindings", "pause", "jobloom.map", "--app", "flow_app:app")  # the store has a row for it now
    listed = fx.json("bindings", "list", "--app", "flow_app:app")
    assert {b["binding"] for b in listed} == {"Double", "Finish", "Tracked"}, listed
    every = fx.json("bindings", "list", "--internal", "--url", fx.url)
    assert "jobloom.map" in {b["binding"] for b in every}
    assert "jobloom.map" not in fx.run("bindings", "list", "--url", fx.url).stdout
    jobs = fx.run("jobs", "list", "--url", fx.url)
    assert "jobloom.map" not in jobs.stdout and "1 job(s) of jobloom's own bindings left out" in jobs.stderr
    assert {j["binding"] for j in fx.json("jobs", "list", "--url", fx.url)} == {"Finish"}
    assert "jobloom.map" in {j["binding"] for j in fx.json("jobs", "list", "--internal", "--url", fx.url)}
    assert [j["binding"] for j in fx.json("jobs", "list", "--binding", "jobloom.map", "--url", fx.url)] == [
        "jobloom.map"]
    assert "jobloom.map" not in fx.json("jobs", "counts", "--finished", "--url", fx.url)
    assert "jobloom.map" in fx.json("jobs", "counts", "--finished", "--internal", "--url", fx.url)
