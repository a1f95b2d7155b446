"""Stores: where the truth lives. ``open_store(url)`` picks the driver for a URL."""

from __future__ import annotations

from jobloom.store.base import Store, Tx, open_store

__all__ = ["Store", "Tx", "open_store"]
