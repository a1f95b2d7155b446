"""An app's stores: options no store takes and malformed URLs are refused when the app is built."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from jobloom import App
from jobloom.core.errors import StoreError


def test_an_unknown_option_is_refused_at_app_naming_it(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="midleware"):
        App(f"sqlite:///{tmp_path}/a.db", midleware=[])
    with pytest.raises(StoreError, match="pool_maks"):
        App("postgresql://postgres@127.0.0.1:5432/test", pool_maks=3)  # refused before any connection


def test_a_malformed_url_is_refused_at_app(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="mysql://x"):
        App("mysql://x")


def test_each_event_loop_has_its_own_store(tmp_path: Path) -> None:
    app = App(f"sqlite:///{tmp_path}/a.db")

    async def store_of_this_loop() -> object:
        store = await app.store()
        assert app.store_if_open() is store
        await app.close()
        assert app.store_if_open() is None
        return store

    first, second = asyncio.run(store_of_this_loop()), asyncio.run(store_of_this_loop())
    assert first is not second
    assert app.store_if_open() is None  # outside a loop
