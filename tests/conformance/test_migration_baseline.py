"""The baseline migration on each store, and the three kinds of store it meets: a new one gets the
baseline; one that jobloom 0.2 migrated (all of 0001 to 0027) is at the baseline and works unchanged;
one that 0.2 migrated part of the way is refused, naming its last migration and the way up, and is
left as it was. The migrations after the baseline (0028 on: those written since, and one more that a
test adds) apply to the first two alike.

A store that 0.2 migrated is built from ``schema/0.2/``: on SQLite the file as 0.2's migrations left
it (``sqlite.sql``, its objects' text as SQLite kept it, and the 27 migrations it records); on
PostgreSQL the baseline's schema, whose catalog is that of 0.2's migrations (``test_schema.py``), with
the 27 migrations a schema that 0.2 migrated records in place of the baseline's. A store part of the
way records the first of those migrations only (what is refused is read from the records alone).
"""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import pytest

import jobloom
from jobloom import MigrationsMissing, MigrationsTooOld
from jobloom.store import migrations, open_store
from jobloom.store.migrations import BASELINE
from jobloom.store.sql import Migration, load_migrations
from tests import forkcli

from .performers import Echo
from .test_schema import OF_0_2, SNAPSHOTS, catalog, dialect_of, sqlite_file_of_0_2

NAMES_OF_0_2 = [name for _, name in re.findall(r"\((\d+), '(\d{4}_\w+)', 0\)", (OF_0_2 / "sqlite.sql").read_text())]
"""The 27 migrations a store that jobloom 0.2 migrated records, in order."""
AFTER = [m.name for m in load_migrations("sqlite") if m.version > BASELINE]
"""The migrations written after the baseline (the same names on both dialects: checked below)."""
AFTER_MIGRATIONS = [m for d in ("sqlite", "postgres") for m in load_migrations(d) if m.version > BASELINE]
"""The migrations after the baseline, of each dialect."""
NEXT = max(m.version for m in load_migrations("sqlite")) + 1
LATER = Migration(NEXT, f"{NEXT:04d}_later", "CREATE TABLE jobloom_later (x integer);")
"""A migration after the last one, as the next one to be written will be."""


def test_the_migrations_of_0_2_are_the_27_the_baseline_stands_for() -> None:
    assert len(NAMES_OF_0_2) == BASELINE == 27
    assert [int(name[:4]) for name in NAMES_OF_0_2] == list(range(1, 28))
    assert NAMES_OF_0_2[-1] == "0027_key_turns"
    assert [m.name for m in load_migrations("postgres") if m.version > BASELINE] == AFTER


async def migrate(url: str) -> list[str]:
    app = jobloom.App(url, auto_migrate=False)
    try:
        return await app.migrate()
    finally:
        await app.close()


async def recorded(url: str) -> list[str]:
    store = open_store(url)
    await store.open()
    try:
        return await store.applied_migrations()
    finally:
        await store.close()


async def location(url: str) -> str:
    store = open_store(url)
    await store.open()
    try:
        return await store.location()
    finally:
        await store.close()


async def store_of_0_2(url: str, last: int = 27) -> None:
    """Make the empty store at ``url`` as jobloom 0.2's migrations 0001 to ``last`` left it (by its
    records; its schema is 0.2's last)."""
    if url.startswith("sqlite:"):
        path = url.removeprefix("sqlite:///")
        sqlite_file_of_0_2(path)
        with sqlite3.connect(path) as conn:
            conn.execute("DELETE FROM jobloom_migrations WHERE version > ?", [last])
        conn.close()
    else:
        import psycopg

        with _baseline_only():
            assert await migrate(url) == [f"{BASELINE:04d}_baseline"]
        with psycopg.connect(url, autocommit=True) as pg:
            pg.execute("DELETE FROM jobloom_migrations")
            for version, name in enumerate(NAMES_OF_0_2[:last], start=1):
                pg.execute("INSERT INTO jobloom_migrations (version, name, applied_at) VALUES (%s, %s, 0)",
                           [version, name])
    assert await recorded(url) == NAMES_OF_0_2[:last]


