"""Fixtures shared by every test: store URLs for each store, and PostgreSQL isolation per test."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import os
import shutil
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

POSTGRES_URL = os.environ.get("JOBLOOM_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
INSTALL_POSTGRES = 'pip install -e ".[dev]" (or "jobloom[postgres]") to run the PostgreSQL tests'
IN_CI = os.environ.get("CI", "").lower() == "true"
_pg_checked: list[str | None] = []


def postgres_unavailable() -> str | None:
    """None if the test PostgreSQL answers; otherwise why not (checked once per session)."""
    if not _pg_checked:
        try:
            import psycopg

            with psycopg.connect(POSTGRES_URL, connect_timeout=3) as conn:
                conn.execute("SELECT 1")
            _pg_checked.append(None)
        except Exception as exc:
            _pg_checked.append(f"{type(exc).__name__}: {exc}")
    return _pg_checked[0]


def require_postgres() -> None:
    """Skip (or, with CI=true, fail) when the test PostgreSQL server is not reachable."""
    why = postgres_unavailable()
    if why is None:
        return
    message = (
        f"PostgreSQL at {POSTGRES_URL} is not reachable ({why}). Start one, or point "
        "JOBLOOM_TEST_POSTGRES_URL at a server, to run the PostgreSQL tests."
    )
    if IN_CI:
        pytest.fail(message)
    pytest.skip(message)


def require_module(name: str, how: str) -> Any:
    """Import ``name``; when it is missing, skip (with ``how`` to install it) or, with CI=true, fail.

    Unlike ``pytest.importorskip``, a test that claims a guarantee cannot quietly disappear in CI.
    Usable at module level."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        message = f"{name} cannot be imported ({exc}): {how}"
        if IN_CI:
            pytest.fail(message, pytrace=False)
        pytest.skip(message, allow_module_level=True)


def require_executable(name: str, how: str) -> str:
    """The path of the program ``name``; when it is not on PATH, skip (with ``how`` to install it) or, with
    CI=true, fail: a test that claims a guarantee cannot quietly disappear in CI."""
    found = shutil.which(name)
    if found is None:
        message = f"{name} is not installed: {how}"
        if IN_CI:
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return found


CHROMIUM = "/usr/bin/chromium"
"""Debian's Chromium, which the browser tests drive (they never download a browser)."""


def require_chromium() -> str:
    """The path of Debian's ``chromium``; when it is missing, skip (saying how to install it) or, with
    CI=true, fail. ``.ci/run`` installs it."""
    found = shutil.which("chromium") or (CHROMIUM if os.access(CHROMIUM, os.X_OK) else None)
    if found is None:
        message = ("chromium is not installed: `apt-get install chromium` (Debian's package; the dashboard's "
                   "browser tests drive it through Playwright and never download a browser)")
        if IN_CI:
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return found


@contextlib.contextmanager
def private_schema(prefix: str = "jl_test") -> Iterator[str]:
    """A PostgreSQL URL whose ``search_path`` is a fresh schema, dropped afterwards."""
    require_postgres()
    import psycopg

    schema = f"{prefix}_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    sep = "&" if "?" in POSTGRES_URL else "?"
    try:
        yield f"{POSTGRES_URL}{sep}options=-csearch_path%3D{schema}"
    finally:
        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture(scope="session")
def _schema_pool() -> Iterator[Any]:
    """Migrated schemas of the test server, reused test after test (``tests/pg_schemas.py``)."""
    from tests.pg_schemas import SchemaPool

    pool = SchemaPool(POSTGRES_URL)
    try:
        yield pool
    finally:
        pool.close()


@pytest.fixture
def postgres_url(_schema_pool: Any) -> Iterator[str]:
    """A PostgreSQL URL with a private schema for this test, migrated, that no other test sees
    meanwhile; afterwards emptied back to what a new schema is, or dropped (``tests/pg_schemas.py``).
    Its connections name the schema as their ``application_name``."""
    require_postgres()
    with _schema_pool.lease() as url:
        yield url


@pytest.fixture
def empty_postgres_url() -> Iterator[str]:
    """A PostgreSQL URL with a private schema for this test that nothing has migrated, dropped afterwards."""
    with private_schema() as url:
        yield url


@pytest.fixture
def sqlite_url(tmp_path: object) -> str:
    """A SQLite URL for a fresh file in this test's temporary folder (nothing migrated it)."""
    return f"sqlite:///{tmp_path}/jobloom.db"


