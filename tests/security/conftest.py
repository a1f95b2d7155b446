"""Fixtures of the security tests: a real ``jobloom serve`` process on each store, tokens of every scope,
and an App on the same store for the tests' own setup."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import STORES, private_schema, require_module
from tests.dashboard.conftest import free_port, wait_until
from tests.zygote import Forked, start_cli

httpx = require_module("httpx", 'pip install -e ".[dev]" to run the security tests')

import jobloom  # noqa: E402
from jobloom.http.tokens import create_token, revoke_token  # noqa: E402
from tests.http.apps import make_app  # noqa: E402

ROOT = Path(__file__).parent.parent.parent
SCOPED = {"admin": "admin", "reader": "read", "pusher": "enqueue", "ops": "read,operate", "w1": "worker",
          "w2": "worker"}
"""The tokens every served store has, by name: their scopes."""


@dataclass
class Served:
    """A running ``jobloom serve``: its URL, store, tokens, log, and an App on the same store."""

    url: str
    store_url: str
    app: jobloom.App
    log_path: Path
    proc: Forked | subprocess.Popen[bytes] | None = None  # forked from a zygote (tests/zygote.py), or not
    tokens: dict[str, str] = field(default_factory=dict)

    def run(self, coro: Any) -> Any:
        """Run one of the app's coroutines from the test's sync code."""
        return self.app.run_sync(coro)

    def token(self, name: str, scopes: str) -> str:
        """A new token."""
        async def make() -> str:
            token, _ = await create_token(await self.app.store(), name, scopes)
            return token

        self.tokens[name] = self.run(make())
        return self.tokens[name]

    def revoke(self, name: str) -> None:
        """Revoke a token."""
        async def work() -> None:
            await revoke_token(await self.app.store(), name)

        self.run(work())

    def auth(self, name: str) -> dict[str, str]:
        """The Authorization header of one of the tokens."""
        return {"Authorization": f"Bearer {self.tokens[name]}"}

    def log(self) -> str:
        return self.log_path.read_text() if self.log_path.exists() else ""


@contextlib.contextmanager
def store_for(store: str, folder: Path) -> Iterator[str]:
    """A fresh store: a SQLite file, or a PostgreSQL schema dropped afterwards."""
    if store == "sqlite":
        yield f"sqlite:///{folder}/sec.db"
        return
    with private_schema("jl_sec") as url:
        yield url


@contextlib.contextmanager
def serve(store_url: str, folder: Path, *args: str, tokens: dict[str, str] | None = None,
          wait_up: bool = True, bare: bool = False, env: dict[str, str] | None = None,
          max_files: int | None = None) -> Iterator[Served]:
    """Migrate the store, make ``tokens`` (name: scopes), then run ``jobloom serve --app secapp`` on it
    (``bare``: ``jobloom serve --url``, without the app; ``env`` added to its environment; ``max_files``:
    its descriptor limit, as ``ulimit -n``), a process of its own forked from a Python that has imported
    the web stack (``tests/zygote.py``'s ``start_cli``)."""
    app = make_app(store_url)
    port = free_port()
    served = Served(f"http://127.0.0.1:{port}", store_url, app, folder / f"serve-{port}.log")
    try:
        app.run_sync(app.migrate())
        app.run_sync(app.register_bindings())
        for name, scopes in (tokens or {}).items():
            served.token(name, scopes)
        # the caller's PYTHONPATH is kept behind the root (a worktree's src is what the server runs too)
        path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
        env = {**os.environ, "PYTHONPATH": path, "JOBLOOM_SEC_URL": store_url, **(env or {})}
        target = ["--url", store_url] if bare else ["--app", "tests.security.secapp:app"]
        served.proc = start_cli(["serve", *target, "--port", str(port), "--log-level", "warning", *args], env=env,
                                cwd=folder, log=served.log_path, new_session=True, max_files=max_files)

        def up() -> bool:
            assert served.proc is not None and served.proc.poll() is None, served.log()
            try:
                return httpx.get(f"{served.url}/v1/health", timeout=2).status_code == 200
            except httpx.TransportError:
                return False

        if wait_up:
            wait_until("the server to answer", up, timeout=60)
        yield served
    finally:
        if served.proc is not None and served.proc.poll() is None:
            served.proc.send_signal(signal.SIGTERM)
            try:
                served.proc.wait(15)
            except subprocess.TimeoutExpired:
                served.proc.kill()
                served.proc.wait(5)
        app.close_sync()


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest) -> str:
    """Each store's name in turn."""
    return str(request.param)


@pytest.fixture(scope="module", params=STORES)
def served(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One ``jobloom serve`` per store and module, with the tokens of :data:`SCOPED`."""
    folder = tmp_path_factory.mktemp(f"sec-{request.param}")
    with store_for(request.param, folder) as url, serve(url, folder, tokens=SCOPED) as s:
        yield s
