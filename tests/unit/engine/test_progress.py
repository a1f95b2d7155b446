"""The progress buffer keeps a job's last progress for the report that ends it, even while a write
of its own is in flight (which no longer applies once the report has committed first)."""

from __future__ import annotations

from jobloom.engine.progress import ProgressBuffer


def test_a_report_takes_progress_that_a_write_of_its_own_has_not_settled() -> None:
    buffer = ProgressBuffer()
    buffer.record((1, 1), "half")
    buffer.record((2, 1), "other")
    in_flight = buffer.take()  # the periodic write took everything and waits on its transaction
    assert [r["progress"] for r in in_flight] == ["half", "other"]
    # job 1 ends meanwhile: its report must still write the last progress
    assert buffer.take([(1, 1)]) == [{"id": 1, "attempt": 1, "progress": "half"}]
    buffer.settle(in_flight)
    assert buffer.take([(1, 1)]) == [] and buffer.take([(2, 1)]) == []


def test_newer_progress_wins_over_a_write_in_flight_and_survives_its_settling() -> None:
    buffer = ProgressBuffer()
    buffer.record((1, 1), "a quarter")
    in_flight = buffer.take()
    buffer.record((1, 1), "three quarters")
    buffer.settle(in_flight)
    assert buffer.take([(1, 1)]) == [{"id": 1, "attempt": 1, "progress": "three quarters"}]


def test_a_failed_write_is_restored_and_settled() -> None:
    buffer = ProgressBuffer()
    buffer.record((1, 1), "half")
    in_flight = buffer.take()
    buffer.restore(in_flight)
    buffer.settle(in_flight)
    assert buffer.inflight == {}
    assert buffer.take() == [{"id": 1, "attempt": 1, "progress": "half"}]
