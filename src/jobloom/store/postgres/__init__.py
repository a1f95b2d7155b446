"""The PostgreSQL store: a connection pool at READ COMMITTED, row locks in the lock order, LISTEN/NOTIFY."""

from __future__ import annotations

from jobloom.store.postgres.store import PostgresStore

__all__ = ["PostgresStore"]
