"""Flask: ``jobloom.contrib.flask`` and ``examples/flask_app`` (an app factory) with a real server and worker."""

from __future__ import annotations

from dataclasses import dataclass

import httpx
import pytest

import jobloom
from tests.conftest import require_module
from tests.contrib.conftest import EXAMPLES, Services, free_port
from tests.helpers import eventually_sync

require_module("flask", "pip install -e '.[dev]' (Flask is a dev dependency)")

from flask import Flask, jsonify  # noqa: E402

from jobloom.contrib.flask import Jobloom  # noqa: E402

PROJECT = EXAMPLES / "flask_app"


@dataclass
class Note:
    text: str


class Keep(jobloom.Performer[Note, str]):
    async def perform(self, payload: Note) -> str:
        return payload.text


def test_the_extension_serves_each_app_of_a_factory_its_own_jobloom_app(store_url: str, sqlite_url: str) -> None:
    jobs = Jobloom()
    apps = {url: jobloom.App(url, performers=[Keep], auto_migrate=True) for url in (store_url, sqlite_url)}

    def create_app(url: str) -> Flask:
        flask_app = Flask(__name__)
        flask_app.config["JOBLOOM_APP"] = apps[url]
        jobs.init_app(flask_app)

        @flask_app.post("/notes")
        def add() -> object:
            job = jobs.enqueue(Keep, {"text": "hello"}, tags=["flask"])
            return jsonify(job=job.id, state=job.state)

        return flask_app

    try:
        for url in dict.fromkeys((store_url, sqlite_url)):
            answer = create_app(url).test_client().post("/notes")
            assert answer.status_code == 200 and answer.json["state"] == "queued"  # type: ignore[index]
            job = apps[url].run_sync(apps[url].get_job(answer.json["job"]))  # type: ignore[index]
            assert (job.binding, job.tags, job.payload) == ("Keep", ["flask"], {"text": "hello"})
    finally:
        for app in apps.values():
            app.close_sync()


def test_a_missing_or_wrong_app_is_named(sqlite_url: str) -> None:
    with pytest.raises(jobloom.JobloomError, match="set JOBLOOM_APP in the Flask config"):
        Jobloom(Flask(__name__))
    flask_app = Flask(__name__)
    flask_app.config["JOBLOOM_APP"] = 42
    with pytest.raises(jobloom.JobloomError, match="JOBLOOM_APP is a int"):
        Jobloom(flask_app)
    flask_app.config["JOBLOOM_APP"] = "no_such_module_here:app"
    with pytest.raises(jobloom.JobloomError, match="cannot import 'no_such_module_here'"):
        Jobloom(flask_app)
    bare = Flask(__name__)
    with bare.app_context(), pytest.raises(jobloom.JobloomError, match="has no jobloom app"):
        Jobloom().app  # noqa: B018


@pytest.mark.slow
def test_the_flask_example_enqueues_in_a_request_and_a_worker_runs_the_job(sqlite_url: str,
                                                                            services: Services) -> None:
    env = {"JOBLOOM_URL": sqlite_url}
    services.run("migrate", ["-m", "jobloom.cli", "migrate", "--app", "mailer.jobs:app"], cwd=PROJECT, env=env)
    port = free_port()
    services.start("worker", ["-m", "jobloom.cli", "worker", "mailer.jobs:app"], cwd=PROJECT, env=env)
    services.start("flask", ["-m", "flask", "--app", "mailer", "run", "--port", str(port)], cwd=PROJECT, env=env)
    base = f"http://127.0.0.1:{port}"
    services.wait_http(f"{base}/jobs/0")

    made = httpx.post(f"{base}/signups", json={"email": "ada@example.com"}, timeout=30)
    assert made.status_code == 201, made.text + services.logs()

    def finished() -> dict[str, object] | None:
        job = httpx.get(f"{base}/jobs/{made.json()['job']}", timeout=30).json()
        return job if job["state"] == "succeeded" else None  # type: ignore[no-any-return]

    job = eventually_sync(finished, timeout=60, interval=0.2, what=f"the Welcome job to succeed\n{services.logs()}")
    assert job["result"] == "welcome mail sent to ada@example.com"
