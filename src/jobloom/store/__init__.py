"""Stores: where the truth lives. ``open_store(url)`` picks the driver for a URL.

``base`` is the seam the engine programs against; ``sqlite/`` and ``postgres/`` are the drivers, each
with its named SQL and migrations in its ``sql/`` folder (loaded by ``sql``)."""

from __future__ import annotations

from typing import Any

from jobloom.core.errors import StoreError
from jobloom.core.extras import needs_extra
from jobloom.store.base import Store, Tx


def open_store(url: str, **options: Any) -> Store:
    """Build the driver for ``url`` (``sqlite:///path.db`` or ``postgresql://...``); not yet connected."""
    if url.startswith("sqlite:"):
        from jobloom.store.sqlite.store import SQLiteStore

        return SQLiteStore(url, **options)
    if url.startswith(("postgresql:", "postgres:")):
        with needs_extra("postgres", "a postgresql:// URL"):
            from jobloom.store.postgres.store import PostgresStore
        return PostgresStore(url, **options)
    raise StoreError(f"unsupported store URL {url!r}: use sqlite:///path.db or postgresql://user@host/db")


__all__ = ["Store", "Tx", "open_store"]