@pytest.fixture(scope="session")
def _sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A SQLite file the migrations built, once per test process: ``migrated_sqlite_url`` copies it."""
    path = str(tmp_path_factory.mktemp("sqlite-template") / "jobloom.db")

    async def build() -> None:
        from jobloom.store import open_store

        store = open_store(f"sqlite:///{path}")
        await store.open()
        try:
            await store.migrate()
            store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # type: ignore[attr-defined]
        finally:
            await store.close()

    done = threading.Thread(target=asyncio.run, args=(build(),))  # a fixture may run inside a test's loop
    done.start()
    done.join()
    if not os.path.exists(path):
        raise RuntimeError(f"the SQLite template {path} was not built")
    return path


@pytest.fixture
def migrated_sqlite_url(tmp_path: object, _sqlite_template: str) -> str:
    """A SQLite URL for a file in this test's temporary folder, already migrated: a copy of a file the
    migrations built once per test process (as ``postgres_url`` is a migrated schema); copying it costs
    a few milliseconds where migrating costs about a hundred."""
    path = f"{tmp_path}/jobloom.db"
    shutil.copyfile(_sqlite_template, path)
    return f"sqlite:///{path}"


STORES = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture(params=STORES)
def store_url(request: pytest.FixtureRequest) -> str:
    """Each store in turn, migrated: the conformance and integration suites run once per store."""
    if request.param == "sqlite":
        return str(request.getfixturevalue("migrated_sqlite_url"))
    return str(request.getfixturevalue("postgres_url"))


@pytest.fixture(params=STORES)
def empty_store_url(request: pytest.FixtureRequest) -> str:
    """Each store in turn, with nothing migrated yet: a new SQLite file, a new PostgreSQL schema."""
    return str(request.getfixturevalue("sqlite_url" if request.param == "sqlite" else "empty_postgres_url"))


@pytest.fixture(scope="session")
def pgbouncer() -> Iterator[Any]:
    """PgBouncer in transaction pooling mode in front of the test server (``tests/pg_bouncer.py``)."""
    require_postgres()
    from tests.pg_bouncer import PgBouncer

    bouncer = PgBouncer()
    try:
        yield bouncer
    finally:
        bouncer.stop()


@pytest.fixture
def pgbouncer_url(pgbouncer: Any) -> Iterator[str]:
    """A private schema of the test server, reached through PgBouncer (transaction pooling)."""
    with private_schema() as url:
        yield pgbouncer.through(url)


@pytest.fixture(params=[*STORES, pytest.param("pgbouncer", marks=pytest.mark.postgres)])
def pooled_store_url(request: pytest.FixtureRequest) -> str:
    """Each store in turn, and PostgreSQL through PgBouncer: a module whose guarantees must hold behind a
    pooler takes it as its ``store_url`` (``store_url = pooled_store_url`` is not enough: define a
    ``store_url`` fixture that returns it)."""
    if request.param == "pgbouncer":
        return str(request.getfixturevalue("pgbouncer_url"))
    return str(request.getfixturevalue("migrated_sqlite_url" if request.param == "sqlite" else "postgres_url"))


# -- the long tests first -------------------------------------------------------------------------------
# ``--dist loadgroup`` hands out the groups that must stay on one process (the browser tests of each
# store) first, largest first, then the other tests one by one in collection order: a test of a minute
# handed out last keeps one process busy while the others have nothing left to do. So the tests marked
# ``slow`` (several seconds each: processes, servers, fuzzing) are collected first, and the others fill
# in around them, as collected. The slow ones take turns by module: the first of each module, then the
# second of each, and so on. A module's slow tests are often alike: several that mostly wait (schedules
# coming due, a server's outage) ran side by side in every process at once and left the CPU half idle
# for 40 s of the parallel run; spread out, each waits beside another module's busy test.


def _slow_first(items: list[pytest.Item]) -> None:
    """Sort ``items``: the slow tests first, taking turns by module, then the others as collected."""
    turn: dict[pytest.Item, int] = {}
    seen: dict[str, int] = {}
    for item in items:
        if item.get_closest_marker("slow") is not None:
            module = str(item.path)
            turn[item] = seen.get(module, 0)
            seen[module] = turn[item] + 1
    items.sort(key=lambda item: (item not in turn, turn.get(item, 0)))  # stable: modules keep their order


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Move the tests marked ``slow`` to the front, taking turns by module (:func:`_slow_first`); name the
    groups of an xdist worker's items in their ids where pytest-xdist could not."""
    _slow_first(items)
    if getattr(config.option, "loadgroup", False):  # an xdist worker, under --dist loadgroup
        _name_groups(items)


def _name_groups(items: list[pytest.Item]) -> None:
    """``--dist loadgroup`` keeps together the items whose ids end in ``@group``. pytest-xdist 3.8 appends
    it by assigning ``item._nodeid``, which pytest 9 no longer reads (the id is kept in ``_id``), so every
    group was ignored and both processes started each store's dashboard server and browser. Appended here
    the way pytest 9 keeps ids; an id that already ends in its group (an xdist that does it) is left."""
    from _pytest.nodeid import coerce_node_id

    for item in items:
        names = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                        for m in item.iter_markers("xdist_group")})
        suffix = "@" + "_".join(names)
        if names and not item.nodeid.endswith(suffix):
            item._id = coerce_node_id(item.nodeid + suffix)  # type: ignore[attr-defined]


# -- with CI=true nothing skips ------------------------------------------------------------------------
# A skipped test proves nothing, so in CI a skip is reported as a failure. A test that may skip even
# there says why with ``@pytest.mark.allowed_skip(reason="...")`` (none does today).


def _ci_failure(skipped: Any) -> str:
    where = skipped.longrepr[2] if isinstance(skipped.longrepr, tuple) else str(skipped.longrepr)
    return f"skipped under CI=true, where nothing may skip: {where}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """With CI=true, a skipped test (setup, call or teardown) is reported as failed."""
    outcome = yield
    report = outcome.get_result()
    if (IN_CI and report.skipped and not hasattr(report, "wasxfail")
            and item.get_closest_marker("allowed_skip") is None):
        report.outcome = "failed"
        report.longrepr = _ci_failure(report)


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Iterator[None]:
    """With CI=true, a module that skips itself while it is collected is reported as failed."""
    outcome = yield
    report = outcome.get_result()
    if IN_CI and report.skipped:
        report.outcome = "failed"
        report.longrepr = _ci_failure(report)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """Shortly before pytest-timeout would end the test, print where its asyncio tasks wait."""
    from tests.hang_dump import watch

    marker = item.get_closest_marker("timeout")
    timeout = marker.args[0] if marker is not None and marker.args else item.config.getini("timeout")
    timer = watch(item.nodeid, float(timeout) if timeout else None)
    try:
        yield
    finally:
        if timer is not None:
            timer.cancel()
