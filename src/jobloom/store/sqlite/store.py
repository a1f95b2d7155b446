"""The embedded SQLite store: one file, WAL, every write transaction serialized by the write lock."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import math
import operator
import os
import re
import sqlite3
import stat
import tempfile
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from typing import Any, TypeVar
from urllib.parse import unquote, urlparse

from jobloom.core.errors import StoreError
from jobloom.core.retrying import Delays
from jobloom.store.base import Params, Store, Tx, Wakeups, job_hint, retried, run_without_loop
from jobloom.store.migrations import pending
from jobloom.store.sql import load_migrations, load_queries
from jobloom.store.sqlite.checkpoint import Checkpointer
from jobloom.store.sqlite.wake import SocketWakeups, WakeFolder

T = TypeVar("T")
_QUERIES = load_queries("sqlite")
_BUSY_DEADLINE = 60.0


def sqlite_path(url: str) -> str:
    """The file path of a ``sqlite:///relative.db`` or ``sqlite:////absolute.db`` URL."""
    parsed = urlparse(url)
    path = unquote(parsed.path)
    if parsed.netloc:
        raise StoreError(f"unsupported SQLite URL {url!r}: use sqlite:///relative/path.db or sqlite:////abs/path.db")
    if path.startswith("/"):
        path = path[1:]
    if not path or path == ":memory:":
        raise StoreError(f"SQLite URL {url!r} names no file: workers share the store through a file")
    return os.path.abspath(path)


_MAX_SOCKET_PATH = 100  # Unix socket paths are limited to about 107 bytes


def wake_folder(db_path: str) -> str:
    """Where the wake-up sockets of a database file live: beside it, or, when that path would be too
    long for a Unix socket, in a private folder under the temp directory named after the file's path
    and the user (see :func:`private_folder`)."""
    beside = db_path + ".wake"
    if len(beside) + len("/1234567-12345678.sock") <= _MAX_SOCKET_PATH:
        return beside
    digest = hashlib.sha1(db_path.encode()).hexdigest()[:16]
    return private_folder(os.path.join(tempfile.gettempdir(), f"jobloom-wake-{os.geteuid()}-{digest}"))


