"""What every page of the dashboard shares: the app, sessions, templates, and the guard around each
route (a session for every page and fragment; for an action, a scope and the CSRF token)."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qs, quote

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from jobloom.app.facade import App
from jobloom.core.errors import JobloomError
from jobloom.dashboard.render import build_environment
from jobloom.dashboard.session import Session, Sessions

MAX_FORM = 1 << 20
"""The largest form body an action takes (bytes)."""
REFRESH = "every 2s"
"""How often live parts of a page are fetched again (an htmx trigger)."""
SECURITY_HEADERS = {
    "Cache-Control": "no-store",
    "Content-Security-Policy": ("default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
                                "frame-ancestors 'none'; form-action 'self'; base-uri 'none'"),
    "X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff", "Referrer-Policy": "same-origin",
}
"""Headers of every page and fragment: nothing from elsewhere, no framing (clickjacking), not cached."""
NAV = (("overview", "/", "Overview"), ("jobs", "/jobs", "Jobs"), ("runs", "/runs", "Runs"),
       ("schedules", "/schedules", "Schedules"), ("limits", "/limits", "Limits"), ("workers", "/workers", "Workers"),
       ("actions", "/actions/enqueue", "Enqueue"))


class Form:
    """An action's URL-encoded form: ``get`` one value, ``all`` of a repeated field."""

    def __init__(self, fields: dict[str, list[str]]) -> None:
        self.fields = fields

    def get(self, name: str, default: str | None = None) -> str | None:
        """The first value of ``name`` (stripped), or ``default`` when absent or blank."""
        values = self.fields.get(name)
        value = values[0].strip() if values else ""
        return value if value else default

    def all(self, name: str) -> list[str]:
        """Every non-blank value of ``name``."""
        return [v.strip() for v in self.fields.get(name, []) if v.strip()]


class Refused(Exception):
    """Stop handling a request and answer with ``response``."""

    def __init__(self, response: Response) -> None:
        super().__init__(response.status_code)
        self.response = response


Handler = Callable[[Request, Session], Awaitable[Response]]
ActionHandler = Callable[[Request, Session, Form], Awaitable[Response]]


def local_path(target: str | None, default: str = "/") -> str:
    """``target`` if it is a path of this site (not another host's URL), else ``default``."""
    if target and target.startswith("/") and not target.startswith("//") and "\\" not in target:
        return target
    return default


class Dashboard:
    """The app behind the dashboard, its sessions and templates."""

    def __init__(self, app: App, sessions: Sessions) -> None:
        self.app = app
        self.sessions = sessions
        self.env = build_environment()

    def html(self, request: Request, template: str, session: Session | None, status: int = 200,
             **values: Any) -> HTMLResponse:
        """Render ``template`` with the page's common values (base path, session, CSRF token, navigation)."""
        base = self.url(request, "")
        common: dict[str, Any] = {
            "base": base, "session": session, "csrf": session.csrf if session else "", "nav": NAV,
            "refresh": REFRESH, "path": self.here(request).partition("?")[0], "query": request.url.query,
            "notice": request.query_params.get("done"), "problem": request.query_params.get("problem"),
        }
        body = self.env.get_template(template).render(common | values)
        return HTMLResponse(body, status_code=status, headers=SECURITY_HEADERS)

    def url(self, request: Request, path: str) -> str:
        """``path`` under the dashboard's base path (where it is mounted)."""
        root: str = request.scope.get("root_path", "")
        return root.rstrip("/") + path

    @staticmethod
    def here(request: Request) -> str:
        """The request's path within the dashboard (without the base path it is mounted under), with its query."""
        root: str = request.scope.get("root_path", "").rstrip("/")
        path = request.url.path
        if root and path.startswith(root):
            path = path[len(root):] or "/"
        return path + (f"?{request.url.query}" if request.url.query else "")

    def back(self, request: Request, form: Form, **message: str) -> RedirectResponse:
        """Redirect (303) to the page the action came from (the form's ``back``), with a message."""
        path, _, query = local_path(form.get("back"), "/").partition("?")
        kept = [p for p in query.split("&") if p and not p.startswith(("done=", "problem="))]
        kept += [f"{k}={quote(v)}" for k, v in message.items()]
        target = path + ("?" + "&".join(kept) if kept else "")
        return RedirectResponse(self.url(request, target), status_code=303)

    async def _session(self, request: Request) -> Session:
        session = await self.sessions.read(request)
        if session is not None:
            return session
        login = self.url(request, "/login")
        if request.headers.get("hx-request"):  # a fragment: htmx sends the whole page to the login
            raise Refused(Response("log in first", status_code=401, headers={"HX-Redirect": login}))
        if request.method != "GET":
            raise Refused(Response("log in first", status_code=401))
        raise Refused(RedirectResponse(f"{login}?next={quote(self.here(request))}", status_code=303))

    def page(self, handler: Handler) -> Callable[[Request], Awaitable[Response]]:
        """A GET route: only with a session."""

        @functools.wraps(handler)
        async def endpoint(request: Request) -> Response:
            try:
                return await handler(request, await self._session(request))
            except Refused as refused:
                return refused.response

        return endpoint

    def action(self, handler: ActionHandler, scope: str = "operate") -> Callable[[Request], Awaitable[Response]]:
        """A POST route: a session whose token has ``scope``, and the session's CSRF token. A
        ``JobloomError`` goes back to the page as a message."""

        @functools.wraps(handler)
        async def endpoint(request: Request) -> Response:
            try:
                session = await self._session(request)
                body = await request.body()
                if len(body) > MAX_FORM:
                    return Response("form too large", status_code=413)
                form = Form(parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True))
                if not self.sessions.csrf_ok(session, request, form.get("csrf")):
                    return self.html(request, "refused.html", session, 403,
                                     reason="This action lacks its CSRF token (reload the page and try again).")
                if not session.allows(scope):
                    return self.html(request, "refused.html", session, 403,
                                     reason=f"Token {session.name!r} lacks the {scope!r} scope this action needs.")
                try:
                    return await handler(request, session, form)
                except JobloomError as exc:
                    return self.back(request, form, problem=str(exc).splitlines()[0])
            except Refused as refused:
                return refused.response

        return endpoint


__all__ = ["MAX_FORM", "NAV", "REFRESH", "SECURITY_HEADERS", "Dashboard", "Form", "Refused", "local_path"]
