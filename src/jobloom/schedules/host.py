"""What schedules need from the application, as a protocol: its schedules, performers and flows, its
store, and a way to start a flow run. :class:`jobloom.App` satisfies it; schedules never import it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from jobloom.core.types import Job, Run
    from jobloom.engine.performer import PerformerSpec
    from jobloom.schedules.schedule import Schedule
    from jobloom.store.base import Store


class ScheduleHost(Protocol):
    """The narrow view of an app that firing and managing schedules needs."""

    @property
    def schedules(self) -> Mapping[str, Schedule]:
        """The schedules declared with the app, by name."""
        ...

    @property
    def specs(self) -> Mapping[str, PerformerSpec]:
        """The app's performers, by binding."""
        ...

    @property
    def flows(self) -> Mapping[str, Any]:
        """The app's flows, by name."""
        ...

    def spec(self, performer: Any) -> PerformerSpec:
        """The spec of a performer class or binding name; unknown ones raise ``UnknownBinding``."""
        ...

    async def store(self) -> Store:
        """The store for the running event loop, connected and checked."""
        ...

    async def start(self, flow: Any, input: Any, *, id: str | None = None, deadline: float | None = None) -> Run:
        """Start a flow run (the same id again returns the same run)."""
        ...

    async def get_run(self, run_id: str) -> Run:
        """A flow run."""
        ...

    async def get_job(self, job_id: int) -> Job:
        """A job."""
        ...
