"""Flows built at run time, and declared flows changed while their runs are in flight, on every store."""

from __future__ import annotations

from typing import Any

import pytest

import jobloom
from jobloom.flows import execute, spec
from jobloom.testing import TestClock


class Echo(jobloom.Performer[Any, Any]):
    async def perform(self, payload: Any) -> Any:
        return payload


class Double(jobloom.Performer[int, int]):
    async def perform(self, payload: int) -> int:
        return payload * 2


PERFORMERS = [Echo, Double]


async def drain_all(app: jobloom.App, rounds: int = 10) -> None:
    for _ in range(rounds):
        if not await app.drain():
            return


def built(name: str = "adhoc") -> jobloom.Flow:
    flow = jobloom.Flow(name)
    first = flow.node("first", Echo, payload={"n": 1})
    sizes = flow.map("sizes", Double, items=[1, 2, 3], after=[first])
    flow.node("last", "Echo", after=[sizes], payload="done", priority=3)
    flow.node("whole", Echo, after=[first])  # no payload: the run's input
    return flow


async def test_a_flow_built_from_data_runs_on_any_worker_of_the_store(store_url: str) -> None:
    starter = jobloom.App(store_url, performers=PERFORMERS, auto_migrate=True)
    worker = jobloom.App(store_url, performers=PERFORMERS)  # another app: it declares no flow either
    try:
        run = await starter.start(built(), {"x": 1}, id="adhoc-1")
        assert run.flow == "adhoc" and run.graph == {"first": [], "sizes": ["first"], "last": ["sizes"],
                                                     "whole": ["first"]}
        await drain_all(worker)
        done = await worker.get_run("adhoc-1")
        assert done.state == "succeeded", done
        assert done.nodes["first"].result == {"n": 1}
        assert done.nodes["sizes"].result == {"total": 3, "succeeded": 3, "failed": 0, "results": [2, 4, 6]}
        assert done.nodes["last"].result == "done" and done.nodes["whole"].result == {"x": 1}
        assert (await worker.get_job(done.nodes["last"].job_id)).priority == 3
        again = await starter.start(built(), {"x": 2}, id="adhoc-1")  # the same id: the same run
        assert again.input == {"x": 1}
    finally:
        await starter.close()
        await worker.close()


@pytest.mark.parametrize(("build", "match"), [
    (lambda f: f.node("a", Echo, input=lambda inp, up: inp), "node 'a' of flow 'bad' has input=, a function"),
    (lambda f: f.map("a", Echo, over=lambda inp, up: [1]), "node 'a' of flow 'bad' has over=, a function"),
    (lambda f: f.map("a", Echo, items=[1], key=str), "node 'a' of flow 'bad' has key=, a function"),
    (lambda f: f.subflow("a", built()), "node 'a' of flow 'bad' is a sub-flow"),
    (lambda f: f.node("a", "Nope", payload=1), "names performer 'Nope', which the app does not know"),
    (lambda f: f.node("a", Echo, payload={1, 2}), "node 'a' of flow 'bad': its payload, items and options must"),
    (lambda f: [f.node(f"n{i}", Echo, payload=i) for i in range(spec.MAX_NODES + 1)], "has 1001 nodes"),
    (lambda f: f.node("a", Echo, payload="x" * spec.MAX_SPEC_BYTES), "bytes of JSON"),
])
async def test_a_flow_built_at_run_time_is_data_only(store_url: str, build: Any, match: str) -> None:
    app = jobloom.App(store_url, performers=PERFORMERS, auto_migrate=True)
    try:
        flow = jobloom.Flow("bad")
        build(flow)
        with pytest.raises(jobloom.FlowError, match=match):
            await app.start(flow, {})
        assert await app.list_runs() == [] and await app.list_jobs() == []
    finally:
        await app.close()


async def test_a_flow_built_at_run_time_cannot_take_a_declared_name(store_url: str) -> None:
    app = jobloom.App(store_url, performers=PERFORMERS, flows=[built("taken")], auto_migrate=True)
    try:
        with pytest.raises(jobloom.FlowError, match="'taken' is declared on this app as another Flow object"):
            await app.start(built("taken"), {})
    finally:
        await app.close()


def shipping(version: int) -> jobloom.Flow:
    """A declared flow, as two deployments define it."""
    flow = jobloom.Flow("ship")
    pack = flow.node("pack", Echo, input=lambda inp, up: {"pack": inp["order"]})
    if version == 1:
        flow.node("label", Echo, after=[pack], input=lambda inp, up: {"label": up["pack"]["pack"]})
        flow.node("notify", Echo, after=[pack], input=lambda inp, up: "v1")
    elif version == 2:  # label gone; notify's code changed, and a node added
        flow.node("notify", Echo, after=[pack], input=lambda inp, up: "v2")
        flow.node("audit", Echo, after=[pack])
    else:  # notify's code changed only
        flow.node("label", Echo, after=[pack], input=lambda inp, up: {"label": up["pack"]["pack"]})
        flow.node("notify", Echo, after=[pack], input=lambda inp, up: "v3")
    return flow


