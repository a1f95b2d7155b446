"""Flow runs own what they start, on every store: children spawned by a node, sub-flow runs, running
nodes at a cancel or a deadline; deadlines (default, override, re-armed on resume); fan-out keys."""

from __future__ import annotations

import time
from typing import Any

import pytest

import jobloom
from jobloom.core import lifecycle
from jobloom.core.states import ACTIVE_STATES
from jobloom.engine import coordinator
from jobloom.engine.jobs import Claimed, Outcome
from jobloom.flows import stop as flowstop
from jobloom.flows.flow import SUBFLOW_BINDING
from jobloom.store.base import Tx

from .flow_performers import PERFORMERS, Collect, Resize, image_flow, parent_flow


class Spawner(jobloom.Performer[dict[str, Any], str]):
    """Spawns one ``Resize`` child per size (a negative size fails for good), returns at once."""

    async def perform(self, payload: dict[str, Any]) -> str:
        for size in payload["sizes"]:
            await self.ctx.spawn(f"r{abs(size)}", Resize, size, max_attempts=1)
        return "spawned"


def spawn_flow() -> jobloom.Flow:
    flow = jobloom.Flow("spawns")
    spawn = flow.node("spawn", Spawner)
    flow.node("after", Collect, after=[spawn], input=lambda inp, up: {"spawn": up["spawn"]})
    return flow


def keyed_flow() -> jobloom.Flow:
    flow = jobloom.Flow("keyed", deadline=600)
    sizes = flow.map("resize", Resize, over=lambda inp, up: inp["items"], key=lambda item: inp_key(item))
    flow.node("collect", Collect, after=[sizes], input=lambda inp, up: up["resize"])
    return flow


def inp_key(item: Any) -> Any:
    return item if isinstance(item, str) and not item.lstrip("-").isdigit() else f"s{item}"


@pytest.fixture
async def app(store_url: str):
    image = image_flow()
    app = jobloom.App(store_url, performers=[*PERFORMERS, Spawner], auto_migrate=True,
                      flows=[image, parent_flow(image), spawn_flow(), keyed_flow()])
    yield app
    await app.close()


async def drain_all(app: jobloom.App, bindings: list[str] | None = None) -> None:
    for _ in range(10):
        if not await app.drain(bindings=bindings):
            return


async def claim(app: jobloom.App, binding: str) -> Claimed:
    """Start one job of ``binding`` the way a worker does (it is then running, under a lease)."""
    await app.register_bindings([binding])
    store = await app.store()

    async def work(tx: Tx) -> list[Claimed]:
        return (await coordinator.dispatch(tx, binding, capacity=1, worker="w", now=time.time(), lease=60.0)).claimed

    (claimed,) = await store.transact(work)
    return claimed


async def report(app: jobloom.App, c: Claimed, kind: str) -> None:
    store = await app.store()
    o = Outcome(c.id, c.attempt, kind, "w", c.started_at, time.time(), run_id=c.run_id)
    await store.transact(lambda tx: coordinator.report(tx, [o], time.time(), hooks=app.hooks))


async def expire(app: jobloom.App) -> list[str]:
    store = await app.store()
    return await store.transact(lambda tx: flowstop.fail_past_deadline(tx, time.time() + 3600))


# -- 1. children spawned by a node belong to the run --------------------------------------------------


async def test_a_node_settles_only_when_its_spawned_children_have_finished(app: jobloom.App) -> None:
    run = await app.start(app.flows["spawns"], {"sizes": [3, 5]})
    await drain_all(app, ["Spawner"])  # the node ran; its children have not
    held = await app.get_run(run.id)
    assert held.state == "running"
    assert held.nodes["spawn"].state == "waiting" and held.nodes["spawn"].result == "spawned"
    assert {held.nodes["spawn/r3"].state, held.nodes["spawn/r5"].state} == {"queued"}
    assert held.nodes["after"].state == "waiting"
    await drain_all(app)
    done = await app.get_run(run.id)
    assert done.state == "succeeded" and done.nodes["spawn"].state == "succeeded"
    assert done.nodes["spawn"].result == "spawned" and done.nodes["spawn/r5"].result == 10
    children = [await app.get_job(done.nodes[n].job_id) for n in ("spawn/r3", "spawn/r5")]
    after = await app.get_job(done.nodes["after"].job_id)
    assert after.started_at >= max(c.finished_at for c in children)  # type: ignore[operator,type-var]


