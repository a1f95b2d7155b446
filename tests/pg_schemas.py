"""Migrated PostgreSQL schemas for tests, made once and reused: a schema comes back as it was when new.

Making a private schema and migrating it costs the server about half a second of work, for each of
the several hundred PostgreSQL tests. A :class:`SchemaPool` migrates a schema the first time one is
needed and, when the test is done with it, empties it (``TRUNCATE ... RESTART IDENTITY``) and puts
back what a new schema's catalog says (the planner's page and row counts, no statistics, reset
activity counters), so that the next test's plans, ids and autovacuum see a schema just migrated.

A schema is only reused when it is provably as new: the same tables, columns, indexes, constraints,
functions, triggers, privileges, migrations, sequences and planner figures as right after its
migration (:data:`_FINGERPRINT`), and no connection of the test still open (each connection names
the schema as its ``application_name``). Anything else (a test that added a table, deleted a
migration's row, left a worker running) and the schema is dropped, as every schema used to be.

A schema is emptied on a thread of the pool's own while the next test runs on another schema (most of
the emptying is the server creating files for the truncated tables, and waiting for a test's last
connections to go): the pool keeps :data:`KEEP` schemas so that one is ready while another is emptied,
and takes whichever is emptied first.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Coroutine, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from psycopg import Connection

_FINGERPRINT = """
WITH ns AS (SELECT oid FROM pg_namespace WHERE nspname = %(schema)s),
rels AS (SELECT c.* FROM pg_class c, ns WHERE c.relnamespace = ns.oid)
SELECT md5(coalesce(string_agg(line, E'\\n' ORDER BY line), '')) FROM (
  SELECT concat_ws(' ', 'rel', relname, relkind, relpages, reltuples, relallvisible, relacl::text) AS line
    FROM rels
  UNION ALL SELECT concat_ws(' ', 'col', r.relname, a.attname, a.attnum, format_type(a.atttypid, a.atttypmod),
                             a.attnotnull, pg_get_expr(d.adbin, d.adrelid))
    FROM rels r JOIN pg_attribute a ON a.attrelid = r.oid AND a.attnum > 0 AND NOT a.attisdropped
    LEFT JOIN pg_attrdef d ON d.adrelid = r.oid AND d.adnum = a.attnum
  UNION ALL SELECT concat_ws(' ', 'idx', pg_get_indexdef(i.indexrelid))
    FROM pg_index i JOIN rels r ON r.oid = i.indrelid
  UNION ALL SELECT concat_ws(' ', 'con', c.conname, pg_get_constraintdef(c.oid))
    FROM pg_constraint c, ns WHERE c.connamespace = ns.oid
  UNION ALL SELECT concat_ws(' ', 'fn', p.oid::regprocedure::text, md5(p.prosrc)) FROM pg_proc p, ns
    WHERE p.pronamespace = ns.oid
  UNION ALL SELECT concat_ws(' ', 'trg', pg_get_triggerdef(t.oid)) FROM pg_trigger t JOIN rels r ON r.oid = t.tgrelid
    WHERE NOT t.tgisinternal
  UNION ALL SELECT concat_ws(' ', 'type', t.typname, t.typtype) FROM pg_type t, ns WHERE t.typnamespace = ns.oid
  UNION ALL SELECT concat_ws(' ', 'seq', sequencename, coalesce(last_value::text, 'unused')) FROM pg_sequences
    WHERE schemaname = %(schema)s
  UNION ALL SELECT concat_ws(' ', 'stat', count(*)) FROM pg_statistic s JOIN rels r ON r.oid = s.starelid
  UNION ALL SELECT concat_ws(' ', 'extstat', count(*)) FROM pg_statistic_ext e JOIN rels r ON r.oid = e.stxrelid
  UNION ALL SELECT concat_ws(' ', 'policy', p.polname) FROM pg_policy p JOIN rels r ON r.oid = p.polrelid
  UNION ALL SELECT concat_ws(' ', 'rule', rw.rulename) FROM pg_rewrite rw JOIN rels r ON r.oid = rw.ev_class
) lines
"""
"""One digest of everything in a schema's catalog that a test could change (its rows aside)."""

