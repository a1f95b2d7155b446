"""Flows on every store: DAG order, fan-out, sub-flows, failure, cancel, resume, deadlines, validation."""

from __future__ import annotations

from typing import Any

import pytest

import jobloom
from jobloom.engine.jobs import Claimed
from jobloom.flows.execute import NodeContexts, node_payload
from jobloom.flows.flow import FlowError

from .flow_performers import PERFORMERS, Analyze, Collect, Slowish, calls, fanout_flow, image_flow, parent_flow


@pytest.fixture
async def app(store_url: str):
    calls.clear()
    image = image_flow()
    app = jobloom.App(store_url, performers=PERFORMERS, flows=[image, fanout_flow(), parent_flow(image)],
                      auto_migrate=True)
    yield app
    await app.close()


async def drain_all(app: jobloom.App, rounds: int = 10) -> None:
    for _ in range(rounds):
        if not await app.drain():
            return


async def test_the_diamond_runs_in_order_and_passes_results(app: jobloom.App) -> None:
    run = await app.start(app.flows["publish-image"], {"image": "a.png"}, id="img-42")
    assert run.id == "img-42" and run.state == "running"
    assert {n: s.state for n, s in run.nodes.items()} == {
        "analyze": "queued", "thumbnail": "waiting", "metadata": "waiting", "publish": "waiting"}
    await drain_all(app)
    done = await app.get_run("img-42")
    assert done.state == "succeeded" and done.finished_at is not None
    assert done.nodes["publish"].result == "published thumb-a.png-x with {'saved': 640}"
    assert all(n.attempt == 1 for n in done.nodes.values())
    order = [await app.get_job(done.nodes[n].job_id) for n in ("analyze", "thumbnail", "metadata", "publish")]
    assert order[0].finished_at <= min(order[1].started_at, order[2].started_at)  # type: ignore[operator]
    assert order[3].started_at >= max(order[1].finished_at, order[2].finished_at)  # type: ignore[operator]
    assert order[1].payload == {"image": "a.png", "fail": False}  # the built payload is kept


async def test_the_same_id_returns_the_same_run(app: jobloom.App) -> None:
    first = await app.start(app.flows["publish-image"], {"image": "a.png"}, id="same")
    again = await app.start(app.flows["publish-image"], {"image": "b.png"}, id="same")
    assert again.id == first.id and again.input == {"image": "a.png"}
    assert len(await app.list_jobs(limit=100)) == 4


async def test_a_failed_node_skips_only_its_downstream_and_the_run_fails(app: jobloom.App) -> None:
    run = await app.start(app.flows["publish-image"], {"image": "a.png", "fail_thumb": True})
    await drain_all(app)
    done = await app.get_run(run.id)
    states = {n: s.state for n, s in done.nodes.items()}
    assert states == {"analyze": "succeeded", "thumbnail": "failed", "metadata": "succeeded", "publish": "skipped"}
    assert done.state == "failed" and "thumbnail" in (done.error or "")
    assert calls.get("publish") is None


async def test_resume_reuses_succeeded_nodes(app: jobloom.App) -> None:
    run = await app.start(app.flows["publish-image"], {"image": "a.png", "fail_thumb": True})
    await drain_all(app)
    assert (await app.get_run(run.id)).state == "failed"
    with pytest.raises(jobloom.InvalidTransition, match="cancel run"):
        await app.cancel_run(run.id)
    resumed = await app.resume_run(run.id)
    assert resumed.state == "running"
    assert resumed.nodes["thumbnail"].state == "queued" and resumed.nodes["publish"].state == "waiting"
    await drain_all(app)
    done = await app.get_run(run.id)
    assert done.state == "failed"  # the thumbnail fails again: its input still says so
    assert calls["analyze"] == 1 and calls["metadata"] == 1 and calls["thumbnail"] == 2


