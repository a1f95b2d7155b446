"""Django: ``jobloom.contrib.django`` and the example project ``examples/django_app``, end to end.

The example runs as it would in production, on SQLite and on PostgreSQL: Django's ``migrate`` and
``manage.py jobloom migrate``, a real worker (``manage.py jobloom worker``), ``runserver`` and the HTTP API
(``manage.py jobloom serve``). A view
enqueues inside ``transaction.atomic()`` on Django's own connection: a committed order has its job, which
the worker runs through the ORM; a rolled-back order leaves no job.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import jobloom
from jobloom.http.tokens import create_token
from tests.conftest import STORES, require_module
from tests.contrib.conftest import EXAMPLES, Services, free_port
from tests.helpers import eventually_sync

require_module("django", "pip install -e '.[dev]' (Django is a dev dependency)")

from django.conf import settings  # noqa: E402

from jobloom.contrib import django as jobloom_django  # noqa: E402

PROJECT = EXAMPLES / "django_app"


@pytest.fixture
def django_settings(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Django's settings, configured once per process (no app is loaded), each test's changes undone."""
    if not settings.configured:
        settings.configure(DATABASES={}, JOBLOOM={})
    monkeypatch.setattr(jobloom_django, "_loaded", {})
    yield settings


def test_store_url_is_djangos_database(django_settings: Any, monkeypatch: pytest.MonkeyPatch,
                                       tmp_path: Path) -> None:
    monkeypatch.setattr(django_settings, "JOBLOOM", {"app": "x:app"})
    monkeypatch.setattr(django_settings, "DATABASES", {
        "default": {"ENGINE": "django.db.backends.sqlite3", "NAME": tmp_path / "db.sqlite3"},
        "pg": {"ENGINE": "django.db.backends.postgresql", "NAME": "shop", "USER": "app", "PASSWORD": "p@ss:w/rd",
               "HOST": "db.internal", "PORT": 5433, "OPTIONS": {"options": "-csearch_path=jobs"}},
        "pg_local": {"ENGINE": "django.db.backends.postgresql", "NAME": "shop"},
        "memory": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"},
        "mysql": {"ENGINE": "django.db.backends.mysql", "NAME": "shop"},
    })
    assert jobloom_django.store_url() == f"sqlite:///{tmp_path / 'db.sqlite3'}"
    pg = jobloom_django.store_url("pg")
    assert pg == "postgresql://app:p%40ss%3Aw%2Frd@db.internal:5433/shop?options=-csearch_path%3Djobs"
    assert jobloom_django.store_url("pg_local") == "postgresql:///shop"
    assert jobloom_django.same_database(pg, "postgresql://other@db.internal:5433/shop")
    assert not jobloom_django.same_database(pg, "postgresql://app@db.internal:5433/other")
    assert jobloom_django.same_database(f"sqlite:///{tmp_path}/db.sqlite3", jobloom_django.store_url())
    with pytest.raises(jobloom_django.ImproperlyConfigured, match="in-memory SQLite"):
        jobloom_django.store_url("memory")
    with pytest.raises(jobloom_django.ImproperlyConfigured, match="mysql.*JOBLOOM\\['url'\\]"):
        jobloom_django.store_url("mysql")
    with pytest.raises(jobloom_django.ImproperlyConfigured, match="no 'nope' database"):
        jobloom_django.store_url("nope")

    monkeypatch.setattr(django_settings, "JOBLOOM", {"app": "x:app", "url": "sqlite:///elsewhere.db"})
    assert jobloom_django.store_url() == "sqlite:///elsewhere.db"
    assert jobloom_django.store_url("pg") == pg  # an explicit alias is that database, whatever the url


