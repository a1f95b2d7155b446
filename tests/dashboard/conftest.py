"""Fixtures of the dashboard's browser tests: a real ``jobloom serve`` of ``dashapp`` with a real worker
process, on each store, and Debian's Chromium driven by Playwright; one server per store for the
whole run (it takes seconds to start; the tests leave the bindings, limits and schedules as they found
them), one browser while a test process runs its browser tests, one login with the ``ops`` token per
store, and a fresh browser context per test (with that login's cookie for the ``page`` fixture)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import STORES, private_schema, require_chromium, require_module

sync_api = require_module("playwright.sync_api", 'pip install -e ".[dev]" to run the dashboard\'s browser tests')
httpx = require_module("httpx", 'pip install -e ".[dev]" to run the dashboard\'s browser tests')

import jobloom  # noqa: E402

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
SCREENSHOTS = ROOT / "docs" / "screenshots"
UPDATE_SCREENSHOTS = "JOBLOOM_UPDATE_SCREENSHOTS"
"""Set to 1 to write the screenshots into ``docs/screenshots/`` (else a run leaves the checkout as it was)."""
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
TIMEOUT_MS = 20_000


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until(what: str, check: Any, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


@dataclass
class Site:
    """A served dashboard: its URL, store, tokens, and an App on the same store for the test's own setup."""

    url: str
    store_url: str
    store: str
    folder: Path
    app: jobloom.App
    dashapp: Any
    tokens: dict[str, str] = field(default_factory=dict)
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def run(self, coro: Any) -> Any:
        """Run one of the app's coroutines (from the test's sync code)."""
        return self.app.run_sync(coro)

    def job(self, job_id: int) -> jobloom.Job:
        return self.run(self.app.get_job(job_id))

    def log(self) -> str:
        return "".join(p.read_text() for p in self.folder.glob("*.log"))


@contextlib.contextmanager
def private_store(store: str, folder: Path) -> Iterator[str]:
    """A fresh store for one module: a SQLite file, or a PostgreSQL schema dropped afterwards."""
    if store == "sqlite":
        yield f"sqlite:///{folder}/dash.db"
        return
    with private_schema("jl_dash") as url:
        yield url


async def _prepare(app: jobloom.App) -> dict[str, str]:
    from jobloom.http.tokens import create_token

    await app.migrate()
    await app.register_bindings()
    store = await app.store()
    tokens = {}
    for name, scopes in (("ops", "read,operate"), ("viewer", "read"), ("pusher", "enqueue")):
        tokens[name], _ = await create_token(store, name, scopes)
    return tokens