async def test_fan_out_children_and_the_summary_downstream(app: jobloom.App) -> None:
    run = await app.start(app.flows["fan-out"], {"image": "x"})
    await drain_all(app)
    done = await app.get_run(run.id)
    assert done.state == "succeeded"
    assert {n for n in done.nodes if n.startswith("resize:")} == {"resize:0", "resize:1", "resize:2"}
    assert done.nodes["collect"].result == {"total": 3, "succeeded": 3, "failed": 0, "results": [128, 256, 512]}
    assert done.nodes["resize"].result == done.nodes["collect"].result


async def test_fan_out_with_failed_children_reports_them(app: jobloom.App) -> None:
    run = await app.start(app.flows["fan-out"], {"image": "x", "sizes": [1, -1, 3]})
    await drain_all(app)
    done = await app.get_run(run.id)
    assert done.nodes["collect"].result == {"total": 3, "succeeded": 2, "failed": 1, "results": [2, None, 6]}
    assert done.nodes["resize:1"].state == "failed"


async def test_empty_fan_out(app: jobloom.App) -> None:
    run = await app.start(app.flows["fan-out"], {"image": "x", "sizes": []})
    await drain_all(app)
    done = await app.get_run(run.id)
    assert done.state == "succeeded"
    assert done.nodes["collect"].result == {"total": 0, "succeeded": 0, "failed": 0, "results": []}


async def test_a_sub_flow_runs_as_one_node(app: jobloom.App) -> None:
    run = await app.start(app.flows["parent"], {"image": "p.png"})
    await drain_all(app)
    done = await app.get_run(run.id)
    assert done.state == "succeeded"
    child = await app.get_run(f"{run.id}/child")
    assert child.state == "succeeded" and child.parent_job_id == done.nodes["child"].job_id
    assert done.nodes["after"].result == {"child": "published thumb-p.png-x with {'saved': 640}"}


async def test_many_runs_of_every_kind_move_on_together(app: jobloom.App, monkeypatch: pytest.MonkeyPatch) -> None:
    """Nodes of many runs finish in the same cycles and start in the same loop ticks: the coordinator
    moves every run on in one batch, and the worker reads the nodes' upstream results together."""
    reads: list[int] = []
    original = NodeContexts._read

    async def counted(self: NodeContexts, tx: Any, jobs: list[Any]) -> Any:
        reads.append(len(jobs))
        return await original(self, tx, jobs)

    monkeypatch.setattr(NodeContexts, "_read", counted)
    images = [await app.start(app.flows["publish-image"], {"image": f"{i}.png", "fail_thumb": i % 5 == 0})
              for i in range(20)]
    fans = [await app.start(app.flows["fan-out"], {"image": "x", "sizes": [i + 1, -1 if i % 2 else 2, 3]})
            for i in range(6)]
    parents = [await app.start(app.flows["parent"], {"image": f"p{i}.png"}) for i in range(3)]
    await drain_all(app, rounds=30)

    for i, run in enumerate(images):
        done = await app.get_run(run.id)
        if i % 5 == 0:
            assert (done.state, done.nodes["publish"].state, done.nodes["thumbnail"].state) == (
                "failed", "skipped", "failed")
        else:
            assert done.state == "succeeded"
            assert done.nodes["publish"].result == f"published thumb-{i}.png-x with {{'saved': 640}}"
    for i, run in enumerate(fans):
        done = await app.get_run(run.id)
        assert done.nodes["collect"].result == {
            "total": 3, "succeeded": 2 if i % 2 else 3, "failed": 1 if i % 2 else 0,
            "results": [2 * (i + 1), None if i % 2 else 4, 6]}
    for i, run in enumerate(parents):
        done = await app.get_run(run.id)
        assert done.state == "succeeded"
        assert done.nodes["after"].result == {"child": f"published thumb-p{i}.png-x with {{'saved': 640}}"}
    assert sum(reads) >= 60 and len(reads) * 4 <= sum(reads), reads  # several nodes per read, not one each


async def test_a_node_whose_run_is_gone_fails_for_good(app: jobloom.App) -> None:
    await app.store()
    c = Claimed(1, "Analyze", "", 1, 3, None, "at_least_once", 0.0, run_id="no-such-run", node="analyze")
    with pytest.raises(jobloom.Permanent, match="run 'no-such-run' of node 'analyze' no longer exists"):
        await node_payload(NodeContexts(app), c)


