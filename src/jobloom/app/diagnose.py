"""Why a job is not running: every cause that holds it, read from the store and decided by the same
pure function the coordinator dispatches with (:func:`jobloom.core.decide.why_not` asks
:func:`~jobloom.core.decide.decide` itself), so the diagnosis cannot disagree with dispatch.

:func:`why_not_running` reads, in one read transaction, what :func:`jobloom.engine.dispatch.dispatch`
reads (the binding's policy and token bucket, its running count, the running count per concurrency key,
the queued jobs it would weigh first), plus the registry of workers and, for a flow node, its run's
graph. Every read is served by an index of active jobs, never by the history.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from jobloom.app.runtime import Runtime
from jobloom.core import lifecycle
from jobloom.core.decide import WhyNot, batch_due, held, order, refill, room_for_batch, why_not
from jobloom.core.dispatch_plan import TurnRead
from jobloom.core.errors import JobNotFound
from jobloom.core.queries import Q
from jobloom.core.records import policy_from_row, turn_from_row
from jobloom.core.rows import AttemptRow, JobRow, NodeJobRow, PolicyRow
from jobloom.core.states import EXPIRED
from jobloom.core.text import checked_id
from jobloom.core.types import Bucket, Candidate, Policy, Turn, to_datetime
from jobloom.engine import registry
from jobloom.engine.dispatch import turn_reads
from jobloom.flows.flow import MAP_BINDING, SUBFLOW_BINDING
from jobloom.flows.runs import child_range, spawn_range, top_node
from jobloom.store.base import Tx

if TYPE_CHECKING:
    from jobloom.app.facade import App

CODES = ("scheduled", "debounce_window", "retry_backoff", "upstream", "children", "binding_full", "key_full",
         "rate_limited", "key_rate_limited", "key_turn", "queued_behind", "batch_filling", "paused", "no_worker",
         "ready", "expires", "expired")
"""Every :attr:`Reason.code`, in the order a diagnosis lists them."""

WINDOW = 16
"""Queued jobs read beyond the room a dispatch has, as dispatch itself does (``want + 16``)."""
MAX_WINDOW = 1000
"""At most this many queued jobs are weighed: a job further back waits behind them."""
LISTED = 20
"""At most this many job ids are linked from one reason."""
_RETRIED = frozenset({lifecycle.FAILED, lifecycle.TIMEOUT, lifecycle.RETRY, lifecycle.LOST})
_HOLDABLE = frozenset({"waiting", "scheduled", "queued"})


@dataclass(frozen=True, slots=True)
class Reason:
    """One cause that holds a job back: ``code`` (one of :data:`CODES`), a sentence for people,
    the jobs it refers to (running jobs that take the slots, upstream nodes, ...) and, when the cause
    ends at a known moment, that moment."""

    code: str
    text: str
    job_ids: tuple[int, ...] = ()
    until: datetime | None = None


@dataclass(frozen=True, slots=True)
class Diagnosis:
    """Why job ``job_id`` (in ``state``) is not running: every cause that holds it, or the single reason
    ``"ready"`` (it starts at the next dispatch). A running or finished job has no reasons."""

    job_id: int
    state: str
    reasons: tuple[Reason, ...]

    @property
    def ready(self) -> bool:
        """Whether nothing holds the job: it starts at the next dispatch."""
        return any(r.code == "ready" for r in self.reasons)

    @property
    def codes(self) -> tuple[str, ...]:
        """The codes of the reasons, in order."""
        return tuple(r.code for r in self.reasons)


@dataclass(slots=True)
class _Binding:
    """What dispatch reads of a binding."""

    policy: Policy
    bucket: Bucket | None
    running: int
    by_key: dict[str, int]
    turn: Turn = field(default_factory=Turn)
    key_buckets: dict[str, Bucket] = field(default_factory=dict)
    keys_of: dict[int, str | None] = field(default_factory=dict)  # the key of each job read by turn


async def why_not_running(app: App, job_id: int) -> Diagnosis:
    """Why job ``job_id`` of ``app``'s store is not running (``JobNotFound`` if there is none); see
    :class:`Diagnosis`."""
    return await diagnose(app.runtime, job_id)


async def diagnose(runtime: Runtime, job_id: int) -> Diagnosis:
    """:func:`why_not_running` with the app's runtime: its store, and its performers."""
    job_id = checked_id(job_id)
    store = await runtime.store()

    async def work(tx: Tx) -> Diagnosis:
        row = await tx.fetchone(Q.get_job, {"id": job_id})
        if row is None:
            raise JobNotFound(job_id)
        if row.state == EXPIRED:
            return Diagnosis(job_id, row.state, (await _expired(tx, row),))
        if row.state not in _HOLDABLE:
            return Diagnosis(job_id, row.state, ())
        return Diagnosis(job_id, row.state, tuple(await _reasons(tx, runtime, row, store.now())))

    return await store.transact(work, exclusive=False)


