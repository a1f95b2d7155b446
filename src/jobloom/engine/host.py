"""What a worker needs from the application it runs for, as a protocol: the engine never imports
the :class:`jobloom.App` that satisfies it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from jobloom.core.codecs import Codec
    from jobloom.engine.hooks import EngineHooks
    from jobloom.engine.housekeeper import Housekeeper
    from jobloom.engine.middleware import Middlewares
    from jobloom.engine.offload import Offload
    from jobloom.engine.performer import PerformerSpec
    from jobloom.engine.telemetry import Telemetries
    from jobloom.store.base import Store


class Host(Protocol):
    """A store, a clock, a registry of performers, a way to spawn jobs, housekeepers and the hooks
    into runs: the narrow view of an app that :class:`~jobloom.engine.worker.Worker` works with."""

    lease: float
    env: Any
    signing_secret: bytes | None
    telemetry: Telemetries  # what the worker tells about its cycles and attempts
    middleware: Middlewares  # what runs around each attempt
    codec: Codec  # how jobs' content is stored (payloads, results, steps)
    offload: Offload | None  # large payloads and results go to this blob store (None: all kept in rows)

    @property
    def specs(self) -> Mapping[str, PerformerSpec]:
        """The app's performers, by binding."""
        ...

    @property
    def hooks(self) -> EngineHooks:
        """The engine's callbacks into runs."""
        ...

    @property
    def housekeepers(self) -> Sequence[Housekeeper]:
        """Periodic work each worker runs beside its cycles."""
        ...

    @property
    def spawn_child(self) -> Callable[..., Awaitable[Any]]:
        """``ctx.spawn`` for a job outside any run."""
        ...

    async def store(self) -> Store:
        """The store for the running event loop, connected and checked."""
        ...

    def store_if_open(self) -> Store | None:
        """The store of the running event loop if one was opened (no I/O)."""
        ...

    def spec(self, performer: Any) -> PerformerSpec:
        """The spec of a performer class or binding name; unknown ones raise ``UnknownBinding``."""
        ...

    async def register_bindings(self, bindings: Iterable[str] | None = None) -> None:
        """Store the policy of the bindings this process performs."""
        ...
