"""OpenTelemetry traces (``pip install 'jobloom[otel]'``): a producer span per enqueue, a consumer span
per attempt that continues the enqueuer's trace.

``instrument(app)`` adds :class:`Tracing` to ``app.telemetry``. At enqueue (``enqueue``, ``enqueue_many``,
``enqueue_sync``, a flow run's start, a job's ``spawn``) it starts a ``send <binding>`` span of kind
PRODUCER, child of whatever span is current, and stores that span's W3C trace context in the job's
``meta`` (``traceparent``, and ``tracestate`` when there is one; a ``traceparent`` the caller put
there is kept). A worker running an attempt of the job starts a ``process <binding>`` span of kind
CONSUMER whose parent is that context (and which links to it), current while ``perform`` runs: spans
the job makes are in the enqueuer's trace. A flow run's node jobs carry the context of the run's
start, so every node's attempts are in the run's trace, with ``jobloom.run_id`` and ``jobloom.node``.

Attributes follow OpenTelemetry's messaging conventions: ``messaging.system="jobloom"``,
``messaging.operation`` (and ``messaging.operation.type``) ``"send"`` or ``"process"``,
``messaging.destination.name`` (the binding), ``messaging.message.id`` (the job id), and
``jobloom.attempt``, ``jobloom.outcome``, ``jobloom.worker``.

Nothing in jobloom imports this module (or ``opentelemetry``) unless the app calls :func:`instrument`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from jobloom.core.extras import needs_extra
from jobloom.engine.telemetry import Telemetry

with needs_extra("otel", "jobloom.observe.tracing"):
    from opentelemetry import context as otel_context
    from opentelemetry import trace
    from opentelemetry.trace import Link, SpanKind, Status, StatusCode, TracerProvider
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

if TYPE_CHECKING:
    from jobloom.engine.jobs import Claimed, NewJob, Outcome
    from jobloom.engine.telemetry import Telemetries

SYSTEM = "jobloom"
CARRIED = ("traceparent", "tracestate")
"""The keys of a job's ``meta`` that carry its enqueuer's trace context (W3C Trace Context)."""
FINE = frozenset({"succeeded", "snoozed", "suspended"})
"""Outcomes of an attempt whose span is not an error."""
_propagator = TraceContextTextMapPropagator()


class Tracing(Telemetry):
    """The engine's telemetry for OpenTelemetry (see the module docstring)."""

    per_attempt = True
    per_enqueue = True

    def __init__(self, tracer_provider: TracerProvider | None = None) -> None:
        from jobloom import __version__

        self.tracer = trace.get_tracer("jobloom", __version__, tracer_provider=tracer_provider)

    # -- enqueue ------------------------------------------------------------------------------------

    def enqueue_started(self, jobs: Sequence[NewJob]) -> Any:
        """Start the producer span and carry its context in each job's meta."""
        if not jobs:
            return None
        first = jobs[0]
        same = all(j.binding == first.binding for j in jobs)
        destination = first.binding if same else "(several)"
        attributes: dict[str, Any] = {
            "messaging.system": SYSTEM, "messaging.operation": "send", "messaging.operation.type": "send",
            "messaging.operation.name": "send", "messaging.destination.name": destination,
        }
        if len(jobs) > 1:
            attributes["messaging.batch.message_count"] = len(jobs)
        if first.run_id is not None:
            attributes["jobloom.run_id"] = first.run_id
        span = self.tracer.start_span(f"send {destination}", kind=SpanKind.PRODUCER, attributes=attributes)
        carrier: dict[str, str] = {}
        _propagator.inject(carrier, context=trace.set_span_in_context(span))
        _carry(jobs, carrier)
        return span, carrier

    def enqueue_carry(self, jobs: Sequence[NewJob], token: Any) -> None:
        """Later chunks of a large enqueue carry the same context."""
        if token is not None:
            _carry(jobs, token[1])

    def enqueued(self, jobs: Sequence[NewJob], ids: Sequence[int] | None, token: Any,
                 error: BaseException | None) -> None:
        """End the producer span (with the job id when it is one job)."""
        if token is None:
            return
        span = token[0]
        if ids is not None and len(ids) == 1:
            span.set_attribute("messaging.message.id", str(ids[0]))
        if error is not None:
            span.record_exception(error)
            span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"[:500]))
        span.end()

    # -- attempts -----------------------------------------------------------------------------------

    def attempt_started(self, claimed: Claimed, worker: str) -> Any:
        """Start the consumer span, child of the enqueuer's context, and make it current."""
        c = claimed
        parent = _extracted(c.meta)
        links = []
        if parent is not None:
            producer = trace.get_current_span(parent).get_span_context()
            if producer.is_valid:
                links.append(Link(producer))
        attributes: dict[str, Any] = {
            "messaging.system": SYSTEM, "messaging.operation": "process", "messaging.operation.type": "process",
            "messaging.operation.name": "process", "messaging.destination.name": c.binding,
            "messaging.message.id": str(c.id), "jobloom.attempt": c.attempt, "jobloom.worker": worker,
        }
        if c.run_id is not None:
            attributes["jobloom.run_id"] = c.run_id
            if c.node is not None:
                attributes["jobloom.node"] = c.node
        span = self.tracer.start_span(f"process {c.binding}", context=parent or otel_context.Context(),
                                      kind=SpanKind.CONSUMER, links=links, attributes=attributes)
        return span, otel_context.attach(trace.set_span_in_context(span))

    def attempt_ended(self, claimed: Claimed, outcome: Outcome, token: Any) -> None:
        """End the consumer span with the outcome (an error status unless it succeeded, snoozed or slept)."""
        span, attached = token
        span.set_attribute("jobloom.outcome", outcome.kind)
        if outcome.kind not in FINE:
            span.set_status(Status(StatusCode.ERROR, (outcome.error or outcome.kind)[:500]))
        span.end()
        otel_context.detach(attached)


def _carry(jobs: Sequence[NewJob], carrier: dict[str, str]) -> None:
    """Put the carrier's keys in each job's meta (a traceparent already there is the caller's: kept)."""
    if not carrier:
        return
    alone = json.dumps(carrier)
    for job in jobs:
        if job.meta is None:
            job.meta = alone
            continue
        meta = json.loads(job.meta)
        if isinstance(meta, dict) and "traceparent" not in meta:
            meta.update(carrier)
            job.meta = json.dumps(meta)


def _extracted(meta_json: str | None) -> otel_context.Context | None:
    """The context a job's meta carries, or None."""
    if not meta_json or "traceparent" not in meta_json:
        return None
    try:
        meta = json.loads(meta_json)
    except ValueError:
        return None
    if not isinstance(meta, dict):
        return None
    carrier = {k: v for k in CARRIED if isinstance(v := meta.get(k), str)}
    if "traceparent" not in carrier:
        return None
    ctx = _propagator.extract(carrier)
    return ctx if trace.get_current_span(ctx).get_span_context().is_valid else None


def instrument(app: Any, tracer_provider: TracerProvider | None = None) -> Tracing:
    """Trace ``app``'s enqueues and attempts with OpenTelemetry (the global tracer provider unless one is
    given). Call it where the app is built, so that every process that loads the app traces."""
    telemetry: Telemetries = app.telemetry
    tracing = Tracing(tracer_provider)
    telemetry.add(tracing)
    return tracing