async def _reasons(tx: Tx, runtime: Runtime, job: JobRow, now: float) -> list[Reason]:
    policy_rows, attempts, timing = await tx.fetch_batch([(Q.get_binding, {"binding": job.binding}),
                                                          (Q.get_attempts, {"id": job.id}),
                                                          (Q.job_timing, {"id": job.id})])
    policy_row: PolicyRow | None = policy_rows[0] if policy_rows else None
    policy, bucket, _ = policy_from_row(policy_row)
    found: list[Reason] = []
    due = job.state == "queued" or (job.state == "scheduled" and job.run_at <= now)
    if job.state == "scheduled" and not due:
        key = timing[0].debounce_key if timing else None
        found.append(_debounced(job, key) if key is not None and job.attempt == 0 else _scheduled(job, attempts))
    elif job.state == "waiting":
        found += await _waiting(tx, job)
    elif due:
        binding = await _binding(tx, job.binding, policy, bucket)
        binding.turn = turn_from_row(policy_row)
        found += await _dispatch(tx, job, binding, now)
    if held(policy) is not None and not any(r.code == "paused" for r in found):
        found.append(_paused(job.binding))
    found += await _no_worker(tx, runtime, job.binding, now)
    if not found:
        found.append(Reason("ready", "Nothing holds it: it starts at the next dispatch."))
    expires_at = timing[0].expires_at if timing else None
    if expires_at is not None:
        found.append(Reason("expires", f"It expires at {_at(expires_at)}: if it has not started by then, it never "
                                       "starts (it ends expired).", (), _until(expires_at)))
    return sorted(found, key=lambda r: CODES.index(r.code))


def _debounced(job: JobRow, key: str) -> Reason:
    """A debounced job in its window: each enqueue of its key moves the window on."""
    return Reason("debounce_window", f"Debounced by key {key!r}: it runs at {_at(job.run_at)} unless another "
                  "enqueue of the key comes first, which moves the window on (and brings the latest payload).",
                  (), _until(job.run_at))


async def _expired(tx: Tx, job: JobRow) -> Reason:
    """Why an expired job never ran (or never ran again)."""
    timing = await tx.fetchone(Q.job_timing, {"id": job.id})
    at = _at(timing.expires_at) if timing is not None and timing.expires_at is not None else "its expiry"
    if job.attempt == 0:
        return Reason("expired", f"It never ran: it had not started by its expiry at {at}.", (),
                      _until(timing.expires_at) if timing is not None else None)
    return Reason("expired", f"It will not run again: attempt {job.attempt} failed and its retry would have come "
                  f"at or past its expiry at {at}.", (), _until(timing.expires_at) if timing is not None else None)


def _at(ts: float) -> str:
    moment = to_datetime(ts)
    return "never" if moment is None else moment.isoformat(timespec="seconds")


def _until(ts: float | None) -> datetime | None:
    return None if ts is None or not math.isfinite(ts) else to_datetime(ts)


def _scheduled(job: JobRow, attempts: Sequence[AttemptRow]) -> Reason:
    """A job not due yet: a retry after a failed attempt, a snooze, a suspension or a delayed start."""
    until = _until(job.run_at)
    when = _at(job.run_at) if until is not None else "an event arrives"
    last = max(attempts, key=lambda a: (a.attempt, a.started_at), default=None)
    outcome = last.outcome if last is not None else None
    if outcome in _RETRIED and last is not None:
        return Reason("retry_backoff", f"Attempt {last.attempt} of {job.max_attempts} ended {outcome}"
                      f"{': ' + _short(last.error) if last.error else ''}; it is retried at {when}.", (), until)
    if outcome == lifecycle.SNOOZED:
        return Reason("scheduled", f"Snoozed by its performer until {when}.", (), until)
    if outcome == lifecycle.SUSPENDED:
        return Reason("scheduled", f"Suspended in a durable sleep or event wait until {when}.", (), until)
    return Reason("scheduled", f"Scheduled: not before {when}.", (), until)


