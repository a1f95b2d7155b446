"""Seeding jobs for the search tests straight into a store (any state, tags, error, creation time), and
reading a search query's plan."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any

from jobloom.store.postgres.tx import to_psycopg
from jobloom.store.sql import load_queries


@dataclass(frozen=True)
class Row:
    binding: str
    state: str
    tags: tuple[str, ...] = ()
    error: str | None = None
    created_at: float = 0.0
    unique_key: str | None = None


INSERT = """
INSERT INTO jobloom_jobs (binding, state, payload, run_at, max_attempts, delivery, created_at, finished_at, error,
                          unique_key, tags)
VALUES ({p}, {p}, '{{}}', 0, 1, 'at_least_once', {p}, {p}, {p}, {p}, {p})
"""
FINISHED = ("succeeded", "failed", "stalled", "cancelled", "skipped")


def _values(r: Row) -> tuple[Any, ...]:
    return (r.binding, r.state, r.created_at, r.created_at if r.state in FINISHED else None, r.error, r.unique_key,
            json.dumps(r.tags) if r.tags else None)


def seed(store_url: str, rows: list[Row], *, wipe: bool = False) -> list[int]:
    """Insert ``rows`` (and their tags) in one transaction; their ids. ``wipe``: delete every job first."""
    ids: list[int] = []
    if store_url.startswith("sqlite:"):
        with sqlite3.connect(store_url.removeprefix("sqlite:///")) as conn:
            if wipe:
                conn.execute("DELETE FROM jobloom_job_tags")
                conn.execute("DELETE FROM jobloom_jobs")
            for r in rows:
                job_id = conn.execute(INSERT.format(p="?"), _values(r)).lastrowid
                assert job_id is not None
                ids.append(job_id)
                conn.executemany("INSERT INTO jobloom_job_tags (tag, job_id) VALUES (?, ?)",
                                 [(t, job_id) for t in r.tags])
        return ids
    import psycopg

    with psycopg.connect(store_url) as pg:
        if wipe:
            pg.execute("DELETE FROM jobloom_job_tags")
            pg.execute("DELETE FROM jobloom_jobs")
        for r in rows:
            got = pg.execute(INSERT.format(p="%s") + " RETURNING id", _values(r)).fetchone()
            assert got is not None
            ids.append(got[0])
            if r.tags:
                pg.cursor().executemany("INSERT INTO jobloom_job_tags (tag, job_id) VALUES (%s, %s)",
                                        [(t, got[0]) for t in r.tags])
    return ids


def seed_sql(store_url: str, sql: str) -> None:
    """Run one SQL script (a bulk seed) and analyze the tables."""
    if store_url.startswith("sqlite:"):
        with sqlite3.connect(store_url.removeprefix("sqlite:///")) as conn:
            conn.executescript(sql)
            conn.execute("ANALYZE")
        return
    import psycopg

    with psycopg.connect(store_url, autocommit=True) as pg:
        pg.execute(sql)
        pg.execute("ANALYZE jobloom_jobs")
        pg.execute("ANALYZE jobloom_job_tags")


def plan(store_url: str, name: str, params: dict[str, Any]) -> str:
    """The plan of named query ``name`` with ``params``, one step per line."""
    if store_url.startswith("sqlite:"):
        sql = load_queries("sqlite")[name]
        adapted = {k: json.dumps(v) if isinstance(v, list) else v for k, v in params.items()}
        with sqlite3.connect(store_url.removeprefix("sqlite:///")) as conn:
            return "\n".join(str(r[3]) for r in conn.execute("EXPLAIN QUERY PLAN " + sql, adapted))
    import psycopg

    sql = to_psycopg(load_queries("postgres")[name])
    with psycopg.connect(store_url, autocommit=True) as pg:
        return "\n".join(str(r[0]) for r in pg.execute("EXPLAIN " + sql, params).fetchall())
