"""Long polls (``POST /v1/worker/claim`` with ``wait``, ``GET /v1/jobs/{id}/wait``): each ends as soon as
its client is gone or the server stops, one token holds only so many at once, and the waits of a
server share one wake-up subscription and one reading loop.

- :meth:`LongPolls.hold` counts the poll against its token (``429 TooManyLongPolls`` past the cap),
  and gives an event that is set when the client's connection closes (the ASGI receive channel says
  ``http.disconnect``) or when :meth:`LongPolls.stop` is called (the server is stopping): the poll then
  answers at once (an empty claim, a wait's timeout), and a dropped one frees its work within a moment.
- :class:`JobWaits` serves every wait of the server with one subscription to the store's wake-ups and
  one loop that reads all the waited jobs in one transaction per round: at each wake-up (at most every
  ``every`` seconds) and otherwise every ``every`` seconds backing off to ``cap``; never a transaction
  per waiting request.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from jobloom.app.facade import App
from jobloom.core.errors import JobNotFound, WaitTimeout
from jobloom.core.queries import Q
from jobloom.core.records import job_from_row
from jobloom.core.retrying import Delays
from jobloom.core.rows import JobRow
from jobloom.core.text import checked_id
from jobloom.core.types import Job
from jobloom.http.bounds import LONG_POLLS_PER_TOKEN, Receive
from jobloom.http.errors import ApiError
from jobloom.http.tokens import StoredToken
from jobloom.store import Store, Tx


class TooManyLongPolls(ApiError):
    """The token already holds as many long polls as one token may hold at once."""

    status = 429
    closes = True
    """The answer closes its connection: a client past its cap holds no connection by it either."""


class LongPolls:
    """The long polls under way: a cap per token, and the end of each (see the module)."""

    def __init__(self, per_token: int = LONG_POLLS_PER_TOKEN) -> None:
        self.per_token = per_token
        self.stopping = False
        self._held: dict[str, int] = {}
        self._gone: set[asyncio.Event] = set()

    @property
    def count(self) -> int:
        """Long polls under way."""
        return sum(self._held.values())

    def stop(self) -> None:
        """End every long poll now, and any that starts from now on (the server is stopping)."""
        self.stopping = True
        for gone in self._gone:
            gone.set()

    @contextlib.asynccontextmanager
    async def hold(self, token: StoredToken | None, receive: Receive) -> AsyncIterator[asyncio.Event]:
        """Count one long poll of ``token`` (None: a server without tokens) while it lasts; the event is
        set when its client leaves (``receive`` says ``http.disconnect``) or the server stops."""
        key = "" if token is None else token.name
        if self._held.get(key, 0) >= self.per_token:
            who = "this server (it takes no token)" if token is None else f"token {token.name!r}"
            raise TooManyLongPolls(
                f"{who} already holds {self.per_token} long polls (a claim with wait, or a job's wait), the most "
                f"one token may hold at once (jobloom serve --max-long-polls); end one, or give each group "
                "of workers its own token")
        gone = asyncio.Event()
        if self.stopping:
            gone.set()
        self._held[key] = self._held.get(key, 0) + 1
        self._gone.add(gone)
        watcher = asyncio.create_task(_watch(receive, gone))
        try:
            yield gone
        finally:
            watcher.cancel()
            self._gone.discard(gone)
            left = self._held[key] - 1
            if left:
                self._held[key] = left
            else:
                del self._held[key]
            await asyncio.gather(watcher, return_exceptions=True)


async def _watch(receive: Receive, gone: asyncio.Event) -> None:
    """Set ``gone`` when the client's connection closes (the request's body has been read by now)."""
    while (await receive())["type"] != "http.disconnect":
        pass
    gone.set()


class JobWaits:
    """Every job wait of a server, served by one wake-up subscription and one reading loop."""

    def __init__(self, app: App, every: float = 0.05, cap: float = 1.0) -> None:
        self.app = app
        self.every = every
        self.cap = cap
        self.rounds = 0
        """Rounds of reading the waited jobs so far (one transaction each)."""
        self._waiters: dict[int, set[asyncio.Future[Job]]] = {}
        self._latest: dict[int, Job] = {}
        self._task: asyncio.Task[None] | None = None

    async def wait(self, job_id: int, timeout: float, gone: asyncio.Event) -> Job:
        """The job once finished; ``WaitTimeout`` after ``timeout`` s, or at once when ``gone`` is set."""
        job = await self.app.get_job(job_id)  # JobNotFound at once
        if job.finished:
            return job
        done: asyncio.Future[Job] = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(job.id, set()).add(done)
        self._latest[job.id] = job
        if self._task is None:
            self._task = asyncio.create_task(self._run())
        leaving: asyncio.Future[Any] = asyncio.ensure_future(gone.wait())
        pending: list[asyncio.Future[Any]] = [done, leaving]
        try:
            await asyncio.wait(pending, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            leaving.cancel()
            waiters = self._waiters.get(job.id, set())
            waiters.discard(done)
            if not waiters:
                self._waiters.pop(job.id, None)
                latest = self._latest.pop(job.id, job)
            else:
                latest = self._latest.get(job.id, job)
        if done.done():
            ended = done.result()  # read as a row: an offloaded payload or result is read now (get_job's way)
            return ended if self.app.offload is None else await self.app.offload.resolved(ended)
        done.cancel()
        why = "the server is stopping" if gone.is_set() else f"after {timeout} s"
        raise WaitTimeout(f"job {job.id} is still {latest.state} {why}")

    async def _run(self) -> None:
        """Read the waited jobs at each wake-up and every so often, until nobody waits."""
        store = await self.app.store()
        wake = await store.wakeups()
        delays = Delays(self.every, self.cap)
        loop = asyncio.get_running_loop()
        try:
            while self._waiters:
                started = loop.time()
                await self._read_round(store)
                if not self._waiters:
                    break
                await wake.wait(delays.next())
                rest = self.every - (loop.time() - started)
                if rest > 0:  # many wake-ups: at most one round every `every` seconds
                    await asyncio.sleep(rest)
        except Exception as exc:  # the store failed: the waits end with the error, the next wait starts anew
            for waiters in self._waiters.values():
                for done in waiters:
                    if not done.done():
                        done.set_exception(exc)
        finally:
            self._task = None
            await wake.close()

    async def _read_round(self, store: Store) -> None:
        """Read every waited job in one transaction; settle the waits of those finished (or gone)."""
        ids = [checked_id(i) for i in self._waiters]

        async def work(tx: Tx) -> list[tuple[int, JobRow | None]]:
            return [(i, await tx.fetchone(Q.get_job, {"id": i})) for i in ids]

        rows = await store.transact(work, exclusive=False)
        self.rounds += 1
        for job_id, row in rows:
            waiters = self._waiters.get(job_id, set())
            if row is None:
                for done in waiters:
                    if not done.done():
                        done.set_exception(JobNotFound(job_id))
                continue
            job = job_from_row(row, store.codec)
            self._latest[job_id] = job
            if job.finished:
                for done in waiters:
                    if not done.done():
                        done.set_result(job)
