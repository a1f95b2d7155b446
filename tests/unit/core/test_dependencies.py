"""The dependency decision (``core.dependencies.next_step``) against a reference model: jobs of a
random DAG end in random orders and ways; a job runs exactly when the model says it may."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobloom.core.dependencies import (
    RELEASE,
    SKIP,
    WAIT,
    bad_ending,
    check_depends_on,
    check_on_failure,
    next_step,
)
from jobloom.core.errors import InvalidOption

ENDINGS = ["succeeded", "failed", "cancelled", "stalled"]


@st.composite
def graphs(draw: st.DrawFn) -> tuple[dict[int, list[int]], dict[int, str], dict[int, str], list[int]]:
    """Jobs 0..n-1, each depending on some earlier ones; how each with no dependencies (or released)
    would end; each one's on_failure; and the order in which runnable jobs are picked."""
    n = draw(st.integers(1, 8))
    deps = {j: sorted(draw(st.sets(st.integers(0, j - 1), max_size=3))) if j else [] for j in range(n)}
    endings = {j: draw(st.sampled_from(ENDINGS)) for j in range(n)}
    on_failure = {j: draw(st.sampled_from(["skip", "run"])) for j in range(n)}
    picks = draw(st.lists(st.integers(0, 100), min_size=n, max_size=n))
    return deps, endings, on_failure, picks


def _simulate(deps: dict[int, list[int]], endings: dict[int, str], on_failure: dict[int, str],
              picks: list[int]) -> dict[int, str]:
    """The engine's way: countdowns closed edge by edge as jobs end, each step decided by next_step."""
    pending = {j: len(d) for j, d in deps.items()}
    state = {j: "queued" if not d else "waiting" for j, d in deps.items()}
    dependants = {j: [k for k, d in deps.items() if j in d] for j in deps}

    def end(j: int, how: str) -> None:
        state[j] = how
        for k in dependants[j]:
            pending[k] -= 1
            step = next_step(pending[k], on_failure[k], j if bad_ending(how) else None)
            if state[k] != "waiting":
                continue
            if step == SKIP:
                end(k, "skipped")
            elif step == RELEASE:
                state[k] = "queued"

    for pick in picks:
        runnable = [j for j, s in state.items() if s == "queued"]
        if not runnable:
            break
        chosen = runnable[pick % len(runnable)]
        end(chosen, endings[chosen])
    while runnable := [j for j, s in state.items() if s == "queued"]:
        end(runnable[0], endings[runnable[0]])
    return state


def _reference(deps: dict[int, list[int]], endings: dict[int, str], on_failure: dict[int, str]) -> dict[int, str]:
    """What must happen, job by job in id order (dependencies come first): a job runs if every
    dependency succeeded, or ended at all under on_failure='run'; else it is skipped."""
    final: dict[int, str] = {}
    for j in sorted(deps):
        ended = [final[d] for d in deps[j]]
        if all(s == "succeeded" for s in ended) or on_failure[j] == "run":
            final[j] = endings[j]
        else:
            final[j] = "skipped"
    return final


@given(graphs())
def test_every_job_ends_as_the_reference_says_whatever_the_order(g: tuple[dict[int, list[int]], dict[int, str],
                                                                            dict[int, str], list[int]]) -> None:
    deps, endings, on_failure, picks = g
    assert _simulate(deps, endings, on_failure, picks) == _reference(deps, endings, on_failure)


def test_next_step() -> None:
    assert next_step(2, "skip", None) == WAIT
    assert next_step(0, "skip", None) == RELEASE
    assert next_step(1, "skip", 7) == SKIP
    assert next_step(1, "run", 7) == WAIT
    assert next_step(0, "run", 7) == RELEASE


def test_the_options_are_checked() -> None:
    assert check_depends_on([3, 1, 3]) == (1, 3)
    assert check_depends_on([]) is None and check_depends_on(None) is None
    for bad in ("12", [0], [True], [1.5], 5):
        with pytest.raises(InvalidOption, match="depends_on"):
            check_depends_on(bad, "B")
    with pytest.raises(InvalidOption, match="at most 1000"):
        check_depends_on(range(1, 1002))
    assert check_on_failure(None) == "skip" and check_on_failure("run") == "run"
    with pytest.raises(InvalidOption, match="on_dependency_failure"):
        check_on_failure("ignore")
