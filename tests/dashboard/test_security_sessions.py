"""Issue 28, item 6, in a real browser: logging out ends the session on the server (a copy of the cookie
is refused afterwards), and another site's form cannot log the browser into someone else's session
(login CSRF)."""

from __future__ import annotations

import re
from typing import Any

from tests.dashboard.conftest import Site, httpx, login, sync_api

expect = sync_api.expect
EVIL = "http://evil.test"


def test_logout_ends_the_session_on_the_server(context: Any, site: Site) -> None:
    page = context.new_page()
    login(page, site, then="/jobs")
    [cookie] = [c for c in context.cookies() if c["name"] == "jobloom_session"]
    csrf = page.locator("input[name=csrf]").first.get_attribute("value")
    with httpx.Client(base_url=site.url, timeout=10) as copy:  # the cookie, copied before the logout
        copy.cookies.set("jobloom_session", cookie["value"])
        assert copy.get("/jobs").status_code == 200
        page.get_by_role("button", name="Log out").click()
        expect(page).to_have_url(f"{site.url}/login")
        r = copy.get("/jobs")
        assert r.status_code == 303 and r.headers["location"].startswith("/login"), r.status_code
        assert copy.post("/limits/Quick/pause", data={"csrf": csrf, "back": "/limits"}).status_code == 401
    assert not any(b.paused for b in site.run(site.app.list_bindings()) if b.binding == "Quick")


def test_another_sites_form_cannot_log_the_browser_in(context: Any, site: Site) -> None:
    with httpx.Client(base_url=site.url, timeout=10) as attacker:  # the attacker's own form and cookie
        form = attacker.get("/login").text
    found = re.search(r'name="csrf" value="([^"]+)"', form)
    csrf = found.group(1) if found else ""
    html = (f'<form id="f" method="post" action="{site.url}/login">'
            f'<input name="token" value="{site.tokens["viewer"]}"><input name="next" value="/">'
            f'<input name="csrf" value="{csrf}"></form><script>document.getElementById("f").submit()</script>')
    page = context.new_page()
    page.goto(f"{site.url}/login")  # the victim has a login form of their own open, even
    page.route(f"{EVIL}/**", lambda route: route.fulfill(body=html, content_type="text/html"))
    with page.expect_navigation(url=f"{site.url}/login"):
        page.goto(f"{EVIL}/")
    expect(page.get_by_role("alert")).to_contain_text("did not come from this site")
    assert not [c for c in context.cookies() if c["name"] == "jobloom_session"]
    page.goto(f"{site.url}/jobs")
    expect(page).to_have_url(f"{site.url}/login?next=/jobs")
