"""An app's stores: one connected, migration-checked store (with its enqueue coalescer) per event loop.

An :class:`~jobloom.app.facade.App` may be used from several event loops (a web server's, the sync
bridge's, a test's): each gets a store of its own, opened on first use and checked against the
migrations the code expects, and closed with that loop's :meth:`Stores.close`.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from typing import Any

from jobloom.app.loops import Core
from jobloom.core.codecs import IDENTITY, Codec
from jobloom.core.errors import MigrationsMissing, MigrationsTooOld, StoreError
from jobloom.core.types import Clock
from jobloom.engine.offload import Offload
from jobloom.engine.telemetry import Telemetries
from jobloom.store import Store, open_store
from jobloom.store.migrations import missing_migrations


class Stores:
    """The stores of one app, one per event loop, made from its URL and store options.

    ``open()`` is called once at construction, so that a malformed URL or an option no store takes is
    refused when the app is built, naming it, rather than at its first enqueue.
    """

    def __init__(self, url: str, options: dict[str, Any], *, clock: Clock | None, auto_migrate: bool,
                 telemetry: Telemetries, codec: Codec = IDENTITY) -> None:
        self.url = url
        self.codec = codec
        self.options = options
        self.clock = clock
        self.auto_migrate = auto_migrate
        self.telemetry = telemetry
        self.offload: Offload | None = None  # the app's blob store, given to each loop's enqueuer
        self._cores: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Core] = weakref.WeakKeyDictionary()
        self._last: tuple[weakref.ref[asyncio.AbstractEventLoop], Core] | None = None
        self.open()

    def open(self) -> Store:
        """A new store for this app's URL and options, not connected yet (the caller opens and closes it)."""
        try:
            store = open_store(self.url, **self.options)
        except TypeError as exc:  # a keyword neither App() nor the store's driver takes
            raise StoreError(f"App() got an option that neither it nor its store takes ({exc}); "
                             f"options given to the store: {sorted(self.options)}") from None
        if self.clock is not None:
            store.clock = self.clock.now
        store.codec = self.codec
        return store

    async def core(self) -> Core:
        """The store and enqueue coalescer of the running event loop, connected and migration-checked."""
        loop = asyncio.get_running_loop()
        last = self._last
        if last is not None and last[0]() is loop:  # the common case: the same loop as last time
            return last[1]
        core = self._core_of(loop)
        if not core.checked:
            async with core.ready:
                if not core.checked:
                    await core.store.open()
                    await self._check_migrations(core.store)
                    core.checked = True
        self._last = (weakref.ref(loop), core)
        return core

    def _core_of(self, loop: asyncio.AbstractEventLoop) -> Core:
        core = self._cores.get(loop)
        if core is None:
            core = self._cores[loop] = Core(self.open(), self.telemetry, self.offload)
        return core

    async def _check_migrations(self, store: Store) -> None:
        applied = await store.applied_migrations()
        missing = await _missing(store, applied)
        if missing and self.auto_migrate:
            await store.migrate()
        elif missing:
            raise MigrationsMissing(missing, await store.location(), none_applied=not applied)

    async def migrate(self) -> list[str]:
        """Apply the running loop's store's missing migrations; return the names applied now."""
        core = self._core_of(asyncio.get_running_loop())
        await core.store.open()
        await _missing(core.store, await core.store.applied_migrations())  # a store 0.2 left part-way: refused
        applied = await core.store.migrate()
        core.checked = True
        return applied

    def if_open(self) -> Store | None:
        """The store of the running event loop if one was opened (no I/O; None outside a loop)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return None
        core = self._cores.get(loop)
        return None if core is None else core.store

    def now(self) -> float:
        """The app's clock: the test clock if one is set, else the running loop's store's (or any checked
        store's), else this host's before any store was opened."""
        if self.clock is not None:
            return self.clock.now()
        store = self.if_open()
        if store is None:
            store = next((core.store for core in list(self._cores.values()) if core.checked), None)
        return time.time() if store is None else store.now()

    async def close(self) -> None:
        """Close the running loop's store, if it has one."""
        self._last = None
        core = self._cores.pop(asyncio.get_running_loop(), None)
        if core is not None:
            await core.store.close()


async def _missing(store: Store, applied: list[str]) -> list[str]:
    """The names of the migrations ``store`` lacks; raises :class:`MigrationsTooOld`, naming where the
    store is, for one that jobloom 0.2 migrated part of the way."""
    try:
        return [m.name for m in missing_migrations(store.dialect, applied)]
    except MigrationsTooOld as exc:
        raise exc.at(await store.location()) from None
