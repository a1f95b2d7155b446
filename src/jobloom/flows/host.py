"""What flows need from the application, as a protocol: its flows, its performers' specs, the
store and the store's clock. :class:`jobloom.App` satisfies it; flows never import it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from jobloom.engine.performer import PerformerSpec
    from jobloom.engine.telemetry import Telemetry
    from jobloom.flows.flow import Flow
    from jobloom.store.base import Store


class FlowHost(Protocol):
    """The narrow view of an app that starting and executing flow runs needs."""

    @property
    def flows(self) -> Mapping[str, Flow]:
        """The app's flows (and their sub-flows) by name."""
        ...

    def spec(self, performer: Any) -> PerformerSpec:
        """The spec of a performer class or binding name; unknown ones raise ``UnknownBinding``."""
        ...

    def now(self) -> float:
        """The store's clock."""
        ...

    @property
    def telemetry(self) -> Telemetry:
        """What the app tells about its enqueues (a run's start is one)."""
        ...

    async def store(self) -> Store:
        """The store for the running event loop, connected and checked."""
        ...
