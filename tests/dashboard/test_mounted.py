"""The site mounted under a prefix in the user's own ASGI app (``jobloom.web.asgi(app)``): the API and the dashboard
both answer under the prefix, and the dashboard's links and redirects keep it. A real server, both stores."""

from __future__ import annotations

import asyncio
import re

from starlette.applications import Starlette
from starlette.routing import Mount

from jobloom.web import asgi
from tests.dashboard.conftest import httpx
from tests.http.apps import make_app
from tests.http.server import serving


def test_the_site_mounted_under_a_prefix(store_url: str) -> None:
    app = make_app(store_url)
    app.run_sync(app.migrate())
    outer = Starlette(routes=[Mount("/ops", asgi(app, auth="off"))])
    try:
        with serving(outer) as url, httpx.Client(base_url=url, timeout=30) as client:
            assert client.get("/ops/v1/health").status_code == 200
            r = client.get("/ops/jobs")
            assert r.status_code == 303 and r.headers["location"] == "/ops/login?next=/jobs"
            form = re.search(r'name="csrf" value="([^"]+)"', client.get("/ops/login").text)
            assert form is not None  # the login form's own CSRF token (its cookie is set with the form)
            r = client.post("/ops/login", data={"token": "", "next": "/jobs", "csrf": form.group(1)})  # auth off
            assert r.status_code == 303 and r.headers["location"] == "/ops/jobs"
            page = client.get("/ops/")
            assert page.status_code == 200
            links = set(re.findall(r'href="([^"]+)"', page.text))
            assert {"/ops/jobs", "/ops/runs", "/ops/static/dashboard.css"} <= links
            assert client.get("/ops/static/vendor/htmx/htmx.min.js").status_code == 200
            csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
            assert csrf is not None
            r = client.post("/ops/limits/SendMail/pause", data={"csrf": csrf.group(1), "back": "/limits"})
            assert r.status_code == 303 and r.headers["location"].startswith("/ops/limits?done=")
            assert next(b for b in app.run_sync(app.list_bindings()) if b.binding == "SendMail").paused
    finally:
        app.close_sync()
        asyncio.set_event_loop(None)
