"""Failure paths of flows on every store: on_upstream_failure="run", when=, on_failure nodes, and the
run's final state for each combination (the table of docs/how-to/flows.md)."""

from __future__ import annotations

from typing import Any

import pytest

import jobloom


class Echo(jobloom.Performer[Any, Any]):
    async def perform(self, payload: Any) -> Any:
        return payload


class Boom(jobloom.Performer[Any, Any]):
    async def perform(self, payload: Any) -> Any:
        raise jobloom.Permanent("boom")


class Sleeper(jobloom.Performer[Any, Any]):
    async def perform(self, payload: Any) -> Any:
        return await self.sleep("later", 3600)


PERFORMERS = [Echo, Boom, Sleeper]


async def drain_all(app: jobloom.App, rounds: int = 10) -> None:
    for _ in range(rounds):
        if not await app.drain():
            return


async def outcome(store_url: str, flow: jobloom.Flow, inp: Any = None) -> jobloom.Run:
    app = jobloom.App(store_url, performers=PERFORMERS, flows=[flow], auto_migrate=True)
    try:
        run = await app.start(flow, inp)
        await drain_all(app)
        return await app.get_run(run.id)
    finally:
        await app.close()


def states(run: jobloom.Run) -> dict[str, str]:
    return {n: s.state for n, s in run.nodes.items()}


async def test_a_node_that_runs_anyway_sees_which_upstream_failed(store_url: str) -> None:
    flow = jobloom.Flow("anyway")
    ok = flow.node("ok", Echo, payload="fine")
    bad = flow.node("bad", Boom)
    flow.node("skipped", Echo, after=[bad])
    flow.node("report", Echo, after=[ok, bad], on_upstream_failure="run",
              input=lambda inp, up: {n: (f"{v.state}: {v.error}" if isinstance(v, jobloom.UpstreamFailed) else v)
                                     for n, v in up.items()})
    run = await outcome(store_url, flow)
    assert states(run) == {"ok": "succeeded", "bad": "failed", "skipped": "skipped", "report": "succeeded"}
    assert run.nodes["report"].result == {"ok": "fine", "bad": "failed: Permanent: boom"}
    assert run.state == "failed" and run.error == "nodes did not succeed: bad"


async def test_when_false_skips_the_node_and_its_downstream_without_failing_the_run(store_url: str) -> None:
    flow = jobloom.Flow("when")
    first = flow.node("first", Echo, payload={"big": False})
    big = flow.node("big", Echo, after=[first], when=lambda inp, up: up["first"]["big"])
    flow.node("after-big", Echo, after=[big])
    flow.node("anyway", Echo, after=[big], on_upstream_failure="run",
              input=lambda inp, up: repr(up["big"]))
    flow.node("root", Echo, when=lambda inp, up: inp["go"])
    run = await outcome(store_url, flow, {"go": True})
    assert states(run) == {"first": "succeeded", "big": "skipped", "after-big": "skipped", "anyway": "succeeded",
                           "root": "succeeded"}
    assert run.nodes["big"].error == "skipped: when= of node 'big' was false"
    skipped = jobloom.UpstreamFailed("skipped", "skipped: when= of node 'big' was false")
    assert run.nodes["anyway"].result == repr(skipped)
    assert run.state == "succeeded" and run.error is None


async def test_a_when_that_raises_fails_the_node(store_url: str) -> None:
    flow = jobloom.Flow("when-raises")
    flow.node("a", Echo, when=lambda inp, up: inp["missing"])
    run = await outcome(store_url, flow, {})
    assert states(run) == {"a": "failed"} and "when of node 'a' raised KeyError" in (run.nodes["a"].error or "")
    assert run.state == "failed"


async def test_when_on_a_fan_out_skips_it(store_url: str) -> None:
    flow = jobloom.Flow("when-map")
    fan = flow.map("fan", Echo, items=[1, 2], when=lambda inp, up: False)
    flow.node("next", Echo, after=[fan])
    run = await outcome(store_url, flow)
    assert states(run) == {"fan": "skipped", "next": "skipped"} and run.state == "succeeded"


async def test_on_failure_runs_only_when_the_run_fails_with_what_failed(store_url: str) -> None:
    flow = jobloom.Flow("handled")
    a = flow.node("a", Echo, payload=1)
    flow.node("b", Boom, after=[a])
    flow.on_failure(Echo, name="cleanup")
    run = await outcome(store_url, flow)
    assert states(run) == {"a": "succeeded", "b": "failed", "cleanup": "succeeded"}
    assert run.nodes["cleanup"].result == {"failed": {"b": "Permanent: boom"}}
    assert run.state == "failed" and run.error == "nodes did not succeed: b"


async def test_on_failure_is_skipped_when_the_run_succeeds(store_url: str) -> None:
    flow = jobloom.Flow("unhandled")
    flow.node("a", Echo, payload=1)
    flow.on_failure(Echo, name="cleanup")
    run = await outcome(store_url, flow)
    assert states(run) == {"a": "succeeded", "cleanup": "skipped"}
    assert run.nodes["cleanup"].error == "skipped: the run did not fail"
    assert run.state == "succeeded"


