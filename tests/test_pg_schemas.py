"""The schema pool of ``postgres_url``: a reused schema is as new, and one that a test changed is not reused."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import POSTGRES_URL, require_postgres
from tests.pg_schemas import SchemaPool, _figures, _fingerprint


@pytest.fixture
def pool() -> Iterator[SchemaPool]:
    require_postgres()
    pool = SchemaPool(POSTGRES_URL, prefix="jl_pooltest")
    try:
        yield pool
    finally:
        pool.close()


_ROW = "(binding, payload, state, max_attempts, delivery, created_at, run_at) SELECT 'b', '{}', 'queued', 1, " \
       "'at_least_once', 0, 0"


def _write(url: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"INSERT INTO jobloom_jobs {_ROW} FROM generate_series(1, 500)")
        conn.execute("ANALYZE jobloom_jobs")


def test_a_schema_comes_back_as_new(pool: SchemaPool) -> None:
    import psycopg

    with pool.lease() as url:
        schema = url.rsplit("=", 1)[1]  # the application_name
        _write(url)
    pool.settle()
    assert pool.free == [schema], "an emptied schema is kept"
    with pool.lease() as again, psycopg.connect(again, autocommit=True) as conn:
        assert again == url
        assert conn.execute("SELECT count(*) FROM jobloom_jobs").fetchone() == (0,)
        assert conn.execute(f"INSERT INTO jobloom_jobs {_ROW} RETURNING id").fetchone() == (1,), "ids restart"
        conn.execute("DELETE FROM jobloom_jobs")
    pool.settle()
    with pool.lease() as third, psycopg.connect(third, autocommit=True) as conn:
        fresh, figures, _ = pool.fresh[schema]
        assert _fingerprint(conn, schema) == fresh
        assert _figures(conn, schema) == figures, "the planner sees what it saw of the new schema"


@pytest.mark.parametrize("change", [
    "CREATE TABLE extra (x int)",
    "CREATE INDEX extra ON jobloom_jobs (priority)",
    "ALTER TABLE jobloom_jobs ALTER COLUMN priority SET DEFAULT 7",
    "DELETE FROM jobloom_migrations WHERE version = (SELECT max(version) FROM jobloom_migrations)",
])
def test_a_schema_changed_beyond_its_rows_is_dropped(pool: SchemaPool, change: str) -> None:
    import psycopg

    with pool.lease() as url, psycopg.connect(url, autocommit=True) as conn:
        conn.execute(change)
        schema = url.rsplit("=", 1)[1]
    pool.settle()
    assert pool.free == []
    with psycopg.connect(POSTGRES_URL) as conn:
        assert conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname = %s", [schema]).fetchone() == (0,)


def test_a_schema_still_in_use_is_dropped(pool: SchemaPool, monkeypatch: pytest.MonkeyPatch) -> None:
    import psycopg

    monkeypatch.setattr("tests.pg_schemas.CONNECTIONS_GONE", 0.1)
    with pool.lease() as url:
        left = psycopg.connect(url, autocommit=True)  # a worker the test forgot to stop
    try:
        pool.settle()
        assert pool.free == []
    finally:
        left.close()


def test_the_emptying_connection_is_kept_and_made_again_once_the_server_closed_it(pool: SchemaPool) -> None:
    import psycopg

    with pool.lease() as url:
        _write(url)
    pool.settle()
    kept = [c.info.backend_pid for c in pool._conns if not c.closed]
    with pool.lease() as url:
        _write(url)
    pool.settle()
    assert [c.info.backend_pid for c in pool._conns if not c.closed] == kept, "one connection, kept"
    with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) AS pid", [kept])
    with pool.lease() as url:
        schema = url.rsplit("=", 1)[1]
        _write(url)
    pool.settle()
    assert pool.free == [schema], "emptied through a new connection, and kept"
    assert len([c for c in pool._conns if not c.closed]) == 1


def test_the_catalogs_are_vacuumed_every_so_many_schemas_given_back(
    pool: SchemaPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    import psycopg

    from tests.helpers import eventually_sync

    monkeypatch.setattr("tests.pg_schemas.VACUUM_EVERY", 2)

    def vacuums() -> int:
        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            row = conn.execute("SELECT vacuum_count FROM pg_stat_sys_tables WHERE relname = 'pg_attribute'").fetchone()
            return int(row[0]) if row else 0

    before = vacuums()
    with pool.lease() as url:
        _write(url)
    pool.settle()
    assert pool.vacuums == 0, "not yet"
    with pool.lease() as url:
        _write(url)
    pool.settle()
    assert pool.vacuums == 1
    # (other test processes' pools may vacuum meanwhile too)
    eventually_sync(lambda: vacuums() > before, timeout=10, what="the server's count of pg_attribute's vacuums")
