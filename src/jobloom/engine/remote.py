"""Remote bindings: work claimed by workers in other processes or languages (the pull protocol).

A :class:`RemoteBinding` declares a binding with the options of a performer but no code: enqueue
validates its payloads, this app's workers never claim its jobs, and remote workers claim them
(:func:`claim`), renew their leases (:func:`heartbeat`) and report how they ended (:func:`complete`).
Each runs inside one store transaction through the coordinator, so limits hold across Python
workers and remote ones, and a completion is fenced by its attempt exactly as a local report is.

A claim hands each attempt a secret (``claim``) and keeps only its SHA-256 with the job: a heartbeat or
a report must present it, so knowing a worker's name is not enough to renew or complete its attempts
(``ClaimRefused``). A lease is never renewed past the attempt's deadline (claimed at + ``timeout``):
an attempt whose worker keeps heartbeating past it is reaped as timed out.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import secrets
import types
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar

import pydantic

from jobloom.core import lifecycle
from jobloom.core.codecs import IDENTITY, Codec, readable
from jobloom.core.errors import ClaimRefused, InvalidOption, InvalidPayload, JobNotFound
from jobloom.core.extras import needs_extra
from jobloom.core.queries import Q
from jobloom.engine import coordinator
from jobloom.engine.hooks import EngineHooks
from jobloom.engine.jobs import Claimed, Outcome
from jobloom.engine.offload import Offload
from jobloom.engine.performer import Performer, PerformerSpec, describe_validation, inspect_performer
from jobloom.store.base import Tx

OUTCOMES = {"succeeded": lifecycle.SUCCEEDED, "failed": lifecycle.FAILED, "retry": lifecycle.RETRY,
            "permanent": lifecycle.PERMANENT}
"""The outcomes a remote worker reports, and the attempt outcome each one is."""

_UNSET: Any = object()


class RemoteBinding:
    """A binding whose jobs remote workers run: ``RemoteBinding("Transcode", concurrency=2, payload=Video)``.

    Give it to ``App(performers=[...])``. ``payload`` (and ``result``) is a pydantic-compatible type or a
    JSON Schema (a dict); enqueue validates payloads against it. Every other keyword is the performer
    option of that name (``concurrency``, ``rate_limit``, ``key_concurrency``, ``max_attempts``,
    ``backoff``, ``timeout``, ``delivery``, ``priority``, ``priority_aging``, ``unique_for``,
    ``retention``, ``unknown_keys``), with the same defaults and checks. A remote binding cannot be a flow node.
    """

    OPTIONS: ClassVar[tuple[str, ...]] = (
        "concurrency", "rate_limit", "key_concurrency", "max_attempts", "backoff", "timeout", "delivery",
        "priority", "priority_aging", "unique_for", "retention", "unknown_keys")

    def __init__(self, binding: str, *, payload: Any = Any, result: Any = Any, **options: Any) -> None:
        unknown = sorted(set(options) - set(self.OPTIONS))
        if unknown:
            raise InvalidOption(unknown[0], options[unknown[0]], f"one of the options {', '.join(self.OPTIONS)}",
                                binding if isinstance(binding, str) else None)
        self.binding = binding
        self.payload = payload
        self.result = result
        self.options = options
        self.spec = self._inspect()

    def _inspect(self) -> PerformerSpec:
        payload_t, payload_schema = _type_of("payload", self.payload, self.binding)
        result_t, result_schema = _type_of("result", self.result, self.binding)

        async def perform(self: Any, payload: Any) -> Any:  # never called: remote workers do the work
            raise NotImplementedError

        attrs = {**self.options, "binding": self.binding, "perform": perform, "__module__": __name__}
        cls = types.new_class(f"RemoteBinding[{self.binding}]", (Performer[payload_t, result_t],),  # type: ignore[valid-type]
                              exec_body=lambda ns: ns.update(attrs))
        spec = inspect_performer(cls)
        return dataclasses.replace(
            spec, remote=self,
            payload_adapter=payload_schema or spec.payload_adapter,
            result_adapter=result_schema or spec.result_adapter,
            key_check=None if payload_schema is not None else spec.key_check,  # a JSON Schema says for itself
        )

    def __repr__(self) -> str:
        return f"RemoteBinding({self.binding!r})"


def _type_of(field: str, value: Any, binding: str) -> tuple[Any, pydantic.TypeAdapter[Any] | None]:
    """A payload or result declaration as (type, adapter): a JSON Schema gets an adapter that checks it."""
    if not isinstance(value, dict):
        return value, None
    with needs_extra("web", "a RemoteBinding's JSON Schema"):
        import jsonschema  # imported by the apps that declare a payload as a JSON Schema only

    try:
        validator_cls = jsonschema.validators.validator_for(value)
        validator_cls.check_schema(value)
    except jsonschema.SchemaError as exc:
        raise InvalidOption(field, value, f"a valid JSON Schema ({exc.message})", binding) from None
    validator = validator_cls(value)

    def check(data: Any) -> Any:
        error = jsonschema.exceptions.best_match(validator.iter_errors(data))
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path)
            raise ValueError(f"{error.message}" + (f" (at {where})" if where else ""))
        return data

    schema_t = Annotated[Any, pydantic.AfterValidator(check), pydantic.WithJsonSchema(value)]
    return Any, pydantic.TypeAdapter(schema_t)


@dataclass(frozen=True, slots=True)
class RemoteJob:
    """A job handed to a remote worker: run attempt ``attempt``, renew the lease before ``lease_expires_at``;
    every heartbeat and the report of the attempt present ``claim``, its secret."""

    id: int
    attempt: int
    binding: str
    payload: Any
    deadline: float | None
    lease_expires_at: float
    claim: str

    def as_dict(self) -> dict[str, Any]:
        """The job as the worker protocol's JSON object."""
        return dataclasses.asdict(self)