async def test_an_on_failure_node_that_fails_is_named_in_the_run_error(store_url: str) -> None:
    flow = jobloom.Flow("handler-fails")
    flow.node("a", Boom)
    flow.on_failure(Boom, name="cleanup")
    run = await outcome(store_url, flow)
    assert states(run) == {"a": "failed", "cleanup": "failed"}
    assert run.state == "failed" and run.error == "nodes did not succeed: a, cleanup"


async def test_a_cancelled_run_does_not_run_its_on_failure_node(store_url: str) -> None:
    flow = jobloom.Flow("cancelled")
    flow.node("a", Sleeper)
    flow.on_failure(Echo, name="cleanup")
    app = jobloom.App(store_url, performers=PERFORMERS, flows=[flow], auto_migrate=True)
    try:
        run = await app.start(flow, None)
        await drain_all(app)  # a sleeps: scheduled, an hour away
        await app.cancel_run(run.id)
        await drain_all(app)
        done = await app.get_run(run.id)
        assert states(done) == {"a": "cancelled", "cleanup": "cancelled"} and done.state == "cancelled"
    finally:
        await app.close()


async def test_resume_runs_the_on_failure_node_again_only_if_the_run_fails_again(store_url: str) -> None:
    flow = jobloom.Flow("resumed")
    flow.node("a", Echo, when=lambda inp, up: True)
    flow.node("b", Boom)
    flow.on_failure(Boom, name="cleanup")
    app = jobloom.App(store_url, performers=PERFORMERS, flows=[flow], auto_migrate=True)
    try:
        run = await app.start(flow, None)
        await drain_all(app)
        resumed = await app.resume_run(run.id)
        assert states(resumed) == {"a": "succeeded", "b": "queued", "cleanup": "waiting"}
        await drain_all(app)
        done = await app.get_run(run.id)
        assert states(done) == {"a": "succeeded", "b": "failed", "cleanup": "failed"}
        assert done.nodes["cleanup"].attempt == 2 and done.state == "failed"
    finally:
        await app.close()


async def test_a_flow_built_at_run_time_takes_the_failure_paths_as_data(store_url: str) -> None:
    app = jobloom.App(store_url, performers=PERFORMERS, auto_migrate=True)
    other = jobloom.App(store_url, performers=PERFORMERS)
    try:
        flow = jobloom.Flow("adhoc-failing")
        bad = flow.node("bad", Boom)
        flow.node("anyway", Echo, after=[bad], on_upstream_failure="run", payload="ran")
        flow.on_failure(Echo)
        run = await app.start(flow, None)
        await drain_all(other)
        done = await other.get_run(run.id)
        assert states(done) == {"bad": "failed", "anyway": "succeeded", "on_failure": "succeeded"}
        assert done.nodes["on_failure"].result == {"failed": {"bad": "Permanent: boom"}}
        assert done.state == "failed"
        with_when = jobloom.Flow("adhoc-when")
        with_when.node("a", Echo, when=lambda inp, up: True)
        with pytest.raises(jobloom.FlowError, match="node 'a' of flow 'adhoc-when' has when=, a function, which "
                                                    "cannot be stored with a run"):
            await app.start(with_when, None)
    finally:
        await app.close()
        await other.close()


@pytest.mark.parametrize(("build", "match"), [
    (lambda f: f.node("b", Echo, after=[f.on_failure(Echo)]), "is after 'on_failure', an on_failure node"),
    (lambda f: f.node("b", Echo, on_upstream_failure="maybe"), 'on_upstream_failure must be "skip" or "run"'),
    (lambda f: f.node("b", Echo, when=True), "when must be a function"),
    (lambda f: f.node("b", Echo, payload=1, input=lambda i, u: i), "give input= or payload=, not both"),
])
def test_failure_paths_are_checked_when_declared(build: Any, match: str) -> None:
    flow = jobloom.Flow("checked")
    with pytest.raises(jobloom.FlowError, match=match):
        build(flow)
        flow.validate({"Echo"})


async def test_a_run_past_its_deadline_does_not_run_its_on_failure_node(store_url: str) -> None:
    import time

    from jobloom.flows import stop

    flow = jobloom.Flow("late")
    flow.node("a", Sleeper)
    flow.on_failure(Echo, name="cleanup")
    app = jobloom.App(store_url, performers=PERFORMERS, flows=[flow], auto_migrate=True)
    try:
        run = await app.start(flow, None, deadline=30)
        await drain_all(app)  # a sleeps: scheduled, an hour away
        store = await app.store()
        assert await store.transact(lambda tx: stop.fail_past_deadline(tx, time.time() + 3600)) == [run.id]
        await drain_all(app)
        done = await app.get_run(run.id)
        assert states(done) == {"a": "failed", "cleanup": "failed"}
        assert done.state == "failed" and done.error == "deadline passed"
    finally:
        await app.close()
