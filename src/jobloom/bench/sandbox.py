"""Private stores for measurements: each one starts empty and is removed afterwards.

A benchmark never touches the user's data. On SQLite each measurement gets a fresh file in a
temporary folder beside the path the URL names (so the numbers are of that disk); on PostgreSQL
each gets a fresh schema ``jobloom_bench_<random>`` in the URL's database, dropped at the end.

The bench reads its figures (first start, last finish, latencies) straight from the jobs table with
plain SQL on a connection of its own, so measuring adds nothing to jobloom's own transactions.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
import tempfile
import time
import uuid
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from jobloom.app.facade import App
from jobloom.bench.performers import OPTIONS_ENV, URL_ENV, bench_app
from jobloom.core.errors import StoreError
from jobloom.core.states import ALL_STATES, FINISHED_STATES
from jobloom.store.sqlite.store import sqlite_path

TERMINAL = "(" + ", ".join(f"'{s}'" for s in ALL_STATES if s in FINISHED_STATES) + ")"


def dialect_of(url: str) -> str:
    """``sqlite`` or ``postgres`` for a store URL."""
    if url.startswith("sqlite:"):
        return "sqlite"
    if url.startswith(("postgresql:", "postgres:")):
        return "postgres"
    raise StoreError(f"unsupported store URL {url!r}: use sqlite:///path.db or postgresql://user@host/db")


def redact(url: str) -> str:
    """The URL without its password."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port:
        host += f":{parts.port}"
    user = f"{parts.username}:***@" if parts.username else ""
    return urlunsplit(parts._replace(netloc=user + host))


class Sandbox:
    """One empty store for one measurement, with a plain connection to read the results."""

    def __init__(self, dialect: str, url: str, options: dict[str, Any]) -> None:
        self.dialect = dialect
        self.url = url
        self.options = options
        self._sqlite: sqlite3.Connection | None = None
        self._pg: Any = None

    # -- the app and worker processes ---------------------------------------------------------------

    def app(self, *, flows: bool = False, latency: bool = False) -> App:
        """A bench app on this store (performers ``Noop`` and ``Limited``; the diamond flow if asked;
        ``Stamped`` alone with ``latency``)."""
        return bench_app(self.url, self.options, flows=flows, latency=latency, auto_migrate=True)

    async def prepare(self) -> None:
        """Create the tables (migrations), as ``jobloom migrate`` would."""
        app = self.app()
        try:
            await app.migrate()
        finally:
            await app.close()

    def env(self) -> dict[str, str]:
        """The environment a bench worker or producer process needs to find this store."""
        return {**os.environ, URL_ENV: self.url, OPTIONS_ENV: json.dumps(self.options)}

    # -- reading and writing with plain SQL ---------------------------------------------------------

    def _connect(self) -> Any:
        if self.dialect == "sqlite":
            if self._sqlite is None:
                self._sqlite = sqlite3.connect(sqlite_path(self.url), isolation_level=None, timeout=60,
                                               check_same_thread=False)
            return self._sqlite
        if self._pg is None:
            import psycopg

            self._pg = psycopg.connect(self.url, autocommit=True)
            schema = self.options.get("schema")
            if schema:
                from psycopg import sql

                self._pg.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        return self._pg

    def rows(self, query: str) -> list[tuple[Any, ...]]:
        """Run a query (no parameters: the bench inlines its own numbers) and return all rows."""
        return list(self._connect().execute(query).fetchall())

    def execute(self, statement: str) -> None:
        """Run a statement that returns no rows (outside any transaction)."""
        self._connect().execute(statement)

    def scalar(self, query: str) -> Any:
        """The first column of the first row of a query."""
        rows = self.rows(query)
        return rows[0][0] if rows else None

    def last_id(self) -> int:
        """The highest job id so far (jobs of a measurement are those above the id taken before it)."""
        return int(self.scalar("SELECT coalesce(max(id), 0) FROM jobloom_jobs"))

    def finished(self, after_id: int) -> tuple[int, int]:
        """(finished, of which not succeeded) among jobs above ``after_id``."""
        row = self.rows(
            f"SELECT count(*), coalesce(sum(CASE WHEN state = 'succeeded' THEN 0 ELSE 1 END), 0) "
            f"FROM jobloom_jobs WHERE id > {int(after_id)} AND state IN {TERMINAL}"
        )[0]
        return int(row[0]), int(row[1])

    def span(self, after_id: int) -> tuple[int, float | None, float | None]:
        """(succeeded, first start, last finish) among jobs above ``after_id``, as the store recorded them."""
        count, first, last = self.rows(
            f"SELECT count(*), min(started_at), max(finished_at) FROM jobloom_jobs "
            f"WHERE id > {int(after_id)} AND state = 'succeeded'"
        )[0]
        return int(count), first, last

    def runs_finished(self) -> tuple[int, int]:
        """(finished, of which not succeeded) among flow runs."""
        row = self.rows(
            "SELECT count(*), coalesce(sum(CASE WHEN state = 'succeeded' THEN 0 ELSE 1 END), 0) "
            "FROM jobloom_runs WHERE state <> 'running'"
        )[0]
        return int(row[0]), int(row[1])

    def run_span(self) -> tuple[int, float | None, float | None]:
        """(succeeded runs, first start of any node, last finish of a run)."""
        count, last = self.rows("SELECT count(*), max(finished_at) FROM jobloom_runs WHERE state = 'succeeded'")[0]
        first = self.scalar("SELECT min(started_at) FROM jobloom_jobs WHERE run_id IS NOT NULL")
        return int(count), first, last

    def start_delays(self, after_id: int) -> list[float]:
        """Seconds from enqueue (``created_at``) to the moment ``perform`` began (the result of a
        ``Stamped`` job) of the succeeded jobs above ``after_id``."""
        return [float(json.loads(r[0])) - float(r[1]) for r in self.rows(
            f"SELECT result, created_at FROM jobloom_jobs "
            f"WHERE id > {int(after_id)} AND state = 'succeeded' ORDER BY id"
        )]

    def insert_history(self, rows: int, *, age: float = 0.0, analyze: bool = True) -> None:
        """Add ``rows`` succeeded ``Noop`` jobs (finished over the 12 hours before ``age`` seconds ago)
        and their attempts: the rows a job's attempt leaves (the outbox's events are folded and deleted).

        Written with one ``INSERT ... SELECT`` per table, generated inside the database (faster than
        sending rows), not through enqueue: it is set-up, not measured.
        """
        if rows <= 0:
            return
        before = self.last_id()
        t0 = time.time() - 43_200.0 - age
        step = 43_200.0 / rows
        cols = ("binding, state, payload, priority, run_at, attempt, max_attempts, delivery, timeout, "
                "created_at, started_at, finished_at")
        values = (f"'Noop', 'succeeded', '{{\"i\":' || x || '}}', 0, {t0} + x * {step}, 1, 3, "
                  f"'at_least_once', 60.0, {t0} + x * {step}, {t0} + x * {step} + 0.001, "
                  f"{t0} + x * {step} + 0.002")
        if self.dialect == "sqlite":
            jobs = (f"WITH RECURSIVE seq(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM seq WHERE x < {int(rows)}) "
                    f"INSERT INTO jobloom_jobs ({cols}) SELECT {values} FROM seq")
        else:
            jobs = f"INSERT INTO jobloom_jobs ({cols}) SELECT {values} FROM generate_series(1, {int(rows)}) AS x"
        attempts = ("INSERT INTO jobloom_attempts (job_id, attempt, worker, started_at, finished_at, outcome) "
                    "SELECT id, 1, 'bench-history', started_at, finished_at, 'succeeded' FROM jobloom_jobs "
                    f"WHERE id > {int(before)} AND state = 'succeeded'")
        conn = self._connect()
        if self.dialect == "sqlite":
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(jobs)
            conn.execute(attempts)
            conn.execute("COMMIT")
            # One transaction wrote the whole history to the WAL; a store that grew job by job has had it
            # checkpointed into the database file as it went (every 1,000 pages), so do that now, not
            # in the first commits measured.
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        else:
            with conn.transaction():
                conn.execute(jobs)
                conn.execute(attempts)
            if analyze:  # what autovacuum does soon after a bulk load anyway; now, so that runs are comparable
                conn.execute("VACUUM ANALYZE jobloom_jobs")
                conn.execute("VACUUM ANALYZE jobloom_attempts")

    def close(self) -> None:
        """Close the plain connection and remove the store."""
        if self._sqlite is not None:
            self._sqlite.close()
            self._sqlite = None
        if self._pg is not None:
            with contextlib.suppress(Exception):
                self._pg.close()
            self._pg = None
        if self.dialect == "sqlite":
            path = sqlite_path(self.url)
            for extra in ("", "-wal", "-shm", "-journal"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path + extra)
            shutil.rmtree(path + ".wake", ignore_errors=True)
        else:
            _drop_schema(self.url, str(self.options["schema"]))