def remote_job(c: Claimed, lease: float, claim: str, codec: Codec = IDENTITY) -> RemoteJob:
    """The remote worker's view of a claim made at ``c.started_at`` (its lease ends by the deadline); its
    payload decoded by ``codec``, or the string ``"encrypted"`` where no key of ``codec`` opens it."""
    deadline = None if c.timeout is None else c.started_at + c.timeout
    expires = c.started_at + lease if deadline is None else min(c.started_at + lease, deadline)
    payload = readable(codec, c.payload, f"payload of job {c.id}")
    return RemoteJob(c.id, c.attempt, c.binding, json.loads(payload) if payload else None, deadline, expires, claim)


def hash_claim(claim: str) -> str:
    """The stored form of a claim secret."""
    return hashlib.sha256(claim.encode("utf-8", "surrogatepass")).hexdigest()


def check_allowed(only: frozenset[str] | None, binding: str) -> None:
    """Refuse ``binding`` to a worker token limited to the bindings ``only`` (None: every binding)."""
    if only is not None and binding not in only:
        raise ClaimRefused(f"this worker token is limited to the bindings {', '.join(sorted(only))}: not "
                           f"{binding!r}; nothing changed", "bindings")


@dataclass(slots=True)
class RemoteClaim:
    """What one claim did: the jobs claimed, when something is next due, whether other workers may have
    work to take now (jobs were reaped or promoted)."""

    claimed: list[Claimed]
    next_due: float | None
    notify: bool
    claims: dict[int, str] = dataclasses.field(default_factory=dict)
    """Each claimed job's claim secret, by job id (only its hash is stored)."""


async def claim(
    tx: Tx, *, worker: str, bindings: Sequence[str], max: int, now: float, lease: float, hooks: EngineHooks,
    clock: Callable[[], float],
) -> RemoteClaim:
    """Claim up to ``max`` jobs of ``bindings`` for the remote ``worker``, as a local worker's cycle does:
    expired leases are reaped and due jobs promoted first (a store served only by remote workers still
    retries and reaps), then each binding is dispatched within its limits."""
    reads = await coordinator.read_cycle(tx, now, reporting=(), worker=worker, watching=False, bindings=bindings)
    reaped = await coordinator.reap(tx, now, hooks=hooks, expired=reads.expired)
    promoted = await coordinator.promote(tx, now, promoted=reads.promoted)
    await coordinator.expire(tx, now, reads.lapsed)
    claimed: list[Claimed] = []
    token_at: float | None = None
    for binding in bindings:
        room = max - len(claimed)
        if room <= 0:
            break
        got = await coordinator.dispatch(tx, binding, capacity=room, worker=worker, now=now, lease=lease,
                                         binding_rows=reads.bindings[binding], clock=clock)
        claimed.extend(got.claimed)
        if got.next_token_at is not None:
            token_at = got.next_token_at if token_at is None else min(token_at, got.next_token_at)
    next_due = None
    if not claimed:
        moments = [m for m in (await coordinator.next_due(tx), token_at) if m is not None]
        next_due = min(moments) if moments else None
    claims = {c.id: secrets.token_urlsafe(24) for c in claimed}
    if claimed:
        await tx.executemany(Q.set_claim, [{"id": c.id, "attempt": c.attempt, "claim_hash": hash_claim(claims[c.id])}
                                           for c in claimed])
    return RemoteClaim(claimed, next_due, bool(reaped or promoted), claims)


