"""Stores: where the truth lives. ``open_store(url)`` picks the driver for a URL.

``base`` is the seam the engine programs against; ``sqlite/`` and ``postgres/`` are the drivers, each
with its named SQL and migrations in its ``sql/`` folder (loaded by ``sql``)."""

from __future__ import annotations

from typing import Any

from jobloom.core.errors import StoreError
from jobloom.store.base import Store, Tx


def open_store(url: str, **options: Any) -> Store:
    """Build the driver for ``url`` (``sqlite:///path.db`` or ``postgresql://...``); not yet connected."""
    if url.startswith("sqlite:"):
        from jobloom.store.sqlite.store import SQLiteStore

        return SQLiteStore(url, **options)
    if url.startswith(("postgresql:", "postgres:")):
        try:
            from jobloom.store.postgres.store import PostgresStore
        except ImportError as exc:  # pragma: no cover - depends on the installation
            raise StoreError(
                f"the PostgreSQL store needs psycopg 3: pip install 'jobloom[postgres]' ({exc})"
            ) from exc
        return PostgresStore(url, **options)
    raise StoreError(f"unsupported store URL {url!r}: use sqlite:///path.db or postgresql://user@host/db")


__all__ = ["Store", "Tx", "open_store"]
