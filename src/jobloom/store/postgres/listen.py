"""Wake-ups for the PostgreSQL store: one ``LISTEN`` connection per store, shared by its subscribers.

A worker holds one subscription for its life and ``App.wait`` takes one per call; they all share
the store's listening connection, so waiting on many jobs costs no extra connections. A lost
connection is re-established with backoff, and every subscriber is then woken, since notifications
sent meanwhile were missed (a spurious wake-up only costs a look at the store).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

import psycopg
from psycopg import sql
from psycopg.rows import TupleRow

from jobloom.core.retrying import Delays
from jobloom.core.tasks import cancel_and_wait
from jobloom.store.base import Wakeups, read_hint, wait_event

if TYPE_CHECKING:
    from psycopg.pq.abc import PGconn

log = logging.getLogger("jobloom.store.postgres")
HEALTH_CHECK = 30.0  # a connection quiet for this long is probed: it may be silently dead
CONNECT_TIMEOUT = 10


class Listener:
    """The listening connection of one store and the subscribers it wakes."""

    def __init__(self, conninfo: str, channel: str,
                 cls: type[psycopg.AsyncConnection[TupleRow]] = psycopg.AsyncConnection) -> None:
        self.conninfo = conninfo
        self.cls = cls  # the store's connection class (it may choose among several servers)
        self.channel = channel
        self.subscribers: set[asyncio.Event] = set()
        self.callbacks: dict[asyncio.Event, list[Callable[[], None]]] = {}  # a subscriber's, by its event
        self.job_callbacks: dict[asyncio.Event, list[Callable[[int, str], None]]] = {}  # likewise: on_job
        self.conn: psycopg.AsyncConnection[TupleRow] | None = None
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    async def start(self) -> None:
        """Listen now if the server answers (so no signal sent after this returns is missed)."""
        try:
            self.conn = await self._listen()
        except (psycopg.OperationalError, OSError) as exc:
            log.warning("jobloom LISTEN failed (%s); retrying in the background", exc)
        self._task = asyncio.get_running_loop().create_task(self._run())

    def subscribe(self) -> Subscription:
        """A new subscriber's handle."""
        event = asyncio.Event()
        self.subscribers.add(event)
        return Subscription(self, event)

    def _signal(self, jobs: Iterable[tuple[int, str]] = ()) -> None:
        for job_id, binding in jobs:  # first: a worker woken below then knows the job
            for on_job in [c for cs in self.job_callbacks.values() for c in cs]:
                on_job(job_id, binding)
        for event in self.subscribers:
            event.set()
        for callbacks in list(self.callbacks.values()):
            for callback in callbacks:
                callback()

    async def _listen(self) -> psycopg.AsyncConnection[TupleRow]:
        conn = await self.cls.connect(self.conninfo, autocommit=True, connect_timeout=CONNECT_TIMEOUT)
        try:
            await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self.channel)))
        except BaseException:
            await conn.close()
            raise
        return conn

    async def _run(self) -> None:
        delays = Delays(0.05, 5.0, jitter=True)
        while not self._closed:
            if self.conn is None:
                try:
                    self.conn = await self._listen()
                except Exception as exc:
                    log.debug("jobloom LISTEN reconnect failed (%s); next try in %.2f s", exc, delays.current)
                    await asyncio.sleep(delays.next())
                    continue
                delays.reset()
                log.info("jobloom LISTEN connection re-established")
                self._signal()  # notifications may have been missed while disconnected
            conn = self.conn
            try:
                await self._serve(conn)
            except Exception as exc:  # whatever broke, listen again: a dead listener would go unnoticed
                if self._closed:
                    return
                log.warning("jobloom LISTEN connection lost (%s: %s); reconnecting", type(exc).__name__, exc)
                self.conn = None
                with contextlib.suppress(Exception):
                    await conn.close()
                self._signal()  # what was missed meanwhile is looked at now
                if not isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError | OSError):
                    await asyncio.sleep(1.0)  # not a lost connection: do not spin if it happens again

    async def _serve(self, conn: psycopg.AsyncConnection[TupleRow]) -> None:
        """Signal the subscribers on every notification ``conn`` receives, until it fails.

        The event loop calls back when the socket becomes readable, and the callback takes what arrived
        from libpq and signals at once (no task in between), so an idle listener costs nothing between
        notifications (psycopg's ``notifies()`` wakes ten times a second to look for interrupts). This
        task only waits: for a failure the callback met, or for ``HEALTH_CHECK`` seconds of quiet, when
        the connection is probed with a query (it may be silently dead); notifications that arrive
        while psycopg runs it reach the connection's notify handler."""
        loop = asyncio.get_running_loop()
        activity = asyncio.Event()
        failed: list[Exception] = []
        conn.add_notify_handler(lambda n: self._signal(_named([n.payload])))
        pgconn = conn.pgconn
        sock = pgconn.socket

        def readable() -> None:
            try:
                pgconn.consume_input()  # a closed or broken connection raises OperationalError here
                self._take(pgconn)
            except Exception as exc:
                failed.append(exc)
                loop.remove_reader(sock)  # a dead socket stays readable: not called again
            activity.set()

        loop.add_reader(sock, readable)
        try:
            self._take(pgconn)  # anything libpq read before the reader was in place
            while not self._closed:
                woken = await wait_event(activity, HEALTH_CHECK)
                if failed:
                    raise failed[0]
                if not woken:
                    loop.remove_reader(sock)  # psycopg waits on the socket itself while it runs the query
                    try:
                        await conn.execute("SELECT 1")  # quiet for long: it may be silently dead
                    finally:
                        if not self._closed:
                            loop.add_reader(sock, readable)
                    self._take(pgconn)
        finally:
            loop.remove_reader(sock)

    def _take(self, pgconn: PGconn) -> None:
        """Signal once if libpq holds notifications (each is taken off its queue), with the jobs they name."""
        payloads: list[str] = []
        while (notify := pgconn.notifies()) is not None:
            payloads.append(notify.extra.decode(errors="replace"))
        if payloads:
            self._signal(_named(payloads))

    async def stop(self) -> None:
        """Stop listening and close the connection; subscribers are woken one last time."""
        self._closed = True
        if self._task is not None:
            await cancel_and_wait([self._task])
        if self.conn is not None:
            with contextlib.suppress(Exception):
                await self.conn.close()
            self.conn = None
        self._signal()


