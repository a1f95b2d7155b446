"""The rows of calls between jobs (``queries_calls.sql``; see :mod:`jobloom.engine.calls`)."""

from __future__ import annotations

from typing import NamedTuple


class CallChildRow(NamedTuple):
    """The job a ``self.call`` made, as its caller reads it."""

    id: int
    binding: str
    state: str
    result: str | None
    error: str | None


class ChildStateRow(NamedTuple):
    """A called child's state, as its suspending caller's report reads it."""

    id: int
    state: str


class VersionRow(NamedTuple):
    """The version of the code that first ran a job (None: code without a version)."""

    version: int | None


class ParentRow(NamedTuple):
    """The caller of a job made by ``self.call``."""

    parent_id: int
