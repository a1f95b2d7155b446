"""The limits page: each binding's limits in force (run-time overrides marked), changed at run time
(concurrency, key concurrency, rate limit: ``App.set_limits``), and pausing or resuming a binding."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from jobloom.core.errors import InvalidOption
from jobloom.dashboard import reads
from jobloom.dashboard.session import Session
from jobloom.dashboard.web import Dashboard, Form

UNLIMITED = ("", "none", "unlimited")
"""What a limit field may hold to lift the limit."""


def _whole(name: str, text: str | None) -> int | None:
    if text is None or text.lower() in UNLIMITED:
        return None
    if not text.isdigit():
        raise InvalidOption(name, text, "a whole number, or blank for no limit")
    return int(text)


def limits_of(form: Form) -> dict[str, Any]:
    """The limits the form changes (each field present; blank lifts the limit)."""
    changed: dict[str, Any] = {}
    if "concurrency" in form.fields:
        changed["concurrency"] = _whole("concurrency", form.get("concurrency"))
    if "key_concurrency" in form.fields:
        value = _whole("key_concurrency", form.get("key_concurrency"))
        changed["key_concurrency"] = 1 if value is None else value
    if "rate_limit" in form.fields:
        rate = form.get("rate_limit")
        changed["rate_limit"] = None if rate is None or rate.lower() in UNLIMITED else rate
    return changed


async def limits_values(d: Dashboard) -> dict[str, Any]:
    """The bindings with their limits and token buckets."""
    store = await d.app.store()
    infos = await d.app.list_bindings()
    rows = await reads.binding_rows(store)
    now = store.now()
    return {"bindings": [(b, reads.tokens_now(rows.get(b.binding), b.policy, now)) for b in infos]}


def rate_text(rate: float, burst: float) -> str:
    """A rate limit as ``set_limits`` takes it: ``"10/s burst 2"``."""
    per = f"{rate:g}/s" if rate >= 1 else f"{rate * 60:g}/m"
    return per + (f" burst {burst:g}" if burst != 1 else "")


def routes(d: Dashboard) -> list[Route]:
    """The limits page, setting limits, and pausing and resuming bindings."""
    app = d.app

    async def page(request: Request, session: Session) -> Response:
        return d.html(request, "limits.html", session, active="limits", rate_text=rate_text, **await limits_values(d))

    async def change(request: Request, session: Session, form: Form) -> Response:
        binding = request.path_params["binding"]
        changed = limits_of(form)
        await app.set_limits(binding, **changed)
        said = ", ".join(f"{k} {'unlimited' if v is None else v}" for k, v in changed.items())
        return d.back(request, form, done=f"{binding}: {said}")

    async def pause(request: Request, session: Session, form: Form) -> Response:
        info = await app.pause_binding(request.path_params["binding"])
        return d.back(request, form, done=f"binding {info.binding} paused")

    async def resume(request: Request, session: Session, form: Form) -> Response:
        info = await app.resume_binding(request.path_params["binding"])
        return d.back(request, form, done=f"binding {info.binding} resumed")

    return [Route("/limits", d.page(page)),
            Route("/limits/{binding:path}/set", d.action(change), methods=["POST"]),
            Route("/limits/{binding:path}/pause", d.action(pause), methods=["POST"]),
            Route("/limits/{binding:path}/resume", d.action(resume), methods=["POST"])]
