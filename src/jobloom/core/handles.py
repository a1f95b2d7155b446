"""Handles of named SQL: :class:`Query` (a query and the record of its rows) and :class:`Statement` (a
statement that returns no rows). ``jobloom.core.queries.Q`` holds one per name, generated from the SQL
(``./dev gen``), so a misspelt name fails where it is written (mypy; ``AttributeError`` when run), never in
the store.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

R = TypeVar("R", bound=tuple[Any, ...])


class Query(Generic[R]):
    """A named query (its name in the ``queries*.sql`` files) and the record of its rows."""

    __slots__ = ("make", "name", "row")

    def __init__(self, name: str, row: type[R]) -> None:
        self.name = name
        self.row = row
        # the record straight from the row's tuple (no length check: tests/conformance/test_rows.py
        # checks every record against its query's columns)
        self.make: Callable[[Iterable[Any]], R] = functools.partial(tuple.__new__, row)

    def __repr__(self) -> str:
        return f"Query({self.name!r}, {self.row.__name__})"


class Statement(str):
    """A named statement whose rows nobody reads (``tx.execute(Q.x, params)``). It is its name, so a store
    runs it where it runs a name."""

    __slots__ = ()

    @property
    def name(self) -> str:
        """The statement's name in the ``queries*.sql`` files."""
        return str(self)

    def __repr__(self) -> str:
        return f"Statement({str(self)!r})"