def _short(text: str, limit: int = 120) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[:limit - 1] + "…"


def _paused(binding: str) -> Reason:
    return Reason("paused", f"Its binding {binding!r} is paused: no job of it starts until it is resumed.")


async def _binding(tx: Tx, binding: str, policy: Policy, bucket: Bucket | None) -> _Binding:
    """The running counts dispatch reads (per batch for a batch performer's binding), and per key."""
    count = Q.count_running if policy.batch_size is None else Q.count_running_batches
    counted, keyed = await tx.fetch_batch([(count, {"binding": binding}),
                                           (Q.running_by_key, {"binding": binding})])
    running = sum(r.n for r in counted)
    return _Binding(policy, bucket, running, {r.concurrency_key: r.n for r in keyed})


async def _dispatch(tx: Tx, job: JobRow, b: _Binding, now: float) -> list[Reason]:
    """What holds a due job back at the next dispatch, decided by :func:`~jobloom.core.decide.why_not`."""
    policy, running = b.policy, b.running
    rules, capacity = policy, None
    found: list[Reason] = []
    me = Candidate(job.id, job.priority, job.run_at, job.concurrency_key)
    if policy.batch_size is not None:  # its concurrency counts batches; a batch holds up to batch_size jobs
        if room_for_batch(policy, running) <= 0:
            ids = await _running_ids(tx, job.binding, None)
            found.append(Reason("binding_full", f"Its binding {job.binding!r} runs {running}/{policy.concurrency} "
                                f"batches, its concurrency limit.", ids))
        rules, running, capacity = replace(policy, concurrency=None, paused=False), 0, policy.batch_size
    await _key_buckets(tx, job.binding, b, [me])
    alone = why_not(now, me, (), rules, b.bucket, running=running, running_by_key=b.by_key, capacity=capacity,
                    turn=b.turn, key_buckets=b.key_buckets)
    if alone.limits:  # a limit holds it whatever else waits
        return found + await _limits(tx, job, b, alone, now)
    full = sorted(k for k, n in b.by_key.items() if n >= policy.key_concurrency)
    if policy.fairness is not None:
        others = await _by_turn(tx, job, b, full, now)
        await _key_buckets(tx, job.binding, b, others or [])
    else:
        others = await _ahead(tx, job, rules, b.bucket, running, full, capacity, now)
    if others is None:  # more jobs wait before it than the next dispatch weighs
        found.append(Reason("queued_behind", f"At least {MAX_WINDOW} queued jobs of {job.binding!r} come "
                            f"before it in priority order.", ()))
        return found
    if policy.batch_size is not None:
        due, fill_by = batch_due(now, [me, *others], policy)
        if not due:
            found.append(Reason("batch_filling", f"Its batch is filling: {len(others) + 1} of {policy.batch_size} "
                                f"jobs wait, and the batch is handed out by {_at(fill_by or now)}.",
                                (), _until(fill_by)))
    why = why_not(now, me, others, rules, b.bucket, running=running, running_by_key=b.by_key, capacity=capacity,
                  turn=b.turn, key_buckets=b.key_buckets)
    return found + await _limits(tx, job, b, why, now)


async def _key_buckets(tx: Tx, binding: str, b: _Binding, cands: Sequence[Candidate]) -> None:
    """Read the buckets of the candidates' keys not read yet, as dispatch does (with a key rate)."""
    keys = sorted({c.key for c in cands if c.key is not None} - set(b.key_buckets))
    if b.policy.key_rate is None or not keys:
        return
    for r in await tx.fetch(Q.key_buckets, {"binding": binding, "keys": keys}):
        b.key_buckets[r.concurrency_key] = Bucket(r.tokens, r.tokens_at)


