"""Searching jobs: :class:`JobFilter` (what to look for), :class:`JobPage` (one page, newest first, and the
cursor of the next), and :func:`search`, which reads a page in one read transaction.

Pages are keyset pages on the job id, descending: a cursor holds the last id of its page, and the
next page is the matching jobs below it. Ids only grow, so jobs inserted while someone pages appear
on no later page, and no job is listed twice or skipped because others were inserted.

Every page is read through an index (see ``queries_search.sql``): by the first tag (a side table of
(tag, job) pairs, written at enqueue for jobs with tags), by a binding's unique key, or by a state's
partial index (waiting, scheduled, queued, running, failed, stalled, cancelled), one binding or every
binding present in it. The other filters are checked on the rows those indexes give. A filter with none
of these (only succeeded or skipped jobs, only a binding, a text, a payload text or a time range) reads jobs newest
first from the cursor, by the primary key, until the page is full or it has gone :data:`SCAN_BUDGET`
ids down: then the page (fewer jobs than asked, maybe none) ends with a cursor where the reading
stopped, so that no page reads more than a bounded slice of a long history.
"""

from __future__ import annotations

import base64
import binascii
import heapq
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, overload

from jobloom.core import options as opt
from jobloom.core.errors import InvalidOption
from jobloom.core.queries import Q, Query
from jobloom.core.records import job_from_row
from jobloom.core.rows import JobRow
from jobloom.core.states import ALL_STATES
from jobloom.core.text import MAX_ID, MAX_KEY_BYTES, MAX_NAME_BYTES, check_name, check_tags, checked_id
from jobloom.core.types import Job
from jobloom.store import Store, Tx

COUNTED_STATES = ("waiting", "failed", "stalled", "cancelled")
"""States in ``jobloom_jobs_counted``: searched per binding, in id order."""
MAX_TEXT_BYTES = 1024
"""The ``text`` filter: UTF-8 bytes at most."""
SCAN_BUDGET = 50_000
"""A page that no index narrows reads at most this many ids (newest first) before it ends."""
_CURSOR_PREFIX = "j1."


def _time(field_name: str, value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise InvalidOption(field_name, value, "a timezone-aware datetime (or epoch seconds)")
        return value.timestamp()
    if isinstance(value, int | float) and not isinstance(value, bool):
        return opt.finite(field_name, value)
    raise InvalidOption(field_name, value, "a timezone-aware datetime or epoch seconds")


@dataclass(frozen=True, slots=True)
class JobFilter:
    """Which jobs a search or a bulk action is about; every field given must match (``None``: any).

    ``state``: one state or a list of states; ``binding``: a binding name; ``tags``: jobs carrying every
    one of these tags; ``unique_key``: the job's unique key; ``text``: a substring of the job's error
    (case-sensitive); ``created_after`` / ``created_before``: enqueued at or after / before this moment
    (an aware datetime or epoch seconds); ``payload_text``: a substring of the job's payload or meta (their
    JSON as stored, case-sensitive). Values are checked when the filter is made (``InvalidOption``).
    """

    state: str | Sequence[str] | None = None
    binding: str | None = None
    tags: Sequence[str] | None = None
    unique_key: str | None = None
    text: str | None = None
    created_after: datetime | float | None = None
    created_before: datetime | float | None = None
    payload_text: str | None = None
    states: tuple[str, ...] | None = field(init=False, repr=False, compare=False)
    tag_list: tuple[str, ...] | None = field(init=False, repr=False, compare=False)
    after_ts: float | None = field(init=False, repr=False, compare=False)
    before_ts: float | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        states: tuple[str, ...] | None
        if self.state is None:
            states = None
        else:
            given = (self.state,) if isinstance(self.state, str) else self.state
            if not isinstance(given, Sequence | set | frozenset) or not given:
                raise InvalidOption("state", self.state, f"a state or a non-empty list of: {', '.join(ALL_STATES)}")
            for s in given:
                if s not in ALL_STATES:
                    raise InvalidOption("state", s, f"one of {', '.join(ALL_STATES)}")
            states = tuple(s for s in ALL_STATES if s in set(given))
        object.__setattr__(self, "states", states)
        if self.binding is not None:
            check_name("binding", self.binding, MAX_NAME_BYTES)
        object.__setattr__(self, "tag_list", check_tags(self.tags))
        if self.unique_key is not None:
            check_name("unique_key", self.unique_key, MAX_KEY_BYTES)
        if self.text is not None:
            check_name("text", self.text, MAX_TEXT_BYTES)
        if self.payload_text is not None:
            check_name("payload_text", self.payload_text, MAX_TEXT_BYTES)
        object.__setattr__(self, "after_ts", _time("created_after", self.created_after))
        object.__setattr__(self, "before_ts", _time("created_before", self.created_before))

    def restricted(self, allowed: frozenset[str]) -> tuple[str, ...]:
        """The filter's states that are also in ``allowed`` (every allowed state when it names none)."""
        return tuple(s for s in ALL_STATES if s in allowed and (self.states is None or s in self.states))

    def params(self) -> dict[str, Any]:
        """The filter as the search queries' parameters."""
        return {
            "states": None if self.states is None else list(self.states), "binding": self.binding,
            "unique_key": self.unique_key, "text": self.text, "created_after": self.after_ts,
            "created_before": self.before_ts, "tags": None if self.tag_list is None else list(self.tag_list),
            "payload_text": self.payload_text,
        }


@dataclass(frozen=True, eq=False)
class JobPage(Sequence[Job]):
    """One page of a search: ``jobs`` (newest first) and ``next_cursor`` (``None`` on the last page).

    The page is also a sequence of its jobs (``for job in page``, ``len(page)``, ``page[0]``), and equal
    to a list of the same jobs."""

    jobs: list[Job]
    next_cursor: str | None = None

    @overload
    def __getitem__(self, index: int) -> Job: ...
    @overload
    def __getitem__(self, index: slice) -> list[Job]: ...
    def __getitem__(self, index: int | slice) -> Job | list[Job]:
        return self.jobs[index]

    def __len__(self) -> int:
        return len(self.jobs)

    def __iter__(self) -> Iterator[Job]:
        return iter(self.jobs)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, JobPage):
            return self.jobs == other.jobs and self.next_cursor == other.next_cursor
        if isinstance(other, list):
            return self.jobs == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"JobPage({len(self.jobs)} jobs, next_cursor={self.next_cursor!r})"