_PLANNER_FIGURES = """
SELECT c.oid, c.relpages, c.reltuples, c.relallvisible FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %(schema)s ORDER BY c.oid
"""
_SIZES = """
SELECT coalesce(jsonb_object_agg(c.relname, pg_total_relation_size(c.oid)), '{}') FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %(schema)s AND c.relkind IN ('r', 'p')
"""
_WRITTEN = """
SELECT quote_ident(c.relname) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %(schema)s AND c.relkind IN ('r', 'p') AND c.relname <> 'jobloom_migrations'
  AND pg_total_relation_size(c.oid) IS DISTINCT FROM (%(sizes)s::jsonb ->> c.relname)::bigint
"""
"""The tables a test wrote to: a table that never held a row keeps the size it had when new (a row
deleted leaves its page behind, and an index never gives a page back)."""
_LEFT_CONNECTIONS = "SELECT count(*) FROM pg_stat_activity WHERE application_name = %(schema)s"
CONNECTIONS_GONE = 2.0
"""Seconds a test's connections have to disappear from the server after it (a killed client's backend
notices at once; a closed one is gone before ``close()`` returns); past that the schema is dropped."""
KEEP = 2
"""Schemas a pool makes before it waits for one being emptied rather than make another."""
VACUUM_EVERY = 40
"""Schemas given back between two vacuums of the catalogs that making, emptying and dropping schemas
leave dead rows in. A server with autovacuum off (as a test server may be) would otherwise keep every
one: each run of tests/conformance left pg_attribute 14 MB and pg_class 4 MB larger, and every query on
them (each emptying's fingerprint, each new connection's caches, each migration) slower than the last."""
_CATALOGS = ("pg_class, pg_attribute, pg_attrdef, pg_depend, pg_type, pg_index, pg_constraint, pg_statistic, "
             "pg_sequence, pg_namespace")