async def test_a_changed_definition_finishes_runs_on_the_graph_they_started_with(store_url: str) -> None:
    old = jobloom.App(store_url, performers=PERFORMERS, flows=[shipping(1)], auto_migrate=True)
    try:
        run = await old.start(old.flows["ship"], {"order": 7}, id="ship-1")
    finally:
        await old.close()
    restarted = jobloom.App(store_url, performers=PERFORMERS, flows=[shipping(3)])  # same graph, new code
    try:
        await drain_all(restarted)
        done = await restarted.get_run(run.id)
        assert done.state == "succeeded" and done.nodes["notify"].result == "v3"
        assert done.nodes["label"].result == {"label": 7}
    finally:
        await restarted.close()


async def test_a_node_changed_in_flight_fails_with_the_way_out(store_url: str) -> None:
    old = jobloom.App(store_url, performers=PERFORMERS, flows=[shipping(1)], auto_migrate=True)
    try:
        await old.start(old.flows["ship"], {"order": 7}, id="ship-2")
    finally:
        await old.close()
    new = jobloom.App(store_url, performers=PERFORMERS, flows=[shipping(2)])
    try:
        await drain_all(new)
        done = await new.get_run("ship-2")
        assert set(done.nodes) == {"pack", "label", "notify"}  # the graph it started with: no audit
        assert done.state == "failed" and done.nodes["pack"].state == "succeeded"
        assert done.nodes["notify"].result == "v2"
        error = done.nodes["label"].error or ""
        assert "flow 'ship' changed since run 'ship-2' started: node 'label' is no longer in it" in error
        assert "deploy that definition again" in error
    finally:
        await new.close()
    back = jobloom.App(store_url, performers=PERFORMERS, flows=[shipping(1)])  # the way out: the old definition
    try:
        await back.resume_run("ship-2")
        await drain_all(back)
        done = await back.get_run("ship-2")
        assert done.state == "succeeded" and done.nodes["label"].result == {"label": 7}
    finally:
        await back.close()


async def test_a_node_whose_upstream_changed_is_refused(store_url: str) -> None:
    first = jobloom.Flow("moved")
    a = first.node("a", Echo, payload=1)
    first.node("b", Echo, after=[a], input=lambda inp, up: up["a"])
    old = jobloom.App(store_url, performers=PERFORMERS, flows=[first], auto_migrate=True)
    try:
        await old.start(first, {}, id="moved-1")
    finally:
        await old.close()
    second = jobloom.Flow("moved")
    second.node("a", Echo, payload=1)
    z = second.node("z", Echo, payload=2)
    second.node("b", Double, after=[z], input=lambda inp, up: up["z"])
    new = jobloom.App(store_url, performers=PERFORMERS, flows=[second])
    try:
        await drain_all(new)
        b = (await new.get_run("moved-1")).nodes["b"]
        assert b.state == "failed"
        assert "binding is now 'Double' (the run started with 'Echo')" in (b.error or "")
        assert "after is now ['z'] (the run started with ['a'])" in (b.error or "")
    finally:
        await new.close()


def declared_fanout() -> jobloom.Flow:
    flow = jobloom.Flow("declared-fanout")
    flow.map("sizes", Double, over=lambda inp, up: inp["sizes"])
    return flow


async def test_a_worker_that_does_not_know_a_flow_puts_its_fanout_back(store_url: str) -> None:
    """Every worker claims fan-out nodes (a flow built at run time may have one anywhere); on a store
    shared by two apps, one that does not declare a run's flow puts the node back, spending no
    attempt, and a worker of the app that declares it runs it."""
    clock = TestClock()  # one clock for both apps: the put-back's 30 s pass when the test says
    flow = declared_fanout()
    owner = jobloom.App(store_url, performers=PERFORMERS, flows=[flow], auto_migrate=True, clock=clock)
    other = jobloom.App(store_url, performers=[Echo], clock=clock)  # no flows, and no Double
    try:
        await owner.start(flow, {"sizes": [1, 2]}, id="shared-1")
        await drain_all(other)
        node = (await other.get_run("shared-1")).nodes["sizes"]
        assert node.job_id is not None
        job = await other.get_job(node.job_id)
        assert job.state == "scheduled" and job.attempts_spent == 0, job
        [snoozed] = await other.attempts(job.id)
        assert snoozed.outcome == "snoozed"
        clock.jump(execute.NOT_HERE_SNOOZE + 1)
        await drain_all(owner)
        done = await owner.get_run("shared-1")
        assert done.state == "succeeded", done
        assert done.nodes["sizes"].result == {"total": 2, "succeeded": 2, "failed": 0, "results": [2, 4]}
    finally:
        await owner.close()
        await other.close()