def private_folder(path: str) -> str:
    """Create ``path`` as a folder only this user can enter (0700), or check that an existing one is
    that: a folder under a shared temp directory that another user made first could receive or
    intercept the wake-ups, so it is refused with a :class:`StoreError` naming it."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o077:
        raise StoreError(
            f"the wake-up folder {path} is not a private folder of this user (owner uid {info.st_uid}, "
            f"mode {stat.S_IMODE(info.st_mode):o}); remove it, or use a shorter database path"
        )
    return path


_LISTS = (list, tuple, set, frozenset)


def _adapt(params: Params | None) -> Mapping[str, Any] | None:
    if params is None:
        return None
    if any(isinstance(v, _LISTS) for v in params.values()):
        return {k: json.dumps(list(v)) if isinstance(v, _LISTS) else v for k, v in params.items()}
    return params


# A string literal, a quoted name or a comment (kept as they are), or a named parameter.
_TOKEN = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|--[^\n]*|/\*.*?\*/|:(\w+)", re.S)


def positional(sql: str) -> tuple[str, tuple[str, ...]]:
    """``sql`` with its ``:name`` parameters numbered (``?1``, ``?2``...; a name used twice keeps its
    number), and the names in number order.

    sqlite3 binds a tuple by position in C, where a mapping costs a string and a lookup per parameter
    and row: in ``executemany`` of the drain's outcome, attempt and event rows that is most of the
    binding's cost.
    """
    numbers: dict[str, int] = {}

    def number(m: re.Match[str]) -> str:
        if m.group(1) is None:
            return m.group(0)
        return f"?{numbers.setdefault(m.group(1), len(numbers) + 1)}"

    return _TOKEN.sub(number, sql), tuple(numbers)


def _getter(names: tuple[str, ...]) -> Callable[[Params], tuple[Any, ...]]:
    if len(names) > 1:
        return operator.itemgetter(*names)
    if names:
        only = names[0]
        return lambda params: (params[only],)
    return lambda params: ()


def _compile(queries: Mapping[str, str]) -> dict[str, tuple[str, Callable[[Params], tuple[Any, ...]]]]:
    out = {}
    for name, sql in queries.items():
        text, names = positional(sql)
        out[name] = (text, _getter(names))
    return out


_POSITIONAL = _compile(_QUERIES)


def _json_lists(values: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(json.dumps(list(v)) if isinstance(v, _LISTS) else v for v in values)


def _named(name: str) -> tuple[str, Callable[[Params], tuple[Any, ...]]]:
    try:
        return _POSITIONAL[name]
    except KeyError:
        raise StoreError(f"the SQLite store has no query named {name!r}") from None


class SQLiteTx(Tx):
    """A transaction on the store's connection; statements run synchronously (they are short).

    Parameters are bound by position (see :func:`positional`); list values become JSON arrays (read
    with ``json_each``). A parameter missing from a row falls back to sqlite3's named binding, which
    names it in its error.
    """

    def __init__(self, conn: sqlite3.Connection, *, one_snapshot: bool = True) -> None:
        self.conn = conn
        # the store's own transactions begin before their first statement, and a SQLite transaction reads
        # one snapshot; a caller's connection that has not begun one reads each statement anew until it does
        self.one_snapshot = one_snapshot

    def _one(self, name: str, params: Params | None) -> sqlite3.Cursor:
        sql, get = _named(name)
        try:
            values = get(params or {})
        except KeyError:
            return self.conn.execute(_QUERIES[name], _adapt(params) or {})
        if any(isinstance(v, _LISTS) for v in values):
            values = _json_lists(values)
        return self.conn.execute(sql, values)

    def _many(self, name: str, rows: Sequence[Params]) -> sqlite3.Cursor:
        sql, get = _named(name)
        try:
            values = list(map(get, rows))
        except KeyError:
            return self.conn.executemany(_QUERIES[name], [_adapt(r) or {} for r in rows])
        if any(isinstance(v, _LISTS) for v in values[0]):  # adapted if the first row has lists
            values = [_json_lists(v) for v in values]
        return self.conn.executemany(sql, values)

    async def fetch_rows(self, name: str, params: Params | None = None) -> list[tuple[Any, ...]]:
        """Run a named query and return all rows."""
        return self._one(name, params).fetchall()

    async def execute(self, name: str, params: Params | None = None) -> int:
        """Run a named statement; return the number of rows it changed."""
        return self._one(name, params).rowcount

    async def executemany(self, name: str, rows: Sequence[Params]) -> None:
        """Run a named statement once per parameter set (list values are adapted if the first row has any)."""
        if rows:
            self._many(name, rows)

    async def insert_jobs(self, rows: Sequence[Params], at: float) -> list[int]:
        """Insert new jobs and their events; the store wakes the workers once this commits, naming the
        job when it is one queued now (:func:`~jobloom.store.base.job_hint`)."""
        ids = await super().insert_jobs(rows, at)
        self.hint = job_hint(ids, rows) if not self.notified else None  # a second insert: jobs, not a job
        self.notified = True
        return ids

    async def insert_many(self, name: str, rows: Sequence[Params]) -> list[int]:
        """Insert rows; inside one write transaction SQLite assigns consecutive rowids."""
        if not rows:
            return []
        if len(rows) == 1:
            rowid = self._one(name, rows[0]).lastrowid
            if rowid is None:
                raise StoreError(f"{name} inserted no row")
            return [rowid]
        cur = self._many(name, rows)
        last = self.conn.execute("SELECT last_insert_rowid()").fetchone()[0]
        count = cur.rowcount if cur.rowcount and cur.rowcount > 0 else len(rows)
        first = last - count + 1
        return list(range(first, last + 1))


def ensure_math_functions(conn: sqlite3.Connection) -> None:
    """Give ``conn`` the math functions the named queries use (``ln``, ``floor``, ``ceil``) where the
    SQLite library was built without them (SQLite 3.35 and later include them by default)."""
    try:
        conn.execute("SELECT ln(2.0), floor(1.5), ceil(1.5)").fetchone()
    except sqlite3.OperationalError:
        add_math_functions(conn)


def add_math_functions(conn: sqlite3.Connection) -> None:
    """Define ``ln``, ``floor`` and ``ceil`` on ``conn`` in Python (NULL in, NULL out)."""
    for name, fn in (("ln", math.log), ("floor", math.floor), ("ceil", math.ceil)):
        conn.create_function(name, 1, _null_safe(fn), deterministic=True)


def _null_safe(fn: Callable[[float], float]) -> Callable[[float | None], float | None]:
    def call(x: float | None) -> float | None:
        return None if x is None else fn(x)

    return call


class SQLiteStore(Store):
    """SQLite driver. Busy locks are waited on asynchronously, so the event loop never blocks on them."""

    dialect = "sqlite"

    def __init__(self, url: str, **options: Any) -> None:
        if options:
            raise StoreError(f"the SQLite store takes no options; got {sorted(options)}")
        self.url = url
        self.path = sqlite_path(url)
        self._conn: sqlite3.Connection | None = None
        self._lock: asyncio.Lock | None = None
        self.wake_folder = wake_folder(self.path)
        self._waker = WakeFolder(self.wake_folder)
        self.checkpointer = Checkpointer(self.path)
        """Checkpoints the write-ahead log when a worker is idle (:meth:`idle`)."""

    async def open(self) -> None:
        """Open the file in WAL mode (creating it and its folder if needed)."""
        if self._conn is not None:
            return
        folder = os.path.dirname(self.path)
        if folder and not os.path.isdir(folder):
            os.makedirs(folder, exist_ok=True)
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA busy_timeout = 0")
        for _ in range(200):
            try:
                conn.execute("PRAGMA journal_mode = WAL")
                break
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc):
                    raise
                await asyncio.sleep(0.01)
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = ON")
        ensure_math_functions(conn)
        self._conn = conn
        self._lock = asyncio.Lock()

    async def close(self) -> None:
        """Close the connection."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        self._waker.close()
        self.checkpointer.close()

    @property
    def conn(self) -> sqlite3.Connection:
        """The open connection (``open`` first)."""
        if self._conn is None:
            raise StoreError("the store is not open")
        return self._conn

    async def _begin(self, exclusive: bool) -> None:
        if not exclusive:
            self.conn.execute("BEGIN")
            return
        try:
            self.conn.execute("BEGIN IMMEDIATE")  # the common case: the write lock is free
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
        delays = Delays(0.0002, 0.005)
        deadline = time.monotonic() + _BUSY_DEADLINE
        while True:
            retried("sqlite", "busy")
            await asyncio.sleep(delays.next())
            try:
                self.conn.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc):
                    raise
                if time.monotonic() > deadline:
                    raise StoreError(f"the SQLite write lock stayed busy for {_BUSY_DEADLINE:.0f} s") from exc

    async def transact(self, fn: Callable[[Tx], Awaitable[T]], *, exclusive: bool = True) -> T:
        """Run ``fn`` in one transaction (``BEGIN IMMEDIATE`` when it writes)."""
        fn = self.coded(fn)
        if self._conn is None:
            await self.open()
        assert self._lock is not None
        async with self._lock:
            while True:
                await self._begin(exclusive)
                try:
                    tx = SQLiteTx(self.conn)
                    result = await fn(tx)
                    self.conn.execute("COMMIT")
                    if tx.notified:
                        self._waker.send(tx.hint)
                    return result
                except sqlite3.OperationalError as exc:
                    self.conn.execute("ROLLBACK") if self.conn.in_transaction else None
                    if "locked" in str(exc) or "busy" in str(exc):
                        retried("sqlite", "busy")
                        await asyncio.sleep(0.001)
                        continue
                    raise
                except BaseException:
                    if self.conn.in_transaction:
                        self.conn.execute("ROLLBACK")
                    raise

    def transact_on_sync(self, conn: Any, fn: Callable[[Tx], Coroutine[Any, Any, T]]) -> T:
        """Run ``fn`` on the caller's own sqlite3 connection, inside the caller's transaction (no commit).

        The caller's INSERT takes the write lock until it commits, so a worker woken now sees the job
        exactly when (and only if) the caller commits.
        """
        fn = self.coded(fn)
        if not isinstance(conn, sqlite3.Connection):
            raise StoreError(f"connection= on a SQLite store takes a sqlite3.Connection, not {type(conn).__name__}")
        if conn.isolation_level is None and not conn.in_transaction:
            raise StoreError("transactional enqueue needs a connection inside a transaction "
                             "(this sqlite3 connection is in autocommit mode: BEGIN first)")
        result = run_without_loop(fn(SQLiteTx(conn, one_snapshot=conn.in_transaction)))
        self._waker.send()
        return result

    async def transact_on(self, conn: Any, fn: Callable[[Tx], Awaitable[T]]) -> T:
        """The same as :meth:`transact_on_sync`, for async callers (the caller's connection is sync)."""
        fn = self.coded(fn)

        async def run(tx: Tx) -> T:
            return await fn(tx)

        return self.transact_on_sync(conn, run)

    def is_transient(self, exc: BaseException) -> bool:
        """A busy lock, a full or failing disk, a file that cannot be opened for now."""
        if isinstance(exc, StoreError):
            return True
        if isinstance(exc, sqlite3.OperationalError):
            text = str(exc).lower()
            return any(s in text for s in ("locked", "busy", "disk i/o", "unable to open", "database or disk is full"))
        return isinstance(exc, OSError)

    def idle(self) -> None:
        """A worker has nothing to do: checkpoint the write-ahead log now, on a thread of its own, so that
        no commit on a waiting job's way runs the checkpoint (:mod:`~jobloom.store.sqlite.checkpoint`)."""
        if self._conn is not None:
            self.checkpointer.idle()

    async def notify(self) -> None:
        """Wake workers of this file in other processes."""
        self._waker.send()

    async def wakeups(self) -> Wakeups:
        """Listen for wake-ups on this file."""
        return SocketWakeups(self.wake_folder)

    async def location(self) -> str:
        """``file PATH``: the SQLite file that holds the store."""
        return f"file {self.path}"

    async def applied_migrations(self) -> list[str]:
        """Migrations recorded in the file."""
        if self._conn is None:
            await self.open()
        exists = self.conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'jobloom_migrations'"
        ).fetchone()
        if not exists:
            return []
        return [r[0] for r in self.conn.execute("SELECT name FROM jobloom_migrations ORDER BY version")]

    async def migrate(self) -> list[str]:
        """Apply missing migrations, each in its own write transaction (none to a file that jobloom 0.2
        migrated part of the way: :func:`~jobloom.store.migrations.pending` refuses it)."""
        if self._conn is None:
            await self.open()
        applied_now: list[str] = []
        every = load_migrations(self.dialect)
        for mig in every:

            async def apply(tx: Tx, mig: Any = mig) -> bool:
                conn = self.conn
                conn.execute(
                    "CREATE TABLE IF NOT EXISTS jobloom_migrations "
                    "(version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at REAL NOT NULL)"
                )
                recorded = [r[0] for r in conn.execute("SELECT name FROM jobloom_migrations")]
                if mig not in pending(every, recorded):
                    return False
                for statement in _split(mig.sql):
                    conn.execute(statement)
                conn.execute(
                    "INSERT INTO jobloom_migrations (version, name, applied_at) VALUES (?, ?, ?)",
                    (mig.version, mig.name, time.time()),
                )
                return True

            if await self.transact(apply):
                applied_now.append(mig.name)
        return applied_now


def _split(script: str) -> list[str]:
    statements, buf = [], ""
    for line in script.splitlines(keepends=True):
        buf += line
        if sqlite3.complete_statement(buf):
            if buf.strip():
                statements.append(buf.strip())
            buf = ""
    if buf.strip() and not buf.strip().startswith("--"):
        statements.append(buf.strip())
    return statements
