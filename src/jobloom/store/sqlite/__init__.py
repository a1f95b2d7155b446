"""The SQLite store: one database file, ``BEGIN IMMEDIATE`` writes, wake-ups over Unix datagram sockets."""

from __future__ import annotations

from jobloom.store.sqlite.store import SQLiteStore

__all__ = ["SQLiteStore"]
