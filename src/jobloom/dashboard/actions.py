"""The dashboard's actions beyond retry and cancel, for tokens with the ``operate`` scope: enqueue a job
(its binding picked from a list, its payload checked against the binding's schema), start a run of a
flow, send an event to a waiting job, and trigger a schedule with a payload of one's own.

Each goes in two steps: the form posts to a check that validates everything the action would (the JSON,
the payload against the binding's type, the names) and shows what will be done; that page's button
does it. Both steps are actions (a session whose token has ``operate``, and the CSRF token), and each
action done is noted on the jobs it made or touched with the token's name (``jobloom.app.notes``), which
their timelines show.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from jobloom.app.enqueueing import options_of
from jobloom.app.notes import add_notes
from jobloom.core.errors import InvalidOption, JobloomError, UnknownBinding
from jobloom.core.text import MAX_ID
from jobloom.core.types import Job, Run
from jobloom.dashboard.session import Session
from jobloom.dashboard.web import Dashboard, Form
from jobloom.engine.enqueue import EnqueueOptions, build_job
from jobloom.engine.performer import PerformerSpec
from jobloom.flows.flow import Flow

MAX_JSON = 256 * 1024
"""A payload, input or event data typed into a form: at most this many characters."""


def parse_json(name: str, text: str | None, default: Any = None) -> Any:
    """The JSON a form field holds (blank: ``default``); ``InvalidOption`` names the field and the error."""
    if text is None or not text.strip():
        return default
    if len(text) > MAX_JSON:
        raise InvalidOption(name, f"{len(text)} characters", f"at most {MAX_JSON} characters of JSON")
    try:
        return json.loads(text)
    except ValueError as exc:
        raise InvalidOption(name, text[:80], f"JSON ({exc})") from None


def schema_of(spec: PerformerSpec) -> dict[str, Any] | None:
    """The JSON Schema of a binding's payload, or None for a type pydantic cannot describe."""
    try:
        schema: dict[str, Any] = spec.payload_adapter.json_schema()
        json.dumps(schema, allow_nan=False)
    except Exception:  # a type with no JSON Schema: the server-side check still applies
        return None
    return schema


def enqueueable(d: Dashboard) -> dict[str, PerformerSpec]:
    """The bindings a person may enqueue to: the app's performers and remote bindings (not its internal ones)."""
    internal = set(d.app.internal_bindings)
    return {name: spec for name, spec in sorted(d.app.specs.items()) if name not in internal}


def _tags(text: str | None) -> list[str] | None:
    tags = [t.strip() for t in (text or "").split(",") if t.strip()]
    return tags or None


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)


def _job_id(text: str) -> int:
    if not text.isdigit() or not 0 < int(text) <= MAX_ID:
        raise InvalidOption("job", text, f"a job id from 1 to {MAX_ID}")
    return int(text)