def test_the_setting_is_checked_and_named(django_settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    for value, expected in ((None, "settings.JOBLOOM must be a dict"),
                            ({"app": "x:app", "ulr": "sqlite:///x.db"}, "unknown key 'ulr'"),
                            ({"app": "orders.jobs"}, "JOBLOOM\\['app'\\] must be 'module:attr'"),
                            ({"app": "no_such_module_here:app"}, "cannot import 'no_such_module_here'")):
        monkeypatch.setattr(django_settings, "JOBLOOM", value)
        with pytest.raises(jobloom.JobloomError, match=expected):
            jobloom_django.get_app()


SIDE_JOBS = """
import os

import jobloom


class Ping(jobloom.Performer[dict, str]):
    async def perform(self, payload: dict) -> str:
        return "pong"


app = jobloom.App(os.environ["SIDE_STORE"], performers=[Ping])
"""

SCRIPT = """
import json, os

import django
from django.conf import settings

settings.configure(DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": os.environ["DJANGO_DB"]}},
                   JOBLOOM={"app": "side_jobs:app"}, INSTALLED_APPS=["jobloom.contrib.django"])
django.setup()
from django.db import transaction

from jobloom.contrib.django import ImproperlyConfigured, enqueue, enqueue_on_commit
from side_jobs import Ping, app

def count():
    return len(app.run_sync(app.list_jobs(binding="Ping")))

out = {}
try:
    with transaction.atomic():
        enqueue(Ping, {"n": 0})
except ImproperlyConfigured as exc:
    out["refused"] = str(exc)
with transaction.atomic():
    enqueue_on_commit(Ping, {"n": 1})
    out["inside"] = count()
out["after_commit"] = count()
try:
    with transaction.atomic():
        enqueue_on_commit(Ping, {"n": 2})
        raise RuntimeError("rolled back")
except RuntimeError:
    pass
out["after_rollback"] = count()
out["outside"] = enqueue(Ping, {"n": 3}).state
out["total"] = count()
print(json.dumps(out))
"""


def test_a_store_in_another_database_is_enqueued_on_commit_and_refused_in_the_transaction(tmp_path: Path) -> None:
    (tmp_path / "side_jobs.py").write_text(textwrap.dedent(SIDE_JOBS))
    env = {"SIDE_STORE": f"sqlite:///{tmp_path}/jobs.db", "DJANGO_DB": str(tmp_path / "django.db"),
           "PYTHONPATH": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          env={**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, **env})
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert "the jobloom app's store is another database" in out["refused"] and "enqueue_on_commit" in out["refused"]
    assert out["inside"] == 0 and out["after_commit"] == 1  # enqueued when the transaction committed
    assert out["after_rollback"] == 1                       # nothing for the one rolled back
    assert out["outside"] == "queued" and out["total"] == 2  # outside a transaction: at once


@pytest.fixture(params=STORES)
def unmigrated_store_url(request: pytest.FixtureRequest) -> str:
    """Each store in turn, with no table yet: the example's own ``jobloom migrate`` makes them."""
    if request.param == "sqlite":
        return str(request.getfixturevalue("sqlite_url"))
    return str(request.getfixturevalue("empty_postgres_url"))


@pytest.mark.slow
def test_the_django_example_enqueues_in_its_transaction_and_a_worker_runs_the_job(
        unmigrated_store_url: str, services: Services) -> None:
    env = {"SHOP_DATABASE": unmigrated_store_url}
    services.run("migrate", ["manage.py", "migrate"], cwd=PROJECT, env=env)
    out = services.run("jobloom migrate", ["manage.py", "jobloom", "migrate"], cwd=PROJECT, env=env)
    assert "migration(s) applied" in out
    port = free_port()
    services.start("worker", ["manage.py", "jobloom", "worker", "--concurrency", "4"], cwd=PROJECT, env=env)
    services.start("runserver", ["manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"], cwd=PROJECT, env=env)
    api_port = free_port()
    services.start("serve", ["manage.py", "jobloom", "serve", "--port", str(api_port)], cwd=PROJECT, env=env)
    base = f"http://127.0.0.1:{port}"
    services.wait_http(f"{base}/orders")

    made = httpx.post(f"{base}/orders", json={"email": "ada@example.com", "total": 1200}, timeout=30)
    assert made.status_code == 201, made.text
    order, job_id = made.json()["order"], made.json()["job"]
    declined = httpx.post(f"{base}/orders", json={"email": "bob@example.com", "total": 5, "decline": True},
                          timeout=30)
    assert declined.status_code == 402 and "card declined" in declined.text
    later = httpx.post(f"{base}/orders?after_commit=1", json={"email": "cy@example.com", "total": 7}, timeout=30)
    assert later.status_code == 201 and later.json()["job"] is None
    declined_later = httpx.post(f"{base}/orders?after_commit=1",
                                json={"email": "di@example.com", "total": 9, "decline": True}, timeout=30)
    assert declined_later.status_code == 402

    def receipts_sent() -> list[dict[str, Any]] | None:
        orders = httpx.get(f"{base}/orders", timeout=30).json()["orders"]
        return orders if orders and all(o["receipt_sent"] for o in orders) else None

    orders = eventually_sync(receipts_sent, timeout=60, interval=0.2, what=f"receipts sent\n{services.logs()}")
    assert [o["email"] for o in orders] == ["ada@example.com", "cy@example.com"]  # the declined ones rolled back

    async def jobs() -> tuple[jobloom.Job, list[jobloom.Job], str]:
        # a job marks its receipt sent inside perform; its outcome is reported by the worker's next cycle
        reader = jobloom.App(unmigrated_store_url)
        try:
            listed = list(await reader.list_jobs(binding="SendReceipt"))
            every = [await reader.wait(j.id, timeout=30) for j in listed]
            token, _ = await create_token(await reader.store(), "ops", "read")
            return await reader.wait(job_id, timeout=30), every, token
        finally:
            await reader.close()

    job, every, token = asyncio.run(jobs())
    services.wait_http(f"http://127.0.0.1:{api_port}/v1/health")
    served = httpx.get(f"http://127.0.0.1:{api_port}/v1/jobs/{job_id}", timeout=30,  # manage.py jobloom serve
                       headers={"Authorization": f"Bearer {token}"})
    assert served.status_code == 200 and served.json()["state"] == "succeeded", served.text
    assert job.state == "succeeded" and job.result == f"receipt for order {order} sent to ada@example.com"
    assert sorted(j.payload["order"] for j in every) == [o["order"] for o in orders]  # no job without its order
    assert all(j.state == "succeeded" for j in every)
