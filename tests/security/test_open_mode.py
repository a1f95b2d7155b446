"""Issue 28, item 1: no API is open by default. Revoking the last token never opens the server; the only
open mode is ``--insecure-no-auth``, refused off loopback, logged loudly, and guarded against other web
sites (Host check against DNS rebinding, no state change from a cross-site form)."""

from __future__ import annotations

import os
import re
from pathlib import Path

from tests import forkcli
from tests.dashboard.conftest import free_port, wait_until
from tests.security.conftest import ROOT, httpx, serve, store_for


def login_form(client: httpx.Client) -> str:
    """GET /login (which sets the form's cookie) and return the form's CSRF token."""
    page = client.get("/login")
    assert page.status_code == 200, page.text
    found = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert found, page.text
    return found.group(1)


def test_revoking_the_last_token_never_opens_the_server(store: str, tmp_path: Path) -> None:
    with store_for(store, tmp_path) as url, serve(url, tmp_path, tokens={"only": "admin"}) as s:
        assert httpx.get(f"{s.url}/v1/jobs", headers=s.auth("only")).status_code == 200
        s.revoke("only")
        wait_until("the revoked token to be refused",
                   lambda: httpx.get(f"{s.url}/v1/jobs", headers=s.auth("only")).status_code == 401)
        # the server has now read the store's tokens again and found none: it must stay closed
        assert httpx.get(f"{s.url}/v1/jobs").status_code == 401
        assert httpx.post(f"{s.url}/v1/bindings/Echo/pause").status_code == 401
        assert httpx.post(f"{s.url}/v1/bindings/Echo/pause", json={}).status_code == 401
        with httpx.Client(base_url=s.url) as browser:
            csrf = login_form(browser)
            r = browser.post("/login", data={"token": "", "csrf": csrf, "next": "/"})
            assert r.status_code == 401 and "jobloom_session" not in r.headers.get("set-cookie", "")
            assert browser.get("/jobs", follow_redirects=False).status_code == 303  # to the login
        assert "every request will be refused" not in s.log()  # a token existed at start


def test_a_server_without_tokens_refuses_everything(store: str, tmp_path: Path) -> None:
    with store_for(store, tmp_path) as url, serve(url, tmp_path) as s:
        assert httpx.get(f"{s.url}/v1/jobs").status_code == 401
        assert httpx.post(f"{s.url}/v1/jobs", json={"binding": "Echo", "payload": 1}).status_code == 401
        wait_until("the note", lambda: "every request will be refused" in s.log())


def test_insecure_no_auth_is_refused_off_loopback(tmp_path: Path) -> None:
    args = ["serve", "--url", f"sqlite:///{tmp_path}/x.db", "--host", "0.0.0.0", "--port", str(free_port()),
            "--insecure-no-auth"]
    done = forkcli.run(args, cwd=ROOT, env=os.environ, timeout=60)  # a process of its own
    assert done.returncode != 0
    assert "refusing --insecure-no-auth on 0.0.0.0" in done.stderr, done.stderr


def test_open_mode_is_loud_and_refuses_other_sites(store: str, tmp_path: Path) -> None:
    with store_for(store, tmp_path) as url, serve(url, tmp_path, "--insecure-no-auth") as s:
        wait_until("the warning", lambda: "WITHOUT AUTHENTICATION" in s.log())
        assert httpx.get(f"{s.url}/v1/jobs").status_code == 200  # open, as asked
        # DNS rebinding: a page of evil.example whose name now resolves to 127.0.0.1
        rebound = httpx.get(f"{s.url}/v1/jobs", headers={"Host": "evil.example"})
        assert rebound.status_code == 421 and "evil.example" in rebound.json()["error"]["message"]
        assert httpx.get(f"{s.url}/", headers={"Host": "evil.example:80"}).status_code == 421
        assert httpx.get(f"{s.url}/v1/jobs", headers={"Host": "localhost"}).status_code == 200
        # what a cross-site HTML form (or a no-cors fetch) can send: no body, or a form content type
        pause = f"{s.url}/v1/bindings/Echo/pause"
        assert httpx.post(pause).status_code == 403
        assert httpx.post(pause, content=b"a=1",
                          headers={"Content-Type": "application/x-www-form-urlencoded"}).status_code == 403
        assert httpx.post(pause, content=b"{}", headers={"Content-Type": "text/plain"}).status_code == 403
        form = httpx.post(f"{s.url}/v1/jobs", content=b'{"binding":"Echo","payload":1}',
                          headers={"Content-Type": "text/plain"})
        assert form.status_code == 403 and "cross-site" in form.json()["error"]["message"]
        bindings = httpx.get(f"{s.url}/v1/bindings").json()["bindings"]
        assert [b["paused"] for b in bindings if b["binding"] == "Echo"] == [False]
        # what a program sends (a browser page could not without a CORS preflight, never answered)
        assert httpx.post(pause, json={}).status_code == 200
        assert httpx.post(f"{s.url}/v1/bindings/Echo/resume", headers={"X-Jobloom-Client": "1"}).status_code == 200
        assert httpx.post(f"{s.url}/v1/jobs", json={"binding": "Echo", "payload": 1}).status_code == 201
