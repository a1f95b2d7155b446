"""``jobloom serve`` and ``jobloom tokens`` as real processes: tokens printed once and kept as hashes,
the refusal to serve an open API off loopback, and a bare store (``--url``) enqueueing by name."""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import sqlite3
from collections.abc import Iterator

from tests import forkcli
from tests.cli.test_cli import Env, cli, wait_for
from tests.http.conftest import httpx
from tests.zygote import start_cli

__all__ = ["cli"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def serving(env: Env, *args: str) -> Iterator[str]:
    port = free_port()
    # forked from a Python that has imported the web stack (tests/zygote.py)
    proc = start_cli(["serve", *args, "--port", str(port)], env=env.env, cwd=env.path, log=env.path / "serve.log",
                     new_session=True)
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        assert proc.poll() is None, (env.path / "serve.log").read_text()
        try:
            return httpx.get(f"{url}/v1/health", timeout=1).status_code == 200
        except httpx.TransportError:
            return False

    try:
        wait_for("the server to answer", up)
        yield url
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(15)


def test_tokens_are_shown_once_and_stored_as_hashes(cli: Env) -> None:
    token = cli.run("tokens", "create", "deploy", "--scopes", "read,enqueue", "--url", cli.url).stdout.split()[0]
    assert token.startswith("jlt_")
    with contextlib.closing(sqlite3.connect(cli.db)) as db:
        stored = db.execute("SELECT prefix, secret_hash, scopes FROM jobloom_tokens").fetchall()
    assert len(stored) == 1 and token.split("_", 2)[2] not in repr(stored) and stored[0][2] == "read,enqueue"
    listed = cli.json("tokens", "list", "--url", cli.url)
    assert [(t["name"], t["scopes"], t["active"]) for t in listed] == [("deploy", ["read", "enqueue"], True)]
    assert "token" not in listed[0]
    cli.run("tokens", "create", "deploy", "--scopes", "read", "--url", cli.url, rc=1)
    cli.run("tokens", "create", "x", "--scopes", "root", "--url", cli.url, rc=1)
    cli.run("tokens", "revoke", "deploy", "--url", cli.url)
    assert cli.json("tokens", "list", "--url", cli.url)[0]["active"] is False
    cli.run("tokens", "revoke", "nobody", "--url", cli.url, rc=1)


def test_serve_refuses_an_open_api_off_loopback(cli: Env) -> None:
    done = cli.run("serve", "--url", cli.url, "--host", "0.0.0.0", "--port", str(free_port()), "--insecure-no-auth",
                   rc=1)
    assert "not a loopback address" in done.stderr and "--insecure-no-auth" in done.stderr


def test_serve_a_bare_store_enqueues_by_name_and_always_requires_tokens(cli: Env) -> None:
    cli.run("jobs", "list", "--url", cli.url)
    code = "import asyncio, jobs_app; asyncio.run(jobs_app.app.register_bindings())"
    done = forkcli.run([], code=code, cwd=cli.path, env=cli.env, timeout=60)  # a process of its own
    assert done.returncode == 0, done.stderr
    with serving(cli, "--url", cli.url) as url:
        r = httpx.post(f"{url}/v1/jobs", json={"binding": "SendMail", "payload": {"to": "a"}})
        assert r.status_code == 401, r.text  # no token exists: nothing is open
        made = cli.run("tokens", "create", "ops", "--scopes", "read,enqueue", "--url", cli.url).stdout
        auth = {"Authorization": f"Bearer {next(w for w in made.split() if w.startswith('jlt_'))}"}
        r = httpx.post(f"{url}/v1/jobs", json={"binding": "SendMail", "payload": {"to": "a"}}, headers=auth)
        assert r.status_code == 201, r.text
        r = httpx.post(f"{url}/v1/jobs", json={"binding": "Unknown", "payload": {}}, headers=auth)
        assert r.status_code == 422 and r.json()["error"]["type"] == "UnknownBinding"
        r = httpx.get(f"{url}/v1/counts", headers=auth)
        assert r.json() == {"counts": {"SendMail": {"queued": 1}}}
    cli.drain()
    assert cli.json("jobs", "list", "--url", cli.url)[0]["result"] == "sent to a"


def test_serve_puts_the_dashboard_at_the_root_unless_told_not_to(cli: Env) -> None:
    cli.run("jobs", "list", "--url", cli.url)
    with serving(cli, "--url", cli.url) as url:
        r = httpx.get(f"{url}/jobs")
        assert r.status_code == 303 and r.headers["location"] == "/login?next=/jobs"
        assert httpx.get(f"{url}/login").status_code == 200
    with serving(cli, "--url", cli.url, "--no-dashboard") as url:
        assert httpx.get(f"{url}/login").status_code == 404
        assert httpx.get(f"{url}/v1/health").status_code == 200


def test_serve_logs_json_lines_and_serves_metrics(cli: Env) -> None:
    cli.run("jobs", "list", "--url", cli.url)
    with serving(cli, "--url", cli.url, "--log-format", "json", "--insecure-no-auth") as url:
        r = httpx.get(f"{url}/metrics")  # --insecure-no-auth on loopback: open, like every other GET
        assert r.status_code == 200 and "jobloom_store_up 1.0" in r.text
    lines = (cli.path / "serve.log").read_text().splitlines()
    records = [json.loads(line) for line in lines if line.strip()]  # every line is one JSON object
    assert any(r["logger"].startswith("uvicorn") and "started" in r["message"].lower() for r in records), records
    access = [r for r in records if r["logger"] == "uvicorn.access"]
    assert any("/metrics" in r["message"] for r in access), access
    assert {"time", "level", "logger", "message"} <= set(records[0])
