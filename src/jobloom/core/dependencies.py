"""Dependencies between jobs, the pure part: the options checked, and what a waiting job does when
its dependencies end (:func:`next_step`). The I/O is :mod:`jobloom.engine.dependencies`."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from jobloom.core.errors import InvalidOption
from jobloom.core.states import SUCCEEDED

MAX_DEPENDENCIES: Final = 1000
"""The most jobs one job may depend on."""
ON_FAILURE: Final = ("skip", "run")
"""What a job does when a dependency ends without succeeding: skipped (the default), or run anyway."""
SKIP: Final = "skip"
RUN: Final = "run"
WAIT: Final = "wait"
RELEASE: Final = "release"


def check_depends_on(value: object, binding: str | None = None) -> tuple[int, ...] | None:
    """``depends_on`` as sorted distinct job ids (None for none), or ``InvalidOption`` naming the value."""
    if value is None:
        return None
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise InvalidOption("depends_on", value, "a list of job ids", binding)
    ids = list(value)
    for i in ids:
        if isinstance(i, bool) or not isinstance(i, int) or i <= 0 or i >= 2**63:
            raise InvalidOption("depends_on", i, "job ids (integers > 0)", binding)
    if len(ids) > MAX_DEPENDENCIES:
        raise InvalidOption("depends_on", f"{len(ids)} job ids", f"at most {MAX_DEPENDENCIES}", binding)
    return tuple(sorted(set(ids))) or None


def check_on_failure(value: object, binding: str | None = None) -> str:
    """``on_dependency_failure``: ``"skip"`` (None too) or ``"run"``."""
    if value is None:
        return SKIP
    if value not in ON_FAILURE:
        raise InvalidOption("on_dependency_failure", value, "'skip' or 'run'", binding)
    return str(value)


def bad_ending(state: str) -> bool:
    """Whether a dependency that ended in ``state`` did not succeed."""
    return state != SUCCEEDED


def next_step(pending: int, on_failure: str, failed: int | None) -> str:
    """What a waiting job does once some of its dependencies ended: ``pending`` is how many are still
    open, ``failed`` one that ended without succeeding (None if none did). ``"skip"`` as soon as one
    failed (unless ``on_failure`` is ``"run"``), ``"release"`` once none is open, else ``"wait"``."""
    if failed is not None and on_failure == SKIP:
        return SKIP
    return RELEASE if pending <= 0 else WAIT


def skip_reason(failed: int, state: str) -> str:
    """The error a skipped job records: the dependency that did not succeed, and how it ended."""
    return f"dependency {failed} ended {state}: skipped (on_dependency_failure='skip')"