@contextlib.contextmanager
def _baseline_only() -> Iterator[None]:
    """The migrations end at the baseline meanwhile (0.2's schema has none of the later ones)."""
    from jobloom.store.postgres import store as postgres_store

    with mock.patch.object(migrations, "load_migrations", _up_to_baseline), \
            mock.patch.object(postgres_store, "load_migrations", _up_to_baseline):
        yield


def _up_to_baseline(dialect: str) -> list[Migration]:
    return [m for m in load_migrations(dialect) if m.version <= BASELINE]


def schema_of(lines: list[str]) -> list[str]:
    """A catalog's lines but those of the rows in its tables."""
    return [line for line in lines if not line.startswith(("rows ", "row "))]


def changed_later(before: list[str], after: list[str]) -> set[str]:
    """The lines of the catalog ``before`` that name an object which a migration after the baseline drops
    or alters (an index no longer needed, a table's storage options): every other line stays."""
    named = {name for m in AFTER_MIGRATIONS for name in re.findall(r"(?:DROP INDEX|ALTER TABLE) (\w+)", m.sql)}
    return {line for line in set(schema_of(before)) - set(schema_of(after))
            if any(re.search(rf"\b{name}\b", line) for name in named)}


def add_later_migration(monkeypatch: pytest.MonkeyPatch) -> Migration:
    """Give each dialect :data:`LATER` after the baseline, and return it."""
    from jobloom.store.postgres import store as postgres_store
    from jobloom.store.sqlite import store as sqlite_store

    for module in (migrations, sqlite_store, postgres_store):
        every = module.load_migrations
        monkeypatch.setattr(module, "load_migrations", lambda dialect, every=every: [*every(dialect), LATER])
    return LATER


