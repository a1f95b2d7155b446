"""Issue 28, item 10: what the server shows to anyone who can reach it. The unauthenticated health
check names no file or host, the API's documentation pages cannot be framed by another site, and the
dashboard's confirmation page links back only within the site."""

from __future__ import annotations

from pathlib import Path

import jobloom
from jobloom.http.factory import create_asgi
from tests.http.server import serving
from tests.security.conftest import httpx, serve, store_for


def test_the_health_check_of_a_broken_store_names_no_path(tmp_path: Path) -> None:
    blocker = tmp_path / "secret-folder-name"
    blocker.write_text("a file where the store's folder should be")
    hidden = blocker / "jobs.db"  # cannot be opened: the error names the path
    app = jobloom.App(f"sqlite:///{hidden}")
    with serving(create_asgi(app)) as base:
        r = httpx.get(f"{base}/v1/health", timeout=30)
    assert r.status_code == 503, r.text
    assert r.json()["status"] == "unavailable"
    assert "secret-folder-name" not in r.text and str(tmp_path) not in r.text, r.text


def test_the_api_docs_cannot_be_framed_by_another_site(store: str, tmp_path: Path) -> None:
    with store_for(store, tmp_path) as url, serve(url, tmp_path, tokens={"ops": "read"}) as s:
        for page in ("/v1/docs", "/v1/redoc"):
            r = httpx.get(f"{s.url}{page}", timeout=30)
            assert r.status_code == 200, r.text
            assert r.headers["x-frame-options"] == "DENY", page
            assert "frame-ancestors 'none'" in r.headers["content-security-policy"], page


def test_the_bulk_confirmation_links_back_only_within_the_site(store: str, tmp_path: Path) -> None:
    with store_for(store, tmp_path) as url, serve(url, tmp_path, tokens={"ops": "read,operate"}) as s, \
            httpx.Client(base_url=s.url, timeout=30) as browser:
        login = browser.get("/login")
        csrf = login.text.split('name="csrf" value="', 1)[1].split('"', 1)[0]
        assert browser.post("/login", data={"token": s.tokens["ops"], "csrf": csrf, "next": "/"}).status_code in (
            200, 303)
        page = browser.get("/jobs")
        session_csrf = page.text.split('name="csrf" value="', 1)[1].split('"', 1)[0]
        for back in ("https://evil.example/", "//evil.example/x", "javascript:alert(1)", "/\\evil.example"):
            r = browser.post("/jobs/confirm", data={"csrf": session_csrf, "action": "cancel", "all": "1",
                                                     "state": "queued", "back": back})
            assert r.status_code == 200, r.text[:300]
            assert "evil.example" not in r.text and "javascript:" not in r.text, back