class Subscription(Wakeups):
    """One subscriber of a store's :class:`Listener`."""

    def __init__(self, listener: Listener, event: asyncio.Event) -> None:
        self.listener = listener
        self._event = event

    async def wait(self, timeout: float | None) -> bool:
        """Wait for a notification (True) or the timeout (False); notifications meanwhile are merged."""
        return await wait_event(self._event, timeout)

    def on_signal(self, callback: Callable[[], None]) -> bool:
        """Call ``callback()`` from the listening task, the moment a notification arrives."""
        self.listener.callbacks.setdefault(self._event, []).append(callback)
        return True

    def on_job(self, callback: Callable[[int, str], None]) -> bool:
        """Call ``callback(job_id, binding)`` for a notification that names its job (an enqueue's)."""
        self.listener.job_callbacks.setdefault(self._event, []).append(callback)
        return True

    async def close(self) -> None:
        """Stop receiving wake-ups (the store's connection stays for its other subscribers)."""
        self.listener.subscribers.discard(self._event)
        self.listener.callbacks.pop(self._event, None)
        self.listener.job_callbacks.pop(self._event, None)


def _named(payloads: Iterable[str]) -> list[tuple[int, str]]:
    """The jobs that notifications' payloads name (an enqueue of one job: ``"ID:BINDING"``)."""
    return [job for p in payloads if p and (job := read_hint(p)) is not None]
