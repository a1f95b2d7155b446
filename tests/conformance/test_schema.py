"""The schema the migrations build, on each store, against the snapshot in ``schema/<dialect>.txt``.

Every table, column, index and constraint that the migrations leave is listed in a file under
review: a migration that changes the schema changes that file in the same commit, and one that
changes it by accident fails here. After an intended change, write the snapshots again with
``JOBLOOM_UPDATE_SCHEMA=1 python -m pytest tests/conformance/test_schema.py``.
"""

from __future__ import annotations

import difflib
import os
import re
import sqlite3
from pathlib import Path

import pytest

import jobloom

SNAPSHOTS = Path(__file__).parent / "schema"
UPDATE = os.environ.get("JOBLOOM_UPDATE_SCHEMA") == "1"


def sqlite_schema(path: str) -> list[str]:
    """Each object's ``CREATE`` statement as SQLite keeps it (columns added later included)."""
    with sqlite3.connect(path) as conn:
        rows = conn.execute(
            "SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' AND sql IS NOT NULL "
            "ORDER BY type = 'table' DESC, name"
        ).fetchall()
    return "\n".join(f"{sql.strip()};" for _, _, sql in rows).splitlines()


def postgres_schema(url: str) -> list[str]:
    """Columns, constraints, indexes and functions of the current schema, its name left out."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        schema = conn.execute("SELECT current_schema()").fetchone()[0]  # type: ignore[index]
        columns = conn.execute(
            "SELECT table_name, column_name, data_type, is_nullable, column_default, identity_generation "
            "FROM information_schema.columns WHERE table_schema = %s ORDER BY table_name, ordinal_position", [schema]
        ).fetchall()
        constraints = conn.execute(
            "SELECT c.conrelid::regclass::text, c.conname, pg_get_constraintdef(c.oid) FROM pg_constraint c "
            "WHERE c.connamespace = %s::regnamespace ORDER BY 1, 2", [schema]
        ).fetchall()
        indexes = conn.execute(
            "SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = %s ORDER BY 1, 2", [schema]
        ).fetchall()
        functions = conn.execute(
            "SELECT p.proname, pg_get_function_identity_arguments(p.oid) FROM pg_proc p "
            "WHERE p.pronamespace = %s::regnamespace ORDER BY 1, 2", [schema]
        ).fetchall()
    lines = [f"column {t}.{c} {ty}{'' if nullable == 'YES' else ' NOT NULL'}"
             + (f" DEFAULT {default}" if default is not None else "")
             + (f" GENERATED {identity} AS IDENTITY" if identity is not None else "")
             for t, c, ty, nullable, default, identity in columns]
    lines += [f"constraint {t}.{name} {definition}" for t, name, definition in constraints]
    lines += [f"index {definition}" for _, _, definition in indexes]
    lines += [f"function {name}({args})" for name, args in functions]
    quoted = re.escape(f'"{schema}".'), re.escape(f"{schema}.")
    return [re.sub("|".join(quoted), "", line) for line in lines]


async def test_the_migrations_build_the_schema_of_the_snapshot(store_url: str) -> None:
    dialect = "sqlite" if store_url.startswith("sqlite:") else "postgres"
    app = jobloom.App(store_url)
    try:
        await app.migrate()
    finally:
        await app.close()
    got = sqlite_schema(store_url.removeprefix("sqlite:///")) if dialect == "sqlite" else postgres_schema(store_url)
    snapshot = SNAPSHOTS / f"{dialect}.txt"
    if UPDATE:
        snapshot.write_text("\n".join(got) + "\n")
    want = snapshot.read_text().splitlines()
    if got != want:
        diff = "\n".join(difflib.unified_diff(want, got, str(snapshot), "the migrations", lineterm=""))
        pytest.fail(f"the migrations no longer build the schema of {snapshot.name} "
                    f"(JOBLOOM_UPDATE_SCHEMA=1 writes it again after an intended change):\n{diff}")
