"""The debounce and expiry decisions, against their definitions."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from jobloom.core.deadlines import collapses, debounced_run_at, expires_before

times = st.floats(min_value=0, max_value=1e9, allow_nan=False)
spans = st.floats(min_value=0, max_value=1e6, allow_nan=False)


@given(times, spans, spans, st.none() | spans)
def test_the_run_is_a_window_after_the_latest_enqueue_capped_by_max_after_the_first(
        first: float, since: float, window: float, max_wait: float | None) -> None:
    now = first + since
    due = debounced_run_at(now, window, first, max_wait)
    assert now <= due <= now + window
    if max_wait is None or now + window <= first + max_wait:
        assert due == now + window
    else:
        assert due == max(now, first + max_wait)


def test_an_open_window_collapses_and_a_passed_one_does_not() -> None:
    assert collapses(10.0, 10.5) and not collapses(10.0, 10.0) and not collapses(11.0, 10.0)


def test_a_job_due_at_or_past_its_expiry_never_starts() -> None:
    assert expires_before(5.0, 5.0) and expires_before(6.0, 5.0)
    assert not expires_before(4.0, 5.0) and not expires_before(4.0, None)