def cli(*args: str, cwd: Path) -> tuple[int, str, str]:
    """``jobloom ARGS`` as a process of its own: its exit status, output and error output."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBLOOM_")}
    env.update(COLUMNS="200", NO_COLOR="1")
    done = forkcli.run(args, cwd=cwd, env=env, timeout=60)
    return done.returncode, done.stdout, done.stderr


# -- a new store --------------------------------------------------------------------------------------


async def test_a_new_store_gets_the_baseline_once(empty_store_url: str) -> None:
    assert await migrate(empty_store_url) == ["0027_baseline", *AFTER]
    assert await migrate(empty_store_url) == []
    assert await recorded(empty_store_url) == ["0027_baseline", *AFTER]


# -- a store that jobloom 0.2 migrated ------------------------------------------------------------------


async def test_a_store_that_0_2_migrated_is_at_the_baseline_and_takes_the_later_ones(empty_store_url: str) -> None:
    await store_of_0_2(empty_store_url)
    before = catalog(empty_store_url)
    app = jobloom.App(empty_store_url, performers=[Echo], auto_migrate=False)  # refuses a store it lacks any of
    try:
        if AFTER:
            with pytest.raises(MigrationsMissing) as missing:
                await app.enqueue(Echo, {})
            assert missing.value.missing == AFTER  # the baseline is not among them
        assert await app.migrate() == AFTER
        job = await app.enqueue(Echo, {"n": 1})
        await app.drain()
        assert (await app.get_job(job.id)).result == {"echo": {"n": 1}}
        assert await app.migrate() == []
    finally:
        await app.close()
    assert await recorded(empty_store_url) == [*NAMES_OF_0_2, *AFTER]  # nothing of 0.2's written over
    after = catalog(empty_store_url)
    assert set(schema_of(before)) - set(schema_of(after)) == changed_later(before, after)
    # and the store is then as a new one is: the schema of the snapshot
    assert schema_of(after) == schema_of((SNAPSHOTS / f"{dialect_of(empty_store_url)}.txt").read_text().splitlines())


async def test_jobloom_migrate_says_a_store_that_0_2_migrated_is_up_to_date(
    empty_store_url: str, tmp_path: Path
) -> None:
    await store_of_0_2(empty_store_url)
    status, out, err = cli("migrate", "--url", empty_store_url, cwd=tmp_path)
    assert status == 0, err
    assert all(name in out for name in AFTER) and "0027_baseline" not in out, out
    status, out, err = cli("migrate", "--url", empty_store_url, cwd=tmp_path)
    assert status == 0 and out.strip().endswith(": up to date") and "applied" not in out, (out, err)
    assert await recorded(empty_store_url) == [*NAMES_OF_0_2, *AFTER]


# -- a store that jobloom 0.2 migrated part of the way ----------------------------------------------------


@pytest.mark.parametrize("last", [1, 21, 26])
async def test_a_store_that_0_2_migrated_part_of_the_way_is_refused_and_left_as_it_was(
    empty_store_url: str, last: int
) -> None:
    await store_of_0_2(empty_store_url, last)
    before = catalog(empty_store_url)
    for auto_migrate in (False, True):
        app = jobloom.App(empty_store_url, performers=[Echo], auto_migrate=auto_migrate)
        try:
            with pytest.raises(MigrationsTooOld) as refused:
                await app.enqueue(Echo, {})
            with pytest.raises(MigrationsTooOld):
                await app.migrate()
        finally:
            await app.close()
        assert (refused.value.last, refused.value.count) == (NAMES_OF_0_2[last - 1], last)
        message = str(refused.value)
        assert message.startswith(f"the store ({await location(empty_store_url)}) records {last} of jobloom "
                                  f"0.2's migrations 0001 to 0027 (the last: {NAMES_OF_0_2[last - 1]})"), message
        assert "install the last jobloom 0.2 release" in message and "run `jobloom migrate`" in message, message
        assert "docs/how-to/upgrades.md" in message, message
    store = open_store(empty_store_url)  # the store itself refuses too, inside its migration's transaction
    try:
        with pytest.raises(MigrationsTooOld):
            await store.migrate()
    finally:
        await store.close()
    assert await recorded(empty_store_url) == NAMES_OF_0_2[:last]
    assert catalog(empty_store_url) == before


async def test_jobloom_migrate_names_the_version_of_a_store_part_of_the_way_and_the_way_up(
    empty_store_url: str, tmp_path: Path
) -> None:
    await store_of_0_2(empty_store_url, 21)
    status, _, err = cli("migrate", "--url", empty_store_url, cwd=tmp_path)
    assert status == 1 and "Traceback" not in err, err
    assert err.startswith("error: the store (") and "(the last: 0021_worker_claims)" in err, err
    assert "pip install 'jobloom>=0.2,<0.3'" in err and "then install this version again" in err, err
    assert await recorded(empty_store_url) == NAMES_OF_0_2[:21]


# -- a migration after the baseline ---------------------------------------------------------------------


async def test_a_later_migration_applies_to_a_store_that_0_2_migrated(
    empty_store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    await store_of_0_2(empty_store_url)
    later_migration = add_later_migration(monkeypatch)
    app = jobloom.App(empty_store_url, performers=[Echo], auto_migrate=False)
    try:
        with pytest.raises(MigrationsMissing) as missing:
            await app.enqueue(Echo, {})
        assert missing.value.missing == [*AFTER, later_migration.name]
        assert await app.migrate() == [*AFTER, later_migration.name]
        await app.enqueue(Echo, {})
    finally:
        await app.close()
    assert await recorded(empty_store_url) == [*NAMES_OF_0_2, *AFTER, later_migration.name]
    assert any(line.startswith("rows jobloom_later ") for line in catalog(empty_store_url))


async def test_a_later_migration_applies_after_the_baseline_on_a_new_store(
    empty_store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    later_migration = add_later_migration(monkeypatch)
    assert await migrate(empty_store_url) == ["0027_baseline", *AFTER, later_migration.name]
    assert await recorded(empty_store_url) == ["0027_baseline", *AFTER, later_migration.name]


async def test_a_store_part_of_the_way_is_refused_with_a_later_migration_too(
    empty_store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    await store_of_0_2(empty_store_url, 26)
    add_later_migration(monkeypatch)
    with pytest.raises(MigrationsTooOld):
        await migrate(empty_store_url)
    assert await recorded(empty_store_url) == NAMES_OF_0_2[:26]