async def test_a_spawned_child_that_fails_fails_its_node_and_skips_downstream(app: jobloom.App) -> None:
    run = await app.start(app.flows["spawns"], {"sizes": [3, -4]})
    await drain_all(app)
    done = await app.get_run(run.id)
    assert done.nodes["spawn/r4"].state == "failed"
    assert done.nodes["spawn"].state == "failed" and "spawn/r4" in (done.nodes["spawn"].error or "")
    assert done.nodes["after"].state == "skipped"
    assert done.state == "failed" and done.finished_at is not None


async def test_a_child_that_failed_before_its_node_returned_fails_the_node(app: jobloom.App) -> None:
    run = await app.start(app.flows["spawns"], {"sizes": [-2]})
    node = await claim(app, "Spawner")  # the node runs; the child it spawns fails before it returns
    from jobloom.flows.execute import run_spawner

    await run_spawner(app, node)(node.id, "r2", Resize, -2, max_attempts=1)
    await drain_all(app, ["Resize"])
    assert (await app.get_run(run.id)).nodes["spawn/r2"].state == "failed"
    await report(app, node, lifecycle.SUCCEEDED)
    done = await app.get_run(run.id)
    assert done.nodes["spawn"].state == "failed" and done.nodes["after"].state == "skipped"
    assert done.state == "failed"


async def test_cancelling_a_run_reaches_its_spawned_children(app: jobloom.App) -> None:
    run = await app.start(app.flows["spawns"], {"sizes": [3]})
    await drain_all(app, ["Spawner"])
    cancelled = await app.cancel_run(run.id)
    assert cancelled.state == "cancelled"
    assert {n: s.state for n, s in cancelled.nodes.items()} == {
        "spawn": "cancelled", "spawn/r3": "cancelled", "after": "cancelled"}
    assert await app.drain() == 0


async def test_a_child_id_that_cannot_name_a_node_is_refused(app: jobloom.App) -> None:
    await app.start(app.flows["spawns"], {"sizes": [3]})
    node = await claim(app, "Spawner")
    from jobloom.flows.execute import run_spawner

    with pytest.raises(jobloom.InvalidOption, match="invalid child_id: 'a/b'; expected a name without ':' or '/'"):
        await run_spawner(app, node)(node.id, "a/b", Resize, 1)


# -- 2 and 3. cancel and deadline: one rule, sub-flow runs included --------------------------------------


async def test_cancel_reaches_the_sub_flow_run(app: jobloom.App) -> None:
    run = await app.start(app.flows["parent"], {"image": "p.png"})
    await drain_all(app, [SUBFLOW_BINDING])  # the child run started; its node waits for it
    child = await app.get_run(f"{run.id}/child")
    assert child.state == "running" and (await app.get_run(run.id)).nodes["child"].state == "scheduled"
    cancelled = await app.cancel_run(run.id)
    assert cancelled.state == "cancelled" and cancelled.finished_at is not None
    child = await app.get_run(f"{run.id}/child")
    assert child.state == "cancelled" and child.error == "parent run cancelled"
    assert {s.state for s in child.nodes.values()} == {"cancelled"}
    assert await app.drain() == 0


async def test_a_cancelled_run_stays_cancelling_until_its_running_node_stops(app: jobloom.App) -> None:
    run = await app.start(app.flows["parent"], {"image": "p.png"})
    await drain_all(app, [SUBFLOW_BINDING])
    running = await claim(app, "Analyze")  # the child run's first node is running
    assert running.run_id == f"{run.id}/child"
    stopping = await app.cancel_run(run.id)
    assert stopping.state == "cancelling" and stopping.finished_at is None
    assert (await app.get_run(f"{run.id}/child")).state == "cancelling"
    with pytest.raises(jobloom.InvalidTransition):
        await app.resume_run(run.id)
    await report(app, running, lifecycle.CANCELLED)  # the worker saw the cancel request
    assert (await app.get_run(f"{run.id}/child")).state == "cancelled"
    await drain_all(app)  # the sub-flow node learns that its child run ended
    done = await app.get_run(run.id)
    assert done.state == "cancelled" and done.finished_at is not None
    assert not {s.state for s in done.nodes.values()} & ACTIVE_STATES