async def _by_turn(tx: Tx, job: JobRow, b: _Binding, full: list[str], now: float) -> list[Candidate] | None:
    """Under round-robin fairness, the queued jobs dispatch weighs with this one, read key by key in turn
    as it reads them, for as many starts as it has room for (plus :data:`WINDOW` keys); None if the job
    is not among them (more keys' turns, or more jobs of its key, come first)."""
    policy = b.policy
    room = MAX_WINDOW if policy.concurrency is None else max(1, min(MAX_WINDOW, policy.concurrency - b.running))
    reads = turn_reads(job.binding, full, TurnRead(b.turn.key if b.turn.used else None, room + WINDOW,
                                                   min(room, policy.key_concurrency), room), peek=True)
    seen: dict[int, Candidate] = {}
    for rows in await tx.fetch_batch(reads):
        for r in rows:
            seen.setdefault(r.id, Candidate(r.id, r.priority, r.run_at, r.concurrency_key))
    b.keys_of = {c.id: c.key for c in seen.values()}
    if job.id not in seen:
        return None
    seen.pop(job.id)
    return list(seen.values())


async def _ahead(tx: Tx, job: JobRow, policy: Policy, bucket: Bucket | None, running: int, full: list[str],
                 capacity: int | None, now: float) -> list[Candidate] | None:
    """The queued jobs dispatch weighs with this one, without those whose key is full: as many as it has
    room for plus :data:`WINDOW` (as dispatch reads them: by priority, and by age with priority aging).
    With no limit on how many start, only the jobs of its own concurrency key can hold it (none if it
    has no key). None if the job is not among them: the next dispatch does not reach it."""
    room: float = math.inf
    if policy.concurrency is not None:
        room = max(0, policy.concurrency - running)
    elif capacity is not None:  # a batch: up to batch_size jobs
        room = capacity
    else:
        state = refill(bucket, policy, now)
        if state is not None:
            room = max(0.0, math.floor(state.tokens))
    key = None
    if room == math.inf:
        if job.concurrency_key is None:
            return []
        key, limit = job.concurrency_key, policy.key_concurrency + WINDOW
    else:
        limit = int(min(room, MAX_WINDOW)) + WINDOW
    params = {"binding": job.binding, "full_keys": full, "key": key, "limit": limit}
    queries: list[tuple[Any, dict[str, Any]]] = [(Q.peek_by_priority, params)]
    if policy.priority_aging:
        queries.append((Q.peek_by_age, params))
    seen: dict[int, Candidate] = {}
    for rows in await tx.fetch_batch(queries):
        for r in rows:
            seen.setdefault(r.id, Candidate(r.id, r.priority, r.run_at, r.concurrency_key))
    if job.state == "queued" and job.id not in seen and len(seen) >= limit:
        return None
    seen.pop(job.id, None)
    return order(seen.values(), now, policy.priority_aging)


async def _limits(tx: Tx, job: JobRow, b: _Binding, why: WhyNot, now: float) -> list[Reason]:
    """The reasons of a :class:`WhyNot`, each with the jobs it refers to."""
    found: list[Reason] = []
    policy, key = b.policy, job.concurrency_key
    for limit in why.limits:
        if limit == "paused":
            found.append(_paused(job.binding))
        elif limit == "slots":
            ids = await _running_ids(tx, job.binding, None)
            found.append(Reason("binding_full", f"Its binding {job.binding!r} is at its concurrency limit: "
                                f"{b.running}/{policy.concurrency} running.", ids))
        elif limit == "keys" and key is not None:
            ids = await _running_ids(tx, job.binding, key)
            found.append(Reason("key_full", f"Its concurrency key {key!r} is full: {b.by_key.get(key, 0)}/"
                                f"{policy.key_concurrency} running.", ids))
        elif limit == "key_tokens" and key is not None and policy.key_rate is not None:
            at = why.next_token_at
            wait = "" if at is None else f": the next one comes in {max(0.0, at - now):.1f} s"
            found.append(Reason("key_rate_limited", f"Its concurrency key {key!r} has spent its rate tokens "
                                f"({policy.key_rate.rate:g}/s, burst {policy.key_rate.burst:g}){wait}.", (),
                                _until(at)))
        elif limit == "tokens" and policy.rate is not None:
            at = why.next_token_at
            wait = "" if at is None else f": the next one comes in {max(0.0, at - now):.1f} s"
            found.append(Reason("rate_limited", f"Its binding's rate tokens are spent ({policy.rate.rate:g}/s, "
                                f"burst {policy.rate.burst:g}){wait}.", (), _until(at)))
    if why.turn:
        return found + _turns(job, b, why)
    if why.ahead:
        found.append(Reason("queued_behind", f"{len(why.ahead)} queued job(s) of {job.binding!r} come before it "
                            f"and take the room the next dispatch has.", why.ahead[:LISTED]))
    return found