@pytest.fixture(scope="session", params=STORES)
def site(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    """``jobloom serve --app dashapp:app`` and one worker process (every binding but ``Unserved``)."""
    require_chromium()
    folder = tmp_path_factory.mktemp(f"dash-{request.param}")
    shutil.copy(HERE / "dashapp.py", folder / "dashapp.py")
    with private_store(request.param, folder) as store_url:
        env = {**os.environ, "PYTHONPATH": str(folder), "JOBLOOM_DASH_URL": store_url}
        sys.path.insert(0, str(folder))
        os.environ["JOBLOOM_DASH_URL"] = store_url
        import importlib

        import dashapp  # type: ignore[import-not-found]

        dashapp = importlib.reload(dashapp)
        app = dashapp.app
        site = Site("", store_url, request.param, folder, app, dashapp)
        try:
            site.tokens = app.run_sync(_prepare(app))
            port = free_port()
            serve = [sys.executable, "-m", "jobloom.cli", "serve", "--app", "dashapp:app", "--port", str(port),
                     "--log-level", "warning"]
            worker = [sys.executable, "-m", "jobloom.process", "dashapp:app", "--bindings", dashapp.SERVED,
                      "--concurrency", "16", "--log-level", "warning"]
            for name, command in (("serve", serve), ("worker", worker)):
                log = (folder / f"{name}.log").open("w")
                site.procs.append(subprocess.Popen(command, cwd=folder, env=env, stdout=log, stderr=subprocess.STDOUT,
                                                   start_new_session=True))
            site.url = f"http://127.0.0.1:{port}"

            def up() -> bool:
                assert all(p.poll() is None for p in site.procs), site.log()
                try:
                    return httpx.get(f"{site.url}/v1/health", timeout=1).status_code == 200
                except httpx.TransportError:
                    return False

            wait_until("the server to answer", up, timeout=60)
            yield site
        finally:
            for p in site.procs:
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
            for p in site.procs:
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(5)
            app.close_sync()
            sys.path.remove(str(folder))


class Browsers:
    """Chromium (Debian's, headless), launched for the first browser test a test process runs and closed
    as soon as the next test is not a browser test (``pytest_runtest_teardown`` below): while Playwright's
    sync API is active it runs an event loop in the test thread, and the async tests that xdist gives the
    same process next need that thread free. The browser tests of a store run one after the other (one
    xdist group), so they share one launch."""

    def __init__(self) -> None:
        self.playwright: Any = None
        self.chromium: Any = None

    def get(self) -> Any:
        """The running browser, launched if there is none."""
        if self.chromium is None:
            self.playwright = sync_api.sync_playwright().start()
            self.chromium = self.playwright.chromium.launch(executable_path=require_chromium(), args=CHROMIUM_ARGS)
        return self.chromium

    def close(self) -> None:
        """Close the browser and stop Playwright's loop, if running."""
        chromium, playwright, self.chromium, self.playwright = self.chromium, self.playwright, None, None
        try:
            if chromium is not None:
                chromium.close()
        finally:
            if playwright is not None:
                playwright.stop()


BROWSERS = Browsers()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """After a browser test's own teardown: close the browser unless the next test is one too."""
    yield
    if nextitem is None or Path(str(nextitem.path)).parent != HERE:
        BROWSERS.close()


@pytest.fixture
def browser(site: Site) -> Any:
    """The process's Chromium (:class:`Browsers`)."""
    return BROWSERS.get()


def _new_context(browser: Any, **options: Any) -> Any:
    ctx = browser.new_context(viewport={"width": 1280, "height": 800}, **options)
    ctx.set_default_timeout(TIMEOUT_MS)
    sync_api.expect.set_options(timeout=TIMEOUT_MS)
    return ctx


@pytest.fixture
def context(browser: Any) -> Iterator[Any]:
    """A fresh browser context (no cookies) at 1280 x 800."""
    ctx = _new_context(browser)
    try:
        yield ctx
    finally:
        ctx.close()


@pytest.fixture(scope="session")
def ops_session(site: Site) -> Any:
    """The cookies of one login with the ``ops`` token through the login page, once per store's site (the
    login itself is tested in test_session.py; logging out there ends only that test's own session)."""
    ctx = _new_context(BROWSERS.get())
    try:
        login(ctx.new_page(), site)
        return ctx.storage_state()
    finally:
        ctx.close()


def login(page: Any, site: Site, token: str = "ops", then: str = "/") -> None:
    """Log in through the login page with one of the site's tokens."""
    page.goto(f"{site.url}/login?next={then}")
    page.get_by_label("API token").fill(site.tokens[token])
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{site.url}{then}")


@pytest.fixture
def page(browser: Any, ops_session: Any) -> Iterator[Any]:
    """A page logged in with the ``ops`` token (read and operate), in a context of its own that starts
    with the site's ``ops`` session."""
    ctx = _new_context(browser, storage_state=ops_session)
    try:
        yield ctx.new_page()
    finally:
        ctx.close()


def screenshot(page: Any, site: Site, name: str) -> None:
    """Save the page as ``<name>.png`` (from the SQLite run only, so runs do not race): into
    ``docs/screenshots/`` with ``JOBLOOM_UPDATE_SCREENSHOTS=1``, else into a temporary folder."""
    if site.store == "sqlite":
        folder = SCREENSHOTS if os.environ.get(UPDATE_SCREENSHOTS) == "1" else (
            Path(tempfile.gettempdir()) / "jobloom-screenshots")
        folder.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(folder / f"{name}.png"), full_page=True)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Keep each store's browser tests on one xdist worker (``./dev test`` distributes with ``--dist
    loadgroup``), so that each store's server and browser start once, not once per worker. First among
    the hooks: pytest-xdist's, which turns the marks into groups, is registered after this file when
    this file is loaded among the first conftests (``pytest tests/dashboard``)."""
    for item in items:
        if item.path.parent == HERE:
            callspec = getattr(item, "callspec", None)
            store = callspec.params.get("site", "sqlite") if callspec is not None else "sqlite"
            item.add_marker(pytest.mark.xdist_group(name=f"dashboard-{store}"))