async def heartbeat(tx: Tx, worker: str, keys: Iterable[tuple[int, int, str]], now: float, lease: float,
                    only: frozenset[str] | None = None) -> list[tuple[int, int]]:
    """Renew the leases of ``worker``'s attempts, given as (job id, attempt, claim secret), never past an
    attempt's deadline; the ones it still holds and should go on running (an attempt lost, asked to
    cancel, or past its deadline is left out). ``ClaimRefused`` (nothing renewed) for an attempt this
    worker holds under another claim secret, or one of a binding outside ``only``."""
    triples = sorted({(job_id, attempt, hash_claim(claim)) for job_id, attempt, claim in keys})
    rows = await tx.fetch(Q.heartbeat_remote, {
        "ids": [t[0] for t in triples], "attempts": [t[1] for t in triples], "hashes": [t[2] for t in triples],
        "triples": [list(t) for t in triples], "worker": worker, "lease_expires": now + lease,
    })
    for r in rows:
        check_allowed(only, r.binding)
    renewed = {(r.id, r.attempt) for r in rows}
    missing = [t for t in triples if (t[0], t[1]) not in renewed]
    if missing:
        current = {r.id: r for r in await tx.fetch(Q.remote_attempts, {"ids": [t[0] for t in missing]})}
        for job_id, attempt, _ in missing:
            row = current.get(job_id)
            if row is not None and row.attempt == attempt and row.lease_owner == worker:
                raise ClaimRefused(f"job {job_id} attempt {attempt}: the claim secret does not match the one "
                                   "its claim returned; nothing renewed", "claim")
    return sorted((r.id, r.attempt) for r in rows if not r.cancel_requested and r.lease_expires > now)


async def complete(
    tx: Tx, *, worker: str, job_id: int, attempt: int, claim: str, outcome: str, specs: dict[str, PerformerSpec],
    result: Any = _UNSET, error: str | None = None, retry_after: float | None = None, now: float,
    hooks: EngineHooks, only: frozenset[str] | None = None, offload: Offload | None = None,
) -> bool:
    """Apply a remote worker's report of one attempt; False, changing nothing, when the attempt no longer
    holds the job (or ``worker`` does not hold it), or has reached its timeout (the reaper ends it as timed
    out, whatever the report says). The same report again returns True (idempotent).

    ``JobNotFound`` if there is no such job; ``ClaimRefused`` if ``claim`` is not the secret the
    attempt's claim returned, or the job's binding is outside ``only``; ``InvalidPayload`` if a result
    does not match the binding's result type (nothing is changed either)."""
    kind = OUTCOMES[outcome]
    row = await tx.fetchone(Q.lock_running, {"ids": [job_id]})
    if row is None:
        raise JobNotFound(job_id)
    check_allowed(only, row.binding)
    matches = row.claim_hash is not None and hmac.compare_digest(row.claim_hash, hash_claim(claim))
    if row.attempt == attempt and not matches:
        raise ClaimRefused(f"job {job_id} attempt {attempt}: the claim secret does not match the one its "
                           "claim returned; nothing changed", "claim")
    spec = specs.get(row.binding)
    held = row.state == "running" and row.attempt == attempt and row.lease_owner == worker and not (
        row.timeout is not None and row.started_at is not None and now >= row.started_at + row.timeout)
    if not held or spec is None or spec.remote is None:
        prior = await tx.fetchone(Q.get_attempt, {"job_id": job_id, "attempt": attempt})
        return matches and prior is not None and prior.worker == worker and prior.outcome == kind
    stored = None
    if kind == lifecycle.SUCCEEDED and result is not _UNSET:
        try:
            value = None if result is None else spec.result_adapter.validate_python(result)
        except pydantic.ValidationError as exc:
            raise InvalidPayload(spec.binding, f"result: {describe_validation(exc)}") from None
        stored = spec.dump_result(value)
        if offload is not None and row.run_id is None:  # a short write (a retried transaction's is swept); a
            # flow's results stay in their rows, where its nodes read them
            stored = await offload.put_opt(stored)
    started = row.started_at if row.started_at is not None else now
    o = Outcome(job_id, attempt, kind, worker, started_at=started, finished_at=now, result=stored, error=error,
                retry_after=retry_after, run_id=row.run_id)
    await coordinator.report(tx, [o], now, hooks=hooks, locked=[row])
    return True

