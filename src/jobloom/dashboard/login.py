"""Logging in (with an API token that carries the ``read`` scope) and out."""

from __future__ import annotations

from urllib.parse import parse_qs

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from jobloom.dashboard.session import LoginRefused, Session
from jobloom.dashboard.web import MAX_FORM, Dashboard, Form, local_path


def routes(d: Dashboard) -> list[Route]:
    """``/login`` (the form and its POST) and ``/logout``."""

    async def form_page(request: Request) -> Response:
        target = local_path(request.query_params.get("next"))
        if await d.sessions.read(request) is not None:
            return RedirectResponse(d.url(request, target), status_code=303)
        return await login_page(request, target)

    async def login_page(request: Request, target: str, status: int = 200, error: str | None = None) -> Response:
        nonce, csrf = d.sessions.login_form()
        response = d.html(request, "login.html", None, status, next=target, error=error, login_csrf=csrf,
                          open=await d.sessions.open_without_token())
        response.headers.append("set-cookie", d.sessions.login_cookie_header(nonce, request))
        return response

    async def login(request: Request) -> Response:
        body = await request.body()
        if len(body) > MAX_FORM:
            return Response("form too large", status_code=413)
        form = Form(parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True))
        target = local_path(form.get("next"))
        if not d.sessions.login_form_ok(request, form.get("csrf")):
            return await login_page(request, target, 403, "This login form has expired or did not come from this "
                                    "site: log in again from this page.")
        try:
            cookie = await d.sessions.login(form.get("token") or "")
        except LoginRefused as exc:
            return await login_page(request, target, 401, str(exc))
        response = RedirectResponse(d.url(request, target), status_code=303)
        response.headers.append("set-cookie", d.sessions.cookie_header(cookie, request))
        response.headers.append("set-cookie", d.sessions.login_cookie_header("", request, max_age=0))
        return response

    async def logout(request: Request, session: Session, form: Form) -> Response:
        d.sessions.end(session)
        response = RedirectResponse(d.url(request, "/login"), status_code=303)
        response.headers.append("set-cookie", d.sessions.clear_header(request))
        return response

    return [Route("/login", form_page, methods=["GET"]), Route("/login", login, methods=["POST"]),
            Route("/logout", d.action(logout, scope="read"), methods=["POST"])]