def _drop_schema(url: str, schema: str) -> None:
    import psycopg
    from psycopg import sql

    with contextlib.suppress(psycopg.Error), psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


class Target:
    """The store a user pointed the bench at; hands out private sandboxes on it."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.dialect = dialect_of(url)
        self._folder: str | None = None
        self._count = 0
        self._open: list[Sandbox] = []
        if self.dialect == "sqlite":
            where = os.path.dirname(sqlite_path(url)) or "."
            os.makedirs(where, exist_ok=True)
            self._folder = tempfile.mkdtemp(prefix=".jlbench-", dir=where)

    def sandbox(self) -> Sandbox:
        """A new, empty store (created, not yet migrated: call :meth:`Sandbox.prepare`)."""
        self._count += 1
        if self.dialect == "sqlite":
            assert self._folder is not None
            # Short names: the store's wake-up sockets live under this path, and AF_UNIX paths are short.
            path = os.path.join(self._folder, f"{self._count}.db")
            box = Sandbox("sqlite", "sqlite:///" + path, {})
        else:
            schema = f"jobloom_bench_{uuid.uuid4().hex[:10]}"
            box = Sandbox("postgres", self.url, {"schema": schema})
        self._open.append(box)
        return box

    def server_version(self) -> str | None:
        """PostgreSQL's version number (``None`` on SQLite)."""
        if self.dialect != "postgres":
            return None
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            row = conn.execute("SHOW server_version").fetchone()
        return None if row is None else str(row[0])

    def close(self) -> None:
        """Remove every sandbox (and the temporary folder)."""
        try:
            for box in self._open:
                box.close()
        finally:
            self._open.clear()
            if self._folder is not None:
                shutil.rmtree(self._folder, ignore_errors=True)
                self._folder = None