def _turns(job: JobRow, b: _Binding, why: WhyNot) -> list[Reason]:
    """Under round-robin fairness: the jobs of other keys whose turns come first, and those of its own
    key that come before it (by priority)."""
    found: list[Reason] = []
    mine = tuple(i for i in why.ahead if b.keys_of.get(i) == job.concurrency_key)
    theirs = tuple(i for i in why.ahead if b.keys_of.get(i) != job.concurrency_key)
    if theirs:
        found.append(Reason("key_turn", f"Waiting for its key's turn: {len(theirs)} job(s) of other keys of "
                            f"{job.binding!r} start first (the keys take turns).", theirs[:LISTED]))
    if mine:
        found.append(Reason("queued_behind", f"{len(mine)} queued job(s) of its key come before it "
                            f"and take its key's turn.", mine[:LISTED]))
    return found


async def _running_ids(tx: Tx, binding: str, key: str | None) -> tuple[int, ...]:
    rows = await tx.fetch(Q.running_ids, {"binding": binding, "key": key, "limit": LISTED})
    return tuple(r.id for r in rows)


async def _waiting(tx: Tx, job: JobRow) -> list[Reason]:
    """A flow node waiting: for its upstream nodes, or (a fan-out, a sub-flow, a node that spawned
    children) for what it started."""
    node = top_node(job.node)
    if job.run_id is None or node is None:
        return [Reason("upstream", "Waiting to be queued by the flow that made it.")]
    run = await tx.fetchone(Q.get_run, {"id": job.run_id})
    graph: dict[str, list[str]] = json.loads(run.graph) if run is not None else {}
    ups = graph.get(node, []) if node == job.node else []
    if ups:
        rows = await tx.fetch(Q.node_jobs, {"run_id": job.run_id, "nodes": ups})
        pending = sorted((r for r in rows if r.state != "succeeded"), key=lambda r: r.id)
        if pending or len(rows) < len(ups):
            names = ", ".join(f"{r.node} ({r.state})" for r in pending) or ", ".join(ups)
            return [Reason("upstream", f"Waiting on upstream flow nodes {names}.", tuple(r.id for r in pending))]
    assert job.node is not None
    if job.binding == SUBFLOW_BINDING:
        return [Reason("children", f"Waiting for its sub-flow run {job.run_id}/{job.node} to end.")]
    bounds = child_range(job.node) if job.binding == MAP_BINDING else spawn_range(job.node)
    active: list[NodeJobRow] = await tx.fetch(Q.active_in_range, {"run_id": job.run_id, **bounds, "limit": LISTED})
    what = "fan-out children" if job.binding == MAP_BINDING else "spawned children"
    if not active and job.binding != MAP_BINDING:
        return [Reason("upstream", "Its upstream nodes are done: the flow queues it at its next step.")]
    more = "+" if len(active) >= LISTED else ""
    return [Reason("children", f"Waiting for its {what} to finish ({len(active)}{more} still active).",
                   tuple(r.id for r in active))]


async def _no_worker(tx: Tx, runtime: Runtime, binding: str, now: float) -> list[Reason]:
    """``no_worker`` if no live worker in the registry serves ``binding``: a local worker, or for a remote
    binding a remote worker (one that pulls over HTTP registers when it claims and renews its leases)."""
    workers = await registry.workers(tx)
    if any(w.alive(now) and binding in w.bindings for w in workers):
        return []
    alive = sum(w.alive(now) for w in workers)
    spec = runtime.specs.get(binding)
    if spec is not None and spec.remote is not None:
        return [Reason("no_worker", f"No remote worker has asked for jobs of its binding {binding!r} lately "
                       f"(remote workers pull them over HTTP; {alive} worker(s) alive serve other bindings).")]
    return [Reason("no_worker", f"No live worker serves its binding {binding!r} ({alive} worker(s) alive "
                   f"serve other bindings).")]
