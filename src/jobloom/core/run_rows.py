"""The records of flow runs the store returns (:mod:`jobloom.core.rows` says how records are made and
read; it re-exports these): runs, their jobs, nodes and children."""

from __future__ import annotations

from typing import NamedTuple


class RunRow(NamedTuple):
    """A flow run (``jobloom_runs``)."""

    id: str
    flow: str
    state: str
    input: str
    graph: str
    deadline: float | None
    parent_job_id: int | None
    depth: int
    error: str | None
    created_at: float
    finished_at: float | None
    deadline_seconds: float | None
    spec: str | None


class RunStateRow(NamedTuple):
    """A run's id and state."""

    id: str
    state: str


class RunJobRow(NamedTuple):
    """A job of a run."""

    id: int
    node: str | None
    state: str
    result: str | None
    error: str | None
    attempt: int
    binding: str


class RunsJobRow(NamedTuple):
    """A job of one of several runs."""

    id: int
    node: str | None
    state: str
    result: str | None
    error: str | None
    attempt: int
    binding: str
    run_id: str | None


class NodeRow(NamedTuple):
    """A node of a run."""

    node: str | None


class NodeStateRow(NamedTuple):
    """A node's state."""

    node: str | None
    state: str


class NodeResultRow(NamedTuple):
    """A node's state, result and error."""

    node: str | None
    state: str
    result: str | None
    error: str | None


class ChildRow(NamedTuple):
    """A fan-out child's end."""

    node: str | None
    state: str
    result: str | None
    error: str | None


class NewChildRow(NamedTuple):
    """A child job just inserted."""

    id: int
    binding: str