class SchemaPool:
    """Private schemas of the test server at ``base_url``, migrated, each reused once its test is done."""

    def __init__(self, base_url: str, prefix: str = "jl_test") -> None:
        self.base_url = base_url
        self.prefix = prefix
        self.free: list[str] = []
        # each schema's fingerprint, planner figures and tables' sizes, right after its migration
        self.fresh: dict[str, tuple[str, list[tuple[int, int, float, int]], dict[str, int]]] = {}
        self.made = 0
        self.given_back = 0
        self.vacuums = 0
        self._lock = threading.Lock()
        self._emptying: list[Future[None]] = []
        self._thread = ThreadPoolExecutor(max_workers=KEEP, thread_name_prefix="schema-pool")
        # one connection per emptying thread, kept from test to test: a new one would cost the server a
        # backend's start and cold catalog caches, about as much as the emptying itself
        self._local = threading.local()
        self._conns: list[Connection[Any]] = []

    def url(self, schema: str) -> str:
        """A URL whose connections use ``schema`` and name it as their ``application_name``."""
        sep = "&" if "?" in self.base_url else "?"
        return f"{self.base_url}{sep}options=-csearch_path%3D{schema}&application_name={schema}"

    @contextlib.contextmanager
    def lease(self) -> Iterator[str]:
        """A URL of a migrated schema that no other test uses now; given back (or dropped) afterwards."""
        schema = self._take()
        try:
            yield self.url(schema)
        finally:
            self._emptying = [f for f in self._emptying if not f.done()]
            self._emptying.append(self._thread.submit(self._give_back, schema))

    def settle(self) -> None:
        """Wait until every schema given back is emptied (kept) or dropped; raise what that raised."""
        emptying, self._emptying = self._emptying, []
        for future in emptying:
            future.result()

    def close(self) -> None:
        """Drop every schema kept."""
        self.settle()
        self._thread.shutdown()
        while self.free:
            self._drop(self.free.pop())
        self.vacuum()  # what the last schemas left, for the next run on this server
        for conn in self._conns:
            conn.close()

    def _take(self) -> str:
        """A free schema; else, once KEEP are made, the first one emptied meanwhile; else a new one."""
        while True:
            with self._lock:
                if self.free:
                    return self.free.pop()
            emptying = [f for f in self._emptying if not f.done()]
            if self.made < KEEP or not emptying:
                return self._create()
            wait(emptying, return_when=FIRST_COMPLETED)

    def _give_back(self, schema: str) -> None:
        if self._reset(schema):
            with self._lock:
                self.free.append(schema)
        else:
            self._drop(schema)
        with self._lock:
            self.given_back += 1
            due = self.given_back % VACUUM_EVERY == 0
        if due:
            self.vacuum()

    def vacuum(self) -> None:
        """Vacuum the catalogs that schemas churn (a role that may not is only warned by the server)."""
        import psycopg

        with contextlib.suppress(psycopg.Error):
            # without truncating: that takes an exclusive lock on the catalog, which every test waits for
            self._connection().execute(f"VACUUM (TRUNCATE false) {_CATALOGS}")
            self.vacuums += 1

    # -- making, emptying, dropping ----------------------------------------------------------------

    def _create(self) -> str:
        import psycopg

        schema = f"{self.prefix}_{uuid.uuid4().hex[:12]}"
        self.made += 1
        with psycopg.connect(self.base_url, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
        _run(_migrate(self.url(schema)))
        with psycopg.connect(self.url(schema), autocommit=True) as conn:
            sizes = conn.execute(_SIZES, {"schema": schema}).fetchone()
            self.fresh[schema] = (_fingerprint(conn, schema), _figures(conn, schema), sizes[0] if sizes else {})
        return schema

    def _reset(self, schema: str) -> bool:
        """Empty ``schema`` back to its state right after migration; False if that cannot be proved."""
        import psycopg

        for attempt in (1, 2):
            conn = self._connection()
            try:
                return _connections_gone(conn, schema) and self._empty(conn, schema)
            except _NotAsNew:
                return False
            except psycopg.Error:
                self._local.conn = None
                conn.close()  # not kept: the next emptying starts from a new connection
                if not conn.broken or attempt == 2:  # a kept connection the server closed: once more, anew
                    return False
        return False

    def _empty(self, conn: Connection[Any], schema: str) -> bool:
        """Truncate what the test wrote, restore the planner's figures, and compare the catalog."""
        from psycopg.types.json import Jsonb

        expected, figures, sizes = self.fresh[schema]
        with conn.transaction():
            conn.execute("SET LOCAL lock_timeout = '5s'")
            conn.execute("SET LOCAL synchronous_commit = off")  # the schema is scratch: no need to wait
            conn.execute(f'SET LOCAL search_path TO "{schema}"')
            written = conn.execute(_WRITTEN, {"schema": schema, "sizes": Jsonb(sizes)}).fetchall()
            if written:
                conn.execute(f"TRUNCATE {', '.join(r[0] for r in written)} RESTART IDENTITY CASCADE")
            if _rows(conn, schema):
                raise _NotAsNew
            _restore_figures(conn, figures)
            if _fingerprint(conn, schema) != expected:
                raise _NotAsNew
        return True

    def _connection(self) -> Connection[Any]:
        """This emptying thread's own connection to the base URL (made on first use, or again once closed)."""
        import psycopg

        conn = getattr(self._local, "conn", None)
        if conn is None or conn.closed:
            conn = psycopg.connect(self.base_url, autocommit=True)
            self._local.conn = conn
            with self._lock:
                self._conns.append(conn)
        return conn

    def _drop(self, schema: str) -> None:
        import psycopg

        self.fresh.pop(schema, None)
        with psycopg.connect(self.base_url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


class _NotAsNew(Exception):
    """The schema differs from a new one in more than its rows."""


def _fingerprint(conn: Connection[Any], schema: str) -> str:
    row = conn.execute(_FINGERPRINT, {"schema": schema}).fetchone()
    migrations = conn.execute(f'SELECT version, name FROM "{schema}".jobloom_migrations ORDER BY version').fetchall()
    return f"{row[0] if row else None} {migrations}"


def _rows(conn: Connection[Any], schema: str) -> int:
    """Rows left in the schema's tables but its migrations' (a table with no page answers at once)."""
    tables = conn.execute(
        "SELECT format('%%I.%%I', n.nspname, c.relname) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %(schema)s AND c.relkind IN ('r', 'p') AND c.relname <> 'jobloom_migrations'",
        {"schema": schema}).fetchall()
    if not tables:
        return 0
    row = conn.execute("SELECT " + " + ".join(f"(SELECT count(*) FROM {t[0]})" for t in tables)).fetchone()
    return int(row[0]) if row else 0


def _figures(conn: Connection[Any], schema: str) -> list[tuple[int, int, float, int]]:
    rows = conn.execute(_PLANNER_FIGURES, {"schema": schema}).fetchall()
    return [(int(r[0]), int(r[1]), float(r[2]), int(r[3])) for r in rows]


def _restore_figures(conn: Connection[Any], figures: list[tuple[int, int, float, int]]) -> None:
    """Give the planner a new schema's figures again: TRUNCATE leaves an index with no pages and no
    row count (a new one has its metapage and 0 rows), ANALYZE leaves statistics behind, and the
    activity counters would lead autovacuum to analyze tables a new schema would not."""
    oids = [f[0] for f in figures]
    execute = conn.execute
    execute("UPDATE pg_class c SET relpages = f.relpages, reltuples = f.reltuples, relallvisible = f.relallvisible "
            "FROM unnest(%s::oid[], %s::int[], %s::real[], %s::int[]) AS f(oid, relpages, reltuples, relallvisible) "
            "WHERE c.oid = f.oid AND (c.relpages, c.reltuples, c.relallvisible) "
            "IS DISTINCT FROM (f.relpages, f.reltuples, f.relallvisible)",
            [oids, [f[1] for f in figures], [f[2] for f in figures], [f[3] for f in figures]])
    execute("DELETE FROM pg_statistic WHERE starelid = ANY(%s::oid[])", [oids])
    execute("SELECT pg_stat_reset_single_table_counters(oid) FROM unnest(%s::oid[]) AS oid", [oids])


def _connections_gone(conn: Connection[Any], schema: str) -> bool:
    deadline = time.monotonic() + CONNECTIONS_GONE
    while True:
        row = conn.execute(_LEFT_CONNECTIONS, {"schema": schema}).fetchone()
        if not row or not row[0]:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)


async def _migrate(url: str) -> None:
    from jobloom.store import open_store

    store = open_store(url)
    try:
        await store.open()
        await store.migrate()
    finally:
        await store.close()


def _run(coro: Coroutine[Any, Any, None]) -> None:
    """Run ``coro`` to its end in a thread of its own (a fixture may be set up inside an event loop)."""
    import asyncio
    import threading

    failure: list[BaseException] = []

    def target() -> None:
        try:
            asyncio.run(coro)
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if failure:
        raise failure[0]
