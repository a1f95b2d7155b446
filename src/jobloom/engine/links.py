"""What ``self.ctx`` reads of the jobs a running job is linked to: its dependencies."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from jobloom.core.types import Job
from jobloom.engine.dependencies import read_dependencies
from jobloom.store.base import Store


class Links:
    """``ctx.dependencies()`` of a worker's jobs, read through the worker's store."""

    def __init__(self, store: Callable[[], Awaitable[Store]]) -> None:
        self._store = store

    async def dependencies(self, job_id: int) -> dict[int, Job]:
        """The jobs that job ``job_id`` depends on, by id."""
        return await read_dependencies(await self._store(), job_id)