def encode_cursor(job_id: int) -> str:
    """The opaque cursor of a page that ended at ``job_id``."""
    return _CURSOR_PREFIX + base64.urlsafe_b64encode(str(job_id).encode()).decode().rstrip("=")


def decode_cursor(cursor: object) -> int:
    """The id a cursor from :func:`encode_cursor` holds; anything else is ``InvalidOption``."""
    if isinstance(cursor, str) and cursor.startswith(_CURSOR_PREFIX):
        body = cursor[len(_CURSOR_PREFIX):]
        try:
            text = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)).decode()
            if text.isdigit():
                return min(int(text), MAX_ID)
        except (binascii.Error, UnicodeDecodeError, ValueError):
            pass
    raise InvalidOption("cursor", cursor, "a next_cursor returned by list_jobs")


def check_limit(limit: object) -> int:
    """A page size: an integer from 1 to 2**63-1."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_ID:
        raise InvalidOption("limit", limit, f"an integer from 1 to {MAX_ID}")
    return limit


def start_id(cursor: str | None, before: int | None) -> int:
    """The id below which a page starts: the cursor's, or ``before`` (a job id), or the top."""
    if cursor is not None and before is not None:
        raise InvalidOption("cursor", cursor, "either cursor or before, not both")
    if cursor is not None:
        return decode_cursor(cursor)
    if before is not None:
        return checked_id(before, "before", clamp=True)
    return MAX_ID


async def search(store: Store, f: JobFilter, *, limit: int, before: int) -> JobPage:
    """One page of the jobs matching ``f`` with ids below ``before``, newest first. A page that no
    index narrows reads :data:`SCAN_BUDGET` ids at most: when it stops there, its cursor goes on from
    the id it stopped at, whether the page is full or not."""
    limit = check_limit(limit)

    async def work(tx: Tx) -> tuple[list[JobRow], int]:
        floor = 0
        if scans(f):
            top = sum(r.n for r in await tx.fetch(Q.top_job_id))
            floor = max(0, min(before, top + 1) - SCAN_BUDGET)
        return await page_rows(tx, f, limit=min(limit + 1, MAX_ID), before=before, floor=floor), floor

    rows, floor = await store.transact(work, exclusive=False)
    more = len(rows) > limit
    jobs = [job_from_row(r, store.codec) for r in rows[:limit]]
    if more and jobs:
        return JobPage(jobs, encode_cursor(jobs[-1].id))
    return JobPage(jobs, encode_cursor(floor) if floor > 0 else None)


def scans(f: JobFilter) -> bool:
    """Whether no index narrows ``f``: its pages read the jobs by id (``search_all``)."""
    if f.tag_list or (f.unique_key is not None and f.binding is not None):
        return False
    return f.states is None or not all(s in COUNTED_STATES or s in ("queued", "scheduled", "running")
                                       for s in f.states)


async def page_rows(tx: Tx, f: JobFilter, *, limit: int, before: int, floor: int = 0) -> list[JobRow]:
    """Up to ``limit`` rows of matching jobs with ids below ``before``, newest first, each read through
    the index its filter allows (see the module's docstring); a filter that :func:`scans` reads ids
    down to ``floor`` only."""
    base = f.params() | {"before": before, "limit": limit}
    if f.tag_list:
        return await tx.fetch(Q.search_tagged, base | {"tag": f.tag_list[0]})
    if f.unique_key is not None and f.binding is not None:
        return await tx.fetch(Q.search_unique, base)
    # walk the index in id order and stop when the page is full, whatever the planner guesses of the
    # filters (a substring of the error, or a state's share under a generic plan): search_in_id_order
    await tx.execute(Q.search_in_id_order)
    if f.states is None or scans(f):
        return await tx.fetch(Q.search_all, base | {"floor": floor})
    queries: list[tuple[Query[JobRow], dict[str, Any]]] = []
    for state in f.states:
        one = base | {"state": state, "states": None}
        if state in ("scheduled", "running"):
            queries.append((Q.search_scheduled if state == "scheduled" else Q.search_running, one))
            continue
        query = Q.search_queued if state == "queued" else Q.search_counted
        if f.binding is not None:
            queries.append((query, one))
        else:
            of = Q.search_bindings_queued if state == "queued" else Q.search_bindings_counted
            bindings = await tx.fetch(of, {"state": state})
            queries += [(query, one | {"binding": b.binding}) for b in bindings]
    if len(queries) == 1:
        return await tx.fetch(*queries[0])
    parts = await tx.fetch_batch(queries) if queries else []
    merged = heapq.merge(*parts, key=lambda r: -int(r.id))
    return [row for _, row in zip(range(limit), merged, strict=False)]


__all__ = ["COUNTED_STATES", "SCAN_BUDGET", "JobFilter", "JobPage", "check_limit", "decode_cursor", "encode_cursor",
           "page_rows", "scans", "search", "start_id"]
