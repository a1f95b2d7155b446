"""The runtime of an app: the pieces its parts work with, built once when the app is made.

An :class:`~jobloom.app.facade.App` builds one :class:`Runtime` in its ``__init__`` (with :func:`build`)
and hands it to the modules of this package: enqueueing, publishing, batches, bindings, diagnosis,
re-encryption and the pull protocol each take ``runtime: Runtime`` and use what it holds (the
performers' specs, the stores, the clock, the codec, the middleware, the telemetry, the blob store,
the engine's hooks, the sync bridge), never the app itself. The app's public API delegates to them.
"""

from __future__ import annotations

from collections.abc import Coroutine, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from jobloom.app import offloading
from jobloom.app.loops import SyncBridge
from jobloom.app.stores import Stores
from jobloom.core.codecs import Codec, checked_codec
from jobloom.core.errors import UnknownBinding
from jobloom.core.options import finite
from jobloom.engine.middleware import Middlewares
from jobloom.engine.performer import Performer, PerformerSpec, inspect_performer
from jobloom.engine.remote import RemoteBinding
from jobloom.engine.telemetry import OutcomeLog, Telemetries

if TYPE_CHECKING:
    from jobloom.core.types import Clock
    from jobloom.engine.enqueue import PerformerRef
    from jobloom.engine.hooks import EngineHooks
    from jobloom.engine.offload import Offload
    from jobloom.store import Store

T = TypeVar("T")


@dataclass(frozen=True, eq=False)
class Runtime:
    """What an app's parts work with, built once by the app (:func:`build`) and shared by all of them.

    Its fields are not reassigned once built; ``specs`` is the app's own dict of performer specs (the
    app lifts their size limits when it has a blob store) and ``stores`` opens a store per event loop.
    """

    specs: dict[str, PerformerSpec]
    """The app's performers (local and remote), by binding."""
    internal_bindings: tuple[str, ...]
    """The bindings of flows' own jobs (fan-outs, sub-flows), which no performer class declares."""
    stores: Stores
    """The app's stores, one per event loop, with their enqueue coalescers."""
    codec: Codec
    """How stored content (payloads, results, steps, events) is written and read."""
    clock: Clock | None
    """The test clock, if the app was given one (else the stores' clock)."""
    lease: float
    """Seconds a lease on a job lasts between heartbeats (a remote worker's too)."""
    middleware: Middlewares
    """What runs around each enqueue and attempt."""
    telemetry: Telemetries
    """What the app tells about its enqueues, publishes, cycles and attempts."""
    hooks: EngineHooks
    """The engine's callbacks into flow runs (every app has them, flows or not)."""
    offload: Offload | None
    """The blob store for large payloads and results (None: everything is kept in rows)."""
    bridge: SyncBridge = field(default_factory=SyncBridge)
    """The loop thread that runs the app's coroutines for synchronous callers."""

    def spec(self, performer: PerformerRef) -> PerformerSpec:
        """The spec of a performer class or binding name; unknown ones raise ``UnknownBinding``."""
        return spec_of(self.specs, performer)

    def now(self) -> float:
        """The app's clock: the test clock, else the store's, else this host's before a store was opened."""
        return self.stores.now()

    async def store(self) -> Store:
        """The store of the running event loop, connected and migration-checked."""
        return (await self.stores.core()).store

    def run_sync(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run one of the app's coroutines from synchronous code, on the app's loop thread."""
        return self.bridge.run(coro)


def spec_of(specs: Mapping[str, PerformerSpec], performer: PerformerRef) -> PerformerSpec:
    """The spec of a performer class or binding name among ``specs``; ``UnknownBinding`` if it has none."""
    name: str = performer if isinstance(performer, str) else str(
        getattr(performer, "binding", None) or getattr(performer, "__name__", repr(performer))
    )
    spec = specs.get(name)
    if spec is None or (not isinstance(performer, str) and performer not in (spec.cls, spec.remote)):
        raise UnknownBinding(name, list(specs))
    return spec


def performer_specs(performers: Iterable[type[Performer[Any, Any]] | RemoteBinding]) -> dict[str, PerformerSpec]:
    """The specs of an app's performers (classes are inspected, remote bindings carry theirs), by binding."""
    specs: dict[str, PerformerSpec] = {}
    for p in performers:
        spec = p.spec if isinstance(p, RemoteBinding) else inspect_performer(p)
        specs[spec.binding] = spec
    return specs


def build(url: str, specs: dict[str, PerformerSpec], hooks: EngineHooks, internal_bindings: Iterable[str], *,
          lease: float, clock: Clock | None, codec: Codec | None, middleware: Iterable[object], blobs: Any,
          offload_over: Any, blob_grace: Any, auto_migrate: bool, store_options: dict[str, Any]) -> Runtime:
    """An app's runtime: its options checked (a bad one refused, naming it), its stores made (a malformed
    URL or an option no store takes is refused now) and its blob store set up (see ``App``)."""
    checked = checked_codec(codec)
    lease = finite("lease", lease, minimum=0.0, above=True)
    chain = Middlewares(middleware)
    telemetry = Telemetries(OutcomeLog())
    stores = Stores(url, store_options, clock=clock, auto_migrate=auto_migrate, telemetry=telemetry, codec=checked)
    offload = stores.offload = offloading.configure(blobs, offload_over, blob_grace, now=stores.now, codec=checked)
    return Runtime(specs, tuple(internal_bindings), stores, checked, clock, lease, chain, telemetry, hooks, offload)


__all__ = ["Runtime", "build", "performer_specs", "spec_of"]
