"""The schema the migrations build, on each store, against catalog snapshots under ``schema/``.

``schema/<dialect>.txt`` is the full catalog (``tests/catalog.py``) that the migrations build today,
in a file under review: a migration that changes the schema changes that file in the same commit, and
one that changes it by accident fails here. After an intended change, write the snapshots again with
``JOBLOOM_UPDATE_SCHEMA=1 python -m pytest tests/conformance/test_schema.py``.

``schema/0.2/`` is never written again: the catalog that jobloom 0.2's migrations 0001 to 0027 built
(``<dialect>.txt``), and the SQLite file they left as SQLite keeps it (``sqlite.sql``), from which the
tests build a store that 0.2 migrated. The migrations up to 0027 (now the baseline alone, which
replaced that chain) must build exactly that catalog.
"""

from __future__ import annotations

import difflib
import os
import sqlite3
from pathlib import Path

import pytest

import jobloom
from tests.catalog import postgres_catalog, sqlite_catalog

SNAPSHOTS = Path(__file__).parent / "schema"
OF_0_2 = SNAPSHOTS / "0.2"
"""The catalogs of jobloom 0.2's migrations (0001 to 0027), and its SQLite file as SQLite kept it."""
LAST_OF_0_2 = 27
"""The last version of jobloom 0.2's migrations."""
UPDATE = os.environ.get("JOBLOOM_UPDATE_SCHEMA") == "1"


def catalog(url: str) -> list[str]:
    """The full catalog of the store at ``url``."""
    return sqlite_catalog(url.removeprefix("sqlite:///")) if url.startswith("sqlite:") else postgres_catalog(url)


def dialect_of(url: str) -> str:
    """``sqlite`` or ``postgres``."""
    return "sqlite" if url.startswith("sqlite:") else "postgres"


def compare(got: list[str], snapshot: Path, what: str) -> None:
    """Fail with a diff when ``got`` differs from the lines of ``snapshot``."""
    want = snapshot.read_text().splitlines()
    if got != want:
        diff = "\n".join(difflib.unified_diff(want, got, str(snapshot), what, lineterm=""))
        pytest.fail(f"{what} do not build the schema of {snapshot}:\n{diff}")


def sqlite_file_of_0_2(path: str) -> None:
    """Make the SQLite file at ``path`` as jobloom 0.2's migrations left it (``schema/0.2/sqlite.sql``)."""
    conn = sqlite3.connect(path)
    try:
        conn.executescript((OF_0_2 / "sqlite.sql").read_text())
    finally:
        conn.close()


async def test_the_migrations_build_the_schema_of_the_snapshot(store_url: str) -> None:
    app = jobloom.App(store_url)
    try:
        await app.migrate()
    finally:
        await app.close()
    got = catalog(store_url)
    snapshot = SNAPSHOTS / f"{dialect_of(store_url)}.txt"
    if UPDATE:
        snapshot.write_text("\n".join(got) + "\n")
    compare(got, snapshot, "the migrations (JOBLOOM_UPDATE_SCHEMA=1 writes the snapshot again after an "
                           "intended change)")


async def test_the_migrations_up_to_0027_build_the_schema_of_jobloom_0_2(
    empty_store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from jobloom.store.postgres import store as postgres_store
    from jobloom.store.sqlite import store as sqlite_store

    for module in (sqlite_store, postgres_store):
        every = module.load_migrations
        monkeypatch.setattr(module, "load_migrations",
                            lambda dialect, every=every: [m for m in every(dialect) if m.version <= LAST_OF_0_2])
    app = jobloom.App(empty_store_url)
    try:
        await app.migrate()
    finally:
        await app.close()
    compare(catalog(empty_store_url), OF_0_2 / f"{dialect_of(empty_store_url)}.txt",
            "the migrations up to 0027")


def test_the_sqlite_file_of_jobloom_0_2_has_its_catalog(tmp_path: Path) -> None:
    path = str(tmp_path / "of-0.2.db")
    sqlite_file_of_0_2(path)
    compare(sqlite_catalog(path), OF_0_2 / "sqlite.txt", "schema/0.2/sqlite.sql")
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT version, name FROM jobloom_migrations ORDER BY version").fetchall()
    assert [v for v, _ in rows] == list(range(1, LAST_OF_0_2 + 1))
    assert rows[0][1] == "0001_engine" and rows[-1][1] == "0027_key_turns"