async def test_a_deadline_stops_running_nodes_and_sub_flow_runs_before_the_run_fails(app: jobloom.App) -> None:
    run = await app.start(app.flows["parent"], {"image": "p.png"}, deadline=30)
    await drain_all(app, [SUBFLOW_BINDING])
    running = await claim(app, "Analyze")
    assert await expire(app) == [run.id]
    assert (await app.get_run(run.id)).state == "failing"
    child = await app.get_run(f"{run.id}/child")
    assert child.state == "cancelling" and child.nodes["analyze"].state == "running"
    await report(app, running, lifecycle.CANCELLED)
    await drain_all(app)
    done = await app.get_run(run.id)
    assert done.state == "failed" and done.error == "deadline passed" and done.finished_at is not None
    assert (await app.get_run(f"{run.id}/child")).state == "cancelled"


async def test_a_deadline_with_nothing_running_fails_the_run_at_once(app: jobloom.App) -> None:
    run = await app.start(app.flows["publish-image"], {"image": "a.png"}, deadline=30)
    assert await expire(app) == [run.id]
    done = await app.get_run(run.id)
    assert done.state == "failed" and {s.state for s in done.nodes.values()} == {"failed"}


# -- 4 and 5. deadlines: the flow's default, start's override, re-armed on resume ------------------------


async def test_the_flow_sets_the_default_deadline_and_start_overrides_it(app: jobloom.App) -> None:
    before = time.time()
    default = await app.start(app.flows["keyed"], {"items": [1]})
    override = await app.start(app.flows["keyed"], {"items": [1]}, deadline=5)
    after = time.time()  # each deadline counts from the start, some moment between before and after
    assert default.deadline is not None and before - 0.01 <= default.deadline.timestamp() - 600 <= after + 0.01
    assert override.deadline is not None and before - 0.01 <= override.deadline.timestamp() - 5 <= after + 0.01
    with pytest.raises(jobloom.InvalidOption, match="invalid deadline: -1; expected a finite number > 0"):
        await app.start(app.flows["keyed"], {"items": [1]}, deadline=-1)
    for bad in (0, float("inf"), float("nan"), "60"):
        with pytest.raises(jobloom.InvalidOption, match="invalid deadline"):
            jobloom.Flow("bad", deadline=bad)  # type: ignore[arg-type]


async def test_resume_arms_the_deadline_again(app: jobloom.App) -> None:
    run = await app.start(app.flows["publish-image"], {"image": "a.png"}, deadline=0.05)
    store = await app.store()  # checked at a moment past the deadline (no need to wait for it)
    assert await store.transact(lambda tx: flowstop.fail_past_deadline(tx, time.time() + 0.1)) == [run.id]
    resumed_at = time.time()
    resumed = await app.resume_run(run.id)
    assert resumed.state == "running" and resumed.deadline is not None
    assert 0.0 < resumed.deadline.timestamp() - resumed_at <= 0.05 + 0.5
    assert resumed.deadline.timestamp() > run.deadline.timestamp()  # type: ignore[union-attr]
    later = await app.start(app.flows["publish-image"], {"image": "b.png"}, id="long", deadline=120)
    await store.transact(lambda tx: flowstop.fail_past_deadline(tx, time.time() + 200))
    again = await app.resume_run(later.id)
    assert again.deadline is not None and 119 < again.deadline.timestamp() - time.time() <= 120


# -- 6. fan-out children named by a key -----------------------------------------------------------------


async def test_fan_out_children_named_by_key_keep_item_order(app: jobloom.App) -> None:
    run = await app.start(app.flows["keyed"], {"items": [30, 1, 200, 7]})
    await drain_all(app)
    done = await app.get_run(run.id)
    assert done.state == "succeeded"
    assert sorted(n for n in done.nodes if n.startswith("resize:")) == [
        "resize:s1", "resize:s200", "resize:s30", "resize:s7"]
    assert done.nodes["collect"].result["results"] == [60, 2, 400, 14]


@pytest.mark.parametrize(("items", "error"), [
    ([1, 2, 1], "key of node 'resize' gave 's1' for items 0 and 2: keys must be unique within the fan-out"),
    ([1, "a/b"], "key of node 'resize' gave 'a/b' for item 1: expected a name without ':' or '/'"),
])
async def test_bad_fan_out_keys_fail_the_map_node(app: jobloom.App, items: list[Any], error: str) -> None:
    run = await app.start(app.flows["keyed"], {"items": items})
    await drain_all(app)
    done = await app.get_run(run.id)
    assert done.nodes["resize"].state == "failed" and error in (done.nodes["resize"].error or "")
    assert done.nodes["collect"].state == "skipped" and done.state == "failed"
    assert [n for n in done.nodes if n.startswith("resize:")] == []
