"""Helpers shared by the PostgreSQL driver tests: job rows to insert, and a migrated store."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from jobloom.engine.jobs import NewJob

if TYPE_CHECKING:
    from jobloom.store.postgres.store import PostgresStore


def new_job(binding: str = "SendMail", *, payload: str = '{"to": "a"}', unique_key: str | None = None,
            concurrency_key: str | None = None) -> NewJob:
    now = time.time()
    return NewJob(
        binding=binding, payload=payload, priority=0, run_at=now, state="queued", max_attempts=3,
        delivery="at_least_once", timeout=60.0, unique_key=unique_key,
        unique_until=None if unique_key is None else now + 3600, concurrency_key=concurrency_key,
        created_at=now,
    )


@contextlib.asynccontextmanager
async def open_store(url: str) -> AsyncIterator[PostgresStore]:
    """A migrated store on ``url``, closed afterwards."""
    from jobloom.store.postgres.store import PostgresStore  # psycopg is only needed once a test runs

    s = PostgresStore(url)
    await s.open()
    await s.migrate()
    try:
        yield s
    finally:
        await s.close()
