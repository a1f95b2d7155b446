"""The coordinator's plan of what a finished node moves on (``runs._downstream``), against a reference
model: every waiting node re-decided until nothing changes, in any order."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from jobloom.core.states import ACTIVE_STATES
from jobloom.flows.runs import _downstream

STATES = ["waiting", "queued", "running", "succeeded", "failed", "skipped", "cancelled"]


def reference(node: str, graph: dict[str, list[str]], down: dict[str, list[str]], states: dict[str, str],
              anyway: frozenset[str], running: bool) -> dict[str, str]:
    """Nodes downstream of ``node``, and downstream of what gets skipped, decided again and again."""
    out = dict(states)
    considered = set(down[node])
    changed = True
    while changed:
        changed = False
        for d in sorted(considered):
            if out[d] != "waiting":
                continue
            ups = [out[u] for u in graph[d]]
            finished = not any(u in ACTIVE_STATES for u in ups)
            if all(u == "succeeded" for u in ups) or (d in anyway and finished):
                if running:
                    out[d], changed = "queued", True
            elif d not in anyway and any(u not in ACTIVE_STATES and u != "succeeded" for u in ups):
                out[d], changed = "skipped", True
                considered |= set(down[d])
    return out


@st.composite
def runs(draw: st.DrawFn) -> tuple[str, dict[str, list[str]], dict[str, str], frozenset[str], bool]:
    n = draw(st.integers(2, 8))
    names = [f"n{i}" for i in range(n)]
    graph = {b: [a for a in names[:i] if draw(st.booleans())] for i, b in enumerate(names)}
    states = {name: draw(st.sampled_from(STATES)) for name in names}
    finished = draw(st.sampled_from(names[:-1]))
    states[finished] = draw(st.sampled_from(["succeeded", "failed", "skipped", "cancelled"]))
    anyway = frozenset(x for x in names if draw(st.booleans()))
    return finished, graph, states, anyway, draw(st.booleans())


@settings(max_examples=400, deadline=None)
@given(runs())
def test_the_plan_is_the_reference_model(case: tuple[str, dict[str, list[str]], dict[str, str], frozenset[str],
                                                      bool]) -> None:
    node, graph, states, anyway, running = case
    down: dict[str, list[str]] = {n: [] for n in graph}
    for n, ups in graph.items():
        for up in ups:
            down[up].append(n)
    plan = _downstream(node, graph, down, dict(states), anyway, running=running)  # type: ignore[arg-type]
    assert len({d for d, _ in plan}) == len(plan), "a node is moved once"
    after = dict(states)
    for d, to in plan:
        assert after[d] == "waiting"
        after[d] = to
    assert after == reference(node, graph, down, states, anyway, running)


def test_a_node_that_runs_anyway_waits_for_every_upstream() -> None:
    graph = {"a": [], "b": [], "c": ["a", "b"]}
    down = {"a": ["c"], "b": ["c"], "c": []}
    waiting = {"a": "failed", "b": "running", "c": "waiting"}
    assert _downstream("a", graph, down, waiting, frozenset({"c"}), running=True) == []  # type: ignore[arg-type]
    done = {"a": "failed", "b": "succeeded", "c": "waiting"}
    assert _downstream("b", graph, down, done, frozenset({"c"}), running=True) == [("c", "queued")]  # type: ignore[arg-type]
    assert _downstream("b", graph, down, done, frozenset(), running=True) == [("c", "skipped")]  # type: ignore[arg-type]
