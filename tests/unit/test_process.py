"""The worker process's entry point: what it does before its event loop starts."""

from __future__ import annotations

import gc
import weakref

from jobloom.process import YOUNG_COLLECTION_THRESHOLD, settle_heap


class _Node:
    me: _Node | None = None


def test_settle_heap_collects_start_up_garbage_and_freezes_the_rest() -> None:
    cycle = _Node()
    cycle.me = cycle  # garbage only the cycle collector can free
    gone = weakref.ref(cycle)
    del cycle
    kept = _Node()
    threshold = gc.get_threshold()
    try:
        settle_heap()
        assert gc.get_threshold()[0] == YOUNG_COLLECTION_THRESHOLD
        assert gone() is None  # collected first, not frozen with the living
        assert gc.get_freeze_count() > 0
        assert gc.is_tracked(kept) and not any(o is kept for o in gc.get_objects())  # out of the collector's walk
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)