def routes(d: Dashboard) -> list[Route]:
    """The forms, their checks and the actions."""
    app = d.app

    def form_page(request: Request, session: Session, what: str, values: dict[str, Any],
                  problem: str | None = None) -> Response:
        specs = enqueueable(d)
        return d.html(request, "act_form.html", session, 422 if problem else 200, active="actions", what=what,
                      values=values, bindings=list(specs), flows=sorted(app.flows),
                      schemas={n: schema_of(s) for n, s in specs.items()}, **({"problem": problem} if problem else {}))

    def confirm_page(request: Request, session: Session, title: str, target: str, button: str,
                     facts: list[tuple[str, str]], fields: dict[str, str], back: str) -> Response:
        return d.html(request, "act_confirm.html", session, active="actions", title=title, target=target,
                      button=button, facts=facts, fields=fields, back=back)

    async def new_job(request: Request, session: Session) -> Response:
        q = request.query_params
        return form_page(request, session, "enqueue", {"binding": q.get("binding") or "", "payload": "{}"})

    async def new_run(request: Request, session: Session) -> Response:
        return form_page(request, session, "start", {"flow": request.query_params.get("flow") or "", "input": "{}"})

    def _checked_job(form: Form) -> tuple[PerformerSpec, Any, list[str] | None]:
        name = form.get("binding") or ""
        spec = enqueueable(d).get(name)
        if spec is None:
            raise UnknownBinding(name, list(enqueueable(d)))
        payload = parse_json("payload", form.get("payload"), {})
        tags = _tags(form.get("tags"))
        build_job(spec, payload, app_options(tags), app.now())  # the checks enqueue makes, nothing stored
        return spec, payload, tags

    async def check_job(request: Request, session: Session, form: Form) -> Response:
        values = {k: form.get(k) or "" for k in ("binding", "payload", "tags")}
        try:
            spec, payload, tags = _checked_job(form)
        except JobloomError as exc:  # a bad payload names the field the binding's type refused
            return form_page(request, session, "enqueue", values, str(exc).splitlines()[0])
        facts = [("Binding", spec.binding), ("Payload", _pretty(payload))]
        facts += [("Tags", ", ".join(tags))] if tags else []
        return confirm_page(request, session, f"Enqueue a job of {spec.binding}?", "/actions/enqueue",
                            f"Enqueue the job of {spec.binding}", facts, values, "/actions/enqueue")

    async def do_job(request: Request, session: Session, form: Form) -> Response:
        spec, payload, tags = _checked_job(form)
        job = await app.enqueue(spec.binding, payload, tags=tags)
        await add_notes(await app.store(), [job.id], session.name, "enqueued from the dashboard")
        return RedirectResponse(d.url(request, f"/jobs/{job.id}?done=job+{job.id}+enqueued"), status_code=303)

    def _checked_run(form: Form) -> tuple[Flow, Any, str | None]:
        name = form.get("flow") or ""
        flow = app.flows.get(name)
        if flow is None:
            raise InvalidOption("flow", name, f"one of {', '.join(sorted(app.flows)) or 'no flow'}")
        return flow, parse_json("input", form.get("input"), {}), form.get("run_id")

    async def check_run(request: Request, session: Session, form: Form) -> Response:
        values = {k: form.get(k) or "" for k in ("flow", "input", "run_id")}
        try:
            flow, data, run_id = _checked_run(form)
        except JobloomError as exc:
            return form_page(request, session, "start", values, str(exc).splitlines()[0])
        facts = [("Flow", flow.name), ("Input", _pretty(data))] + ([("Run id", run_id)] if run_id else [])
        return confirm_page(request, session, f"Start a run of {flow.name}?", "/actions/start",
                            f"Start the run of {flow.name}", facts, values, "/actions/start")

    async def do_run(request: Request, session: Session, form: Form) -> Response:
        flow, data, run_id = _checked_run(form)
        run = await app.start(flow, data, id=run_id)
        await add_notes(await app.store(), _roots(run), session.name, f"started run {run.id} from the dashboard")
        return RedirectResponse(d.url(request, f"/runs/{quote(run.id)}?done=run+started"), status_code=303)

    async def check_event(request: Request, session: Session, form: Form) -> Response:
        job_id = _job_id(request.path_params["job_id"])
        name, data = form.get("event") or "", parse_json("data", form.get("data"))
        if not name:
            raise InvalidOption("event", "", "the name the job waits for (wait_for_event)")
        facts = [("Job", str(job_id)), ("Event", name), ("Data", _pretty(data))]
        return confirm_page(request, session, f"Send event {name!r} to job {job_id}?", f"/jobs/{job_id}/event",
                            f"Send {name} to job {job_id}", facts,
                            {"event": name, "data": form.get("data") or ""}, f"/jobs/{job_id}")

    async def do_event(request: Request, session: Session, form: Form) -> Response:
        job_id = _job_id(request.path_params["job_id"])
        name = form.get("event") or ""
        woken = await app.send_event(job_id, name, parse_json("data", form.get("data")))
        await add_notes(await app.store(), [job_id], session.name, f"sent event {name!r}"
                        + (" (it woke the job)" if woken else " (kept until the job waits for it)"))
        said = "woken" if woken else "not waiting for it yet: the event is kept for it"
        return RedirectResponse(d.url(request, f"/jobs/{job_id}?done=event+sent:+job+{said}".replace(" ", "+")),
                                status_code=303)

    async def trigger_form(request: Request, session: Session) -> Response:
        name = request.path_params["name"]
        found = next((s for s in await app.list_schedules() if s.name == name), None)
        if found is None:
            return d.html(request, "missing.html", session, 404, active="schedules", what=f"schedule {name}")
        schedule = app.schedules.get(name)
        given = None if schedule is None else schedule.payload if schedule.flow is None else schedule.input
        text = "{}" if given is None or callable(given) else _pretty(given)
        return d.html(request, "act_trigger.html", session, active="schedules", name=name, payload=text)

    async def check_trigger(request: Request, session: Session, form: Form) -> Response:
        name = request.path_params["name"]
        payload = parse_json("payload", form.get("payload"), {})
        return confirm_page(request, session, f"Trigger schedule {name} now?", f"/schedules/{quote(name)}/trigger-with",
                            f"Trigger {name} with this payload", [("Schedule", name), ("Payload", _pretty(payload))],
                            {"payload": form.get("payload") or ""}, "/schedules")

    async def do_trigger(request: Request, session: Session, form: Form) -> Response:
        name = request.path_params["name"]
        made = await app.trigger_schedule(name, parse_json("payload", form.get("payload"), {}))
        store = await app.store()
        if isinstance(made, Job):
            await add_notes(store, [made.id], session.name, f"made by triggering schedule {name!r} with a payload")
            return RedirectResponse(d.url(request, f"/jobs/{made.id}?done=schedule+triggered"), status_code=303)
        if isinstance(made, Run):
            await add_notes(store, _roots(made), session.name, f"made by triggering schedule {name!r} with an input")
            return RedirectResponse(d.url(request, f"/runs/{quote(made.id)}?done=schedule+triggered"), status_code=303)
        return d.back(request, form, done=f"schedule {name} triggered")

    return [
        Route("/actions/enqueue", d.page(new_job)), Route("/actions/start", d.page(new_run)),
        Route("/actions/enqueue/check", d.action(check_job), methods=["POST"]),
        Route("/actions/enqueue", d.action(do_job), methods=["POST"]),
        Route("/actions/start/check", d.action(check_run), methods=["POST"]),
        Route("/actions/start", d.action(do_run), methods=["POST"]),
        Route("/jobs/{job_id}/event/check", d.action(check_event), methods=["POST"]),
        Route("/jobs/{job_id}/event", d.action(do_event), methods=["POST"]),
        Route("/schedules/{name:path}/trigger-with/check", d.action(check_trigger), methods=["POST"]),
        Route("/schedules/{name:path}/trigger-with", d.page(trigger_form)),
        Route("/schedules/{name:path}/trigger-with", d.action(do_trigger), methods=["POST"]),
    ]


def app_options(tags: list[str] | None) -> EnqueueOptions:
    """The enqueue options of a job enqueued from the dashboard (its tags; every other option the binding's)."""
    return options_of(None, None, None, None, None, None, None, tags, None)


def _roots(run: Run) -> list[int]:
    """The jobs of a run's first nodes (those with no upstream node), where a note on the run goes."""
    return [n.job_id for name, n in run.nodes.items() if not run.graph.get(name)]


__all__ = ["MAX_JSON", "app_options", "enqueueable", "parse_json", "routes", "schema_of"]
