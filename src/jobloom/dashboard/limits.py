"""The limits page: each binding's limits in force (run-time overrides marked), changed at run time
(concurrency, key concurrency, rate limit, rate per key: ``App.set_limits``), and pausing or resuming a binding."""

from __future__ import annotations

import math
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from jobloom.core.errors import InvalidOption, UnknownBinding
from jobloom.core.options import RateLimit
from jobloom.core.records import LIMIT_FIELDS
from jobloom.core.types import Policy
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


def limits_of(form: Form, policy: Policy | None = None) -> dict[str, Any]:
    """The limits the form changes: each field present whose value differs from ``policy`` (the limits in
    force when the page was read; blank lifts the limit). A field left as shown is not sent to
    ``set_limits``, so it does not become a run-time override."""
    given: dict[str, Any] = {}
    if "concurrency" in form.fields:
        given["concurrency"] = _whole("concurrency", form.get("concurrency"))
    if "key_concurrency" in form.fields:
        value = _whole("key_concurrency", form.get("key_concurrency"))
        given["key_concurrency"] = 1 if value is None else value
    for name in ("rate_limit", "key_rate_limit"):
        if name in form.fields:
            rate = form.get(name)
            given[name] = None if rate is None or rate.lower() in UNLIMITED else rate
    if policy is None:
        return given
    current = {"concurrency": policy.concurrency, "key_concurrency": policy.key_concurrency}
    rates = {"rate_limit": policy.rate, "key_rate_limit": policy.key_rate}
    changed = {}
    for name, value in given.items():
        same = same_rate(rates[name], value, name) if name in rates else current[name] == value
        if not same:
            changed[name] = value
    return changed


def same_rate(rate: RateLimit | None, text: str | None, name: str = "rate_limit") -> bool:
    """Whether the rate limit ``text`` (None: no limit) is ``rate`` (as the page shows it, rounded)."""
    if rate is None or text is None:
        return rate is None and text is None
    given = RateLimit.parse(text, None, name)
    return math.isclose(given.rate, rate.rate, rel_tol=1e-6) and math.isclose(given.burst, rate.burst, rel_tol=1e-6)


async def limits_values(d: Dashboard) -> dict[str, Any]:
    """The bindings with their limits and token buckets."""
    store = await d.app.store()
    infos = await d.app.list_bindings()
    rows = await reads.binding_rows(store)
    now = store.now()
    code = {name: spec.policy for name, spec in d.app.specs.items()}
    unkeyed = [b.binding for b in infos if b.key_limit is None and b.counts.get("running")]
    keys_running = {name for name, keys in (await reads.running_keys(store, unkeyed)).items() if keys}
    keyed = {b.binding for b in infos if b.key_limit is not None} | keys_running
    return {"bindings": [(b, reads.tokens_now(rows.get(b.binding), b.policy, now)) for b in infos], "code": code,
            "code_text": code_text, "keyed": keyed}


def code_text(policy: Policy, name: str) -> str:
    """A limit's value in the code (``policy``), as the page shows it: ``"3"``, ``"unlimited"``, ``"10/s"``."""
    if name in ("rate_limit", "key_rate_limit"):
        rate = policy.rate if name == "rate_limit" else policy.key_rate
        return "unlimited" if rate is None else rate_text(rate.rate, rate.burst)
    value = getattr(policy, name)
    return "unlimited" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


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
        info = next((b for b in await app.list_bindings() if b.binding == binding), None)
        if info is None:
            raise UnknownBinding(binding, list(app.specs))
        changed = limits_of(form, info.policy)
        if not changed:
            return d.back(request, form, done=f"{binding}: nothing changed")
        await app.set_limits(binding, **changed)
        said = ", ".join(f"{k} {'unlimited' if v is None else v}" for k, v in changed.items())
        return d.back(request, form, done=f"{binding}: {said}")

    async def reset(request: Request, session: Session, form: Form) -> Response:
        binding, name = request.path_params["binding"], form.get("limit") or ""
        if name not in LIMIT_FIELDS:
            raise InvalidOption("limit", name, f"one of {', '.join(LIMIT_FIELDS)}")
        await app.reset_limits(binding, name)
        return d.back(request, form, done=f"{binding}: {name} reset to the code's value")

    async def pause(request: Request, session: Session, form: Form) -> Response:
        info = await app.pause_binding(request.path_params["binding"])
        return d.back(request, form, done=f"binding {info.binding} paused")

    async def resume(request: Request, session: Session, form: Form) -> Response:
        info = await app.resume_binding(request.path_params["binding"])
        return d.back(request, form, done=f"binding {info.binding} resumed")

    return [Route("/limits", d.page(page)),
            Route("/limits/{binding:path}/set", d.action(change), methods=["POST"]),
            Route("/limits/{binding:path}/reset", d.action(reset), methods=["POST"]),
            Route("/limits/{binding:path}/pause", d.action(pause), methods=["POST"]),
            Route("/limits/{binding:path}/resume", d.action(resume), methods=["POST"])]
