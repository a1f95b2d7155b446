"""The public records: a job built field by field without its dataclass ``__init__`` is the same job."""

from __future__ import annotations

import dataclasses

import pytest

from jobloom.core.types import Job, job_of


def test_job_of_makes_the_job_its_constructor_makes() -> None:
    values = (7, "Report", "failed", 2, 3, 5, "u", "k", "at_most_once", "boom", '{"a": 1}', '"r"', 10.0, 9.0,
              10.5, 11.0, True, "run-1", "node-a", '["t"]', '{"m": 1}', '{"fraction": 0.5, "at": 10.2, "attempt": 2}',
              1, 4)
    made, fast = Job(*values), job_of(values)
    for f in dataclasses.fields(Job):
        assert getattr(fast, f.name) == getattr(made, f.name), f.name
    assert (fast.payload, fast.result, fast.tags, fast.meta, fast.attempts_spent) == (
        made.payload, made.result, made.tags, made.meta, made.attempts_spent)
    assert fast.progress == made.progress and fast.created_at == made.created_at
    assert fast == made and hash(fast) == hash(made) and repr(fast) == repr(made)
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.state = "queued"  # type: ignore[misc]
    with pytest.raises(TypeError, match="takes 24 values"):
        job_of(values[:-1])
