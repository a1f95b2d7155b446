"""The write-ahead log's checkpoint, taken off the commits on a waiting job's way.

In WAL mode SQLite copies the log back into the database file (a checkpoint: the pages written,
then the log and the file synced) in whichever commit takes the log past ``wal_autocheckpoint``
pages (1,000 by default). That commit is a producer's enqueue or a worker's claim as often as
anything else, and it takes milliseconds where a commit takes tens of microseconds: the job that
waits on it is the slowest of its hundred.

A worker that has nothing to do for now tells its store (:meth:`Store.idle`), and the SQLite store
then runs a ``PASSIVE`` checkpoint on a thread and connection of its own, at most every
:data:`EVERY` seconds. ``PASSIVE`` takes no lock that a writer or reader waits for: commits go on
meanwhile (appending to the log), and the event loop is never blocked. A worker that is idle now
and then thus keeps the log well under the threshold, and no commit runs a checkpoint. The
threshold itself is left as it is, in every connection: a worker that never idles (a drain), or a
file with no worker, is checkpointed in its commits as before. Checkpoints only come sooner, never
later, so what a commit risks on a power loss (``synchronous = NORMAL``: the log is synced at each
checkpoint) is never more than before.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import sqlite3
import threading
import time

log = logging.getLogger("jobloom.store.sqlite")

EVERY = 0.25
"""Seconds between two checkpoints of an idle worker, at least: a few a second keep the log short at
any rate an idle moment comes with, and each one syncs two files."""


class Checkpointer:
    """Runs ``PRAGMA wal_checkpoint(PASSIVE)`` on a thread of its own, when asked and not too often."""

    def __init__(self, path: str, every: float = EVERY) -> None:
        self.path = path
        self.every = every
        self.runs = 0
        """Checkpoints run (tests read it)."""
        self._next = 0.0  # monotonic time before which an idle moment runs none
        self._busy = False
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._local = threading.local()  # its thread's connection (a closed store's thread closes its own)

    def idle(self) -> concurrent.futures.Future[None] | None:
        """Start a checkpoint unless one runs or ran less than :attr:`every` seconds ago; its future."""
        now = time.monotonic()
        if self._busy or now < self._next:
            return None
        self._busy = True
        self._next = now + self.every
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="jobloom-checkpoint")
        try:
            return self._pool.submit(self._run)
        except RuntimeError:  # closed meanwhile
            self._busy = False
            return None

    def _run(self) -> None:
        try:
            conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
            if conn is None:
                conn = self._local.conn = sqlite3.connect(self.path, isolation_level=None)
                conn.execute("PRAGMA busy_timeout = 0")  # another checkpoint under way: skip this one
                conn.execute("PRAGMA cache_size = -64")  # it reads the log, not the tables
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            self.runs += 1
        except sqlite3.Error as exc:  # busy, or the file gone: the commits' own threshold still holds
            log.debug("jobloom idle checkpoint skipped (%s)", exc)
        finally:
            self._busy = False

    def _close_conn(self) -> None:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None:
            with contextlib.suppress(sqlite3.Error):
                conn.close()
            self._local.conn = None

    def close(self) -> None:
        """Close its connection once a checkpoint under way is over, and its thread (without waiting)."""
        if self._pool is not None:
            pool, self._pool = self._pool, None
            pool.submit(self._close_conn)
            pool.shutdown(wait=False)
