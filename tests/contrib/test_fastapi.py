"""FastAPI: ``jobloom.contrib.fastapi`` and ``examples/fastapi_app`` under a real uvicorn, with a real worker."""

from __future__ import annotations

import httpx
import pytest
from fastapi import FastAPI

import jobloom
from jobloom.contrib.fastapi import lifespan, mount
from tests.contrib.conftest import EXAMPLES, Services, free_port
from tests.helpers import eventually_sync

PROJECT = EXAMPLES / "fastapi_app"


class Ping(jobloom.Performer[dict, str]):  # type: ignore[type-arg]
    async def perform(self, payload: dict) -> str:  # type: ignore[type-arg]
        return "pong"


async def test_the_lifespan_opens_the_store_at_start_up_and_closes_it(store_url: str) -> None:
    app = jobloom.App(store_url, performers=[Ping], auto_migrate=True)
    seen = []

    async def own(api: FastAPI):  # type: ignore[no-untyped-def]
        seen.append(app.store_if_open() is not None)
        yield

    from contextlib import asynccontextmanager

    api = FastAPI(lifespan=lifespan(app, then=asynccontextmanager(own)))
    mount(api, app, "/jobs", auth="off")
    async with api.router.lifespan_context(api):
        assert app.store_if_open() is not None  # opened and migrations checked before the first request
        transport = httpx.ASGITransport(app=api)
        async with httpx.AsyncClient(transport=transport, base_url="http://svc") as client:
            job = await app.enqueue(Ping, {})
            shown = await client.get(f"/jobs/v1/jobs/{job.id}")
            assert shown.status_code == 200 and shown.json()["binding"] == "Ping"
    assert seen == [True]
    assert app.store_if_open() is None


async def test_a_store_without_its_tables_fails_the_start_up(empty_postgres_url: str) -> None:
    app = jobloom.App(empty_postgres_url, performers=[Ping])  # PostgreSQL: no auto-migration
    api = FastAPI(lifespan=lifespan(app))
    with pytest.raises(jobloom.MigrationsMissing):
        async with api.router.lifespan_context(api):
            pass


@pytest.mark.slow
def test_the_fastapi_example_enqueues_and_a_worker_runs_the_job(sqlite_url: str, services: Services) -> None:
    env = {"JOBLOOM_URL": sqlite_url}
    services.run("migrate", ["-m", "jobloom.cli", "migrate", "--app", "welcome_jobs:app"], cwd=PROJECT, env=env)
    token = services.run("token", ["-m", "jobloom.cli", "tokens", "create", "reader", "--scopes", "read", "--app",
                                   "welcome_jobs:app"], cwd=PROJECT, env=env)
    reader = {"Authorization": f"Bearer {next(w for w in token.split() if w.startswith('jlt_'))}"}
    port = free_port()
    services.start("worker", ["-m", "jobloom.cli", "worker", "welcome_jobs:app"], cwd=PROJECT, env=env)
    services.start("uvicorn", ["-m", "uvicorn", "service:api", "--port", str(port)], cwd=PROJECT, env=env)
    base = f"http://127.0.0.1:{port}"
    services.wait_http(f"{base}/jobs/v1/health")

    made = httpx.post(f"{base}/signups", json={"email": "ada@example.com", "name": "Ada"}, timeout=30)
    assert made.status_code == 201, made.text
    again = httpx.post(f"{base}/signups", json={"email": "ada@example.com", "name": "Ada"}, timeout=30)
    assert again.json() == made.json()  # unique_key: one welcome per address
    bad = httpx.post(f"{base}/signups", json={"email": "bob@example.com"}, timeout=30)
    assert bad.status_code == 422  # FastAPI validated the body: nothing enqueued

    def finished() -> dict[str, object] | None:
        job = httpx.get(f"{base}/jobs/v1/jobs/{made.json()['job']}", headers=reader, timeout=30).json()
        return job if job["state"] == "succeeded" else None  # type: ignore[no-any-return]

    job = eventually_sync(finished, timeout=60, interval=0.2, what=f"the Welcome job to succeed\n{services.logs()}")
    assert job["result"] == "welcome mail sent to Ada <ada@example.com>"
    assert httpx.get(f"{base}/jobs/v1/jobs", timeout=30).status_code == 401  # no token: refused
    listed = httpx.get(f"{base}/jobs/v1/jobs", params={"binding": "Welcome"}, headers=reader, timeout=30).json()
    assert len(listed["jobs"]) == 1

