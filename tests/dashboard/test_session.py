"""Sessions in a real browser: login and logout, nothing served without a session, the cookie's flags,
actions refused without the CSRF token or the operate scope."""

from __future__ import annotations

from typing import Any

from tests.dashboard.conftest import Site, httpx, login, screenshot, sync_api

expect = sync_api.expect
PAGES = ["/", "/jobs", "/jobs/1", "/runs", "/runs/some-run", "/schedules", "/limits", "/workers"]
FRAGMENTS = ["/overview/live", "/jobs/1/live", "/runs/some-run/live", "/schedules/live", "/workers/live"]
ACTIONS = ["/jobs/confirm", "/jobs/bulk", "/jobs/1/cancel", "/jobs/1/retry", "/runs/x/cancel", "/runs/x/resume",
           "/schedules/hourly-digest/pause", "/schedules/hourly-digest/trigger", "/limits/Quick/set",
           "/limits/Quick/pause", "/logout"]


def test_login_then_logout(context: Any, site: Site) -> None:
    page = context.new_page()
    page.goto(f"{site.url}/jobs")
    expect(page).to_have_url(f"{site.url}/login?next=/jobs")
    screenshot(page, site, "login")
    page.get_by_label("API token").fill("jlt_nope_nope")
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("alert")).to_contain_text("not valid")
    page.get_by_label("API token").fill(site.tokens["pusher"])
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("alert")).to_contain_text("lacks the 'read' scope")

    page.get_by_label("API token").fill(site.tokens["ops"])
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(f"{site.url}/jobs")
    expect(page.get_by_role("heading", name="Jobs")).to_be_visible()
    [cookie] = context.cookies()
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and not cookie["secure"]  # plain HTTP here
    assert site.tokens["ops"].split("_", 2)[2] not in cookie["value"]  # the secret never leaves the login

    page.get_by_role("button", name="Log out").click()
    expect(page).to_have_url(f"{site.url}/login")
    assert [c["name"] for c in context.cookies()] == ["jobloom_login"]  # the new login form's, not a session
    page.goto(f"{site.url}/")
    expect(page).to_have_url(f"{site.url}/login?next=/")


def test_no_page_fragment_or_action_without_a_session(site: Site) -> None:
    with httpx.Client(base_url=site.url, timeout=10) as client:
        for path in PAGES:
            r = client.get(path)
            assert r.status_code == 303 and r.headers["location"].startswith("/login?next="), path
        for path in FRAGMENTS:
            r = client.get(path, headers={"HX-Request": "true"})
            assert r.status_code == 401 and r.headers["hx-redirect"] == "/login", path
        for path in ACTIONS:
            assert client.post(path, data={"csrf": "x"}).status_code == 401, path
        client.cookies.set("jobloom_session", "-.1.forged.signature")
        assert client.get("/").status_code == 303
        assert client.get("/v1/counts").status_code == 401  # the API keeps its bearer tokens
        assert client.get("/static/dashboard.css").status_code == 200  # assets are public


def test_an_action_without_the_csrf_token_is_refused(page: Any, site: Site) -> None:
    job = site.run(site.app.enqueue(site.dashapp.Quick, {"n": 1}, delay=3600))
    refused = page.request.post(f"{site.url}/jobs/{job.id}/cancel", form={"back": "/"}, max_redirects=0)
    assert refused.status == 403 and "CSRF" in refused.text()
    refused = page.request.post(f"{site.url}/jobs/{job.id}/cancel", form={"back": "/", "csrf": "wrong"},
                                max_redirects=0)
    assert refused.status == 403
    assert site.job(job.id).state == "scheduled"
    response = page.goto(f"{site.url}/jobs/{job.id}")
    assert "frame-ancestors 'none'" in response.headers["content-security-policy"]
    assert response.headers["cache-control"] == "no-store"
    csrf = page.locator("input[name=csrf]").first.get_attribute("value")
    done = page.request.post(f"{site.url}/jobs/{job.id}/cancel", form={"back": "/", "csrf": csrf}, max_redirects=0)
    assert done.status == 303
    assert site.job(job.id).state == "cancelled"


def test_a_read_only_token_sees_but_cannot_act(context: Any, site: Site) -> None:
    job = site.run(site.app.enqueue(site.dashapp.Quick, {"n": 1}, delay=3600))
    page = context.new_page()
    login(page, site, "viewer", then=f"/jobs/{job.id}")
    expect(page.locator("header")).to_contain_text("viewer (read only)")
    page.get_by_role("button", name="Cancel job").click()
    expect(page.get_by_role("alert")).to_contain_text("lacks the 'operate' scope")
    assert site.job(job.id).state == "scheduled"