async def test_cancel_a_run(app: jobloom.App) -> None:
    run = await app.start(app.flows["publish-image"], {"image": "a.png"})
    cancelled = await app.cancel_run(run.id)
    assert cancelled.state == "cancelled"
    assert all(n.state == "cancelled" for n in cancelled.nodes.values())
    assert await app.drain() == 0
    assert (await app.get_run(run.id)).finished_at is not None


async def test_deadline_fails_unstarted_nodes(app: jobloom.App) -> None:
    flow = app.flows["publish-image"]
    run = await app.start(flow, {"image": "a.png"}, deadline=0.05)
    store = await app.store()
    from jobloom.flows import stop as flowstop

    async def expire(tx: Any) -> list[str]:  # at a moment past the deadline (no need to wait for it)
        import time

        return await flowstop.fail_past_deadline(tx, time.time() + 0.1)

    assert await store.transact(expire) == [run.id]
    done = await app.get_run(run.id)
    assert done.state == "failed" and done.error == "deadline passed"
    assert {s.state for s in done.nodes.values()} == {"failed"}
    assert await app.drain() == 0


async def test_a_root_input_that_raises_refuses_the_run(app: jobloom.App) -> None:
    flow = jobloom.Flow("bad-input")
    flow.node("a", Analyze, input=lambda inp, up: inp["missing"])
    bad = jobloom.App(app.url, performers=PERFORMERS, flows=[flow], auto_migrate=True)
    with pytest.raises(FlowError, match="input of node 'a' raised KeyError"):
        await bad.start(flow, {})
    assert await bad.list_runs() == []
    await bad.close()


async def test_a_later_input_that_raises_fails_that_node(app: jobloom.App) -> None:
    flow = jobloom.Flow("bad-later")
    a = flow.node("a", Analyze)
    flow.node("b", Collect, after=[a], input=lambda inp, up: up["nope"])
    other = jobloom.App(app.url, performers=PERFORMERS, flows=[flow], auto_migrate=True)
    run = await other.start(flow, {"image": "i"})
    await drain_all(other)
    done = await other.get_run(run.id)
    assert done.state == "failed" and done.nodes["b"].state == "failed"
    assert "input of node 'b' raised KeyError" in (done.nodes["b"].error or "")
    await other.close()


def test_definition_errors_name_what_is_wrong() -> None:
    flow = jobloom.Flow("cyclic")
    flow.node("a", Analyze, after=["c"])
    flow.node("b", Analyze, after=["a"])
    flow.node("c", Analyze, after=["b"])
    with pytest.raises(FlowError, match="cycle: a -> b -> c -> a|cycle: .*a.*b.*c"):
        jobloom.App("sqlite:///unused.db", performers=[Analyze], flows=[flow])
    missing = jobloom.Flow("missing")
    missing.node("a", Analyze, after=["ghost"])
    with pytest.raises(FlowError, match="node 'a' in flow 'missing' is after 'ghost', which is not in the flow"):
        jobloom.App("sqlite:///unused.db", performers=[Analyze], flows=[missing])
    unknown = jobloom.Flow("unknown")
    unknown.node("a", Slowish)
    with pytest.raises(FlowError, match="names performer 'Slowish', which the app does not know"):
        jobloom.App("sqlite:///unused.db", performers=[Analyze], flows=[unknown])
    dup = jobloom.Flow("dup")
    dup.node("a", Analyze)
    with pytest.raises(FlowError, match="already has a node named 'a'"):
        dup.node("a", Analyze)
    with pytest.raises(FlowError, match="unknown option.*unique_key.*not unique_key"):
        dup.node("b", Analyze, unique_key="k")


@pytest.fixture
def store_url(pooled_store_url: str) -> str:
    """This module runs through PgBouncer (transaction pooling) too."""
    return pooled_store_url
