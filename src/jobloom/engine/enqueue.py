"""Enqueueing: options checked, payloads encoded, and calls in one event-loop tick coalesced into one transaction."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

from jobloom.core import options as opt
from jobloom.core.dependencies import check_depends_on, check_on_failure
from jobloom.core.errors import InvalidOption
from jobloom.core.queries import Q
from jobloom.core.records import job_from_row
from jobloom.core.text import MAX_KEY_BYTES, check_meta, check_name, check_tags
from jobloom.core.types import Job, job_of
from jobloom.engine import coordinator
from jobloom.engine.coalesce import Coalescer
from jobloom.engine.jobs import NewJob
from jobloom.engine.offload import Offload
from jobloom.engine.performer import Performer, PerformerSpec
from jobloom.engine.remote import RemoteBinding
from jobloom.engine.telemetry import EnqueueTold, Telemetry

if TYPE_CHECKING:
    from jobloom.store.base import Store, Tx

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class EnqueueOptions:
    """Per-job options given at enqueue; ``None`` means the performer's default."""

    delay: float | None = None
    run_at: datetime | float | None = None
    priority: int | None = None
    unique_key: str | None = None
    concurrency_key: str | None = None
    max_attempts: int | None = None
    delivery: str | None = None
    tags: Sequence[str] | None = None
    meta: dict[str, Any] | None = None
    debounce: float | None = None
    debounce_key: str | None = None
    debounce_max: float | None = None
    expires_in: float | None = None
    expires_at: datetime | float | None = None
    depends_on: Sequence[int] | None = None
    on_dependency_failure: str | None = None


DEFAULT_OPTIONS = EnqueueOptions()
"""Every option left to the performer's default (shared: the options are immutable)."""


def build_job(
    spec: PerformerSpec, payload: Any, o: EnqueueOptions, now: float, *, payload_json: str | None = None
) -> NewJob:
    """Validate one enqueue request and encode it as a row to insert (``payload_json``: already encoded)."""
    b = spec.binding
    if o is DEFAULT_OPTIONS and payload_json is None:  # the common case, without the option checks
        value = spec.validate_payload(payload)
        return NewJob(
            binding=b, payload=spec.encode_payload(value), priority=spec.priority, run_at=now, state="queued",
            max_attempts=spec.max_attempts, delivery=spec.delivery, timeout=spec.timeout, unique_key=None,
            unique_until=None, concurrency_key=None if spec.concurrency_key is None else spec.key_for(value),
            created_at=now, expires_at=None if spec.expires_in is None else now + spec.expires_in,
        )
    data = spec.dump_payload(payload) if payload_json is None else payload_json
    depends_on = check_depends_on(o.depends_on, b)
    on_failure = check_on_failure(o.on_dependency_failure, b)
    if depends_on is not None:
        for name, value in (("delay", o.delay), ("run_at", o.run_at), ("debounce", o.debounce)):
            if value is not None:
                raise InvalidOption(name, value, "none with depends_on (a job runs once its dependencies ended)", b)
    debounce = _debounce(o, b)
    run_at = now + debounce if debounce is not None else _run_at(o, now, b)
    expires_at = _expires_at(spec, o, now, run_at)
    priority = spec.priority if o.priority is None else opt.integer("priority", o.priority, b)
    for name, value in (("unique_key", o.unique_key), ("concurrency_key", o.concurrency_key),
                        ("debounce_key", o.debounce_key)):
        if value is not None:
            check_name(name, value, MAX_KEY_BYTES, b)
    max_attempts = opt.positive_int("max_attempts", o.max_attempts, b) or spec.max_attempts
    delivery = spec.delivery if o.delivery is None else opt.delivery(o.delivery, b)
    key = o.concurrency_key
    if key is None and spec.concurrency_key is not None and data:
        key = spec.key_for(spec.load_payload(data) if payload_json is not None else
                           spec.payload_adapter.validate_python(payload))
    return NewJob(
        binding=b, payload=data, priority=priority, run_at=run_at,
        state="waiting" if depends_on else "queued" if run_at <= now else "scheduled", max_attempts=max_attempts,
        delivery=delivery, timeout=spec.timeout, unique_key=o.unique_key,
        unique_until=None if o.unique_key is None else now + spec.unique_for,
        concurrency_key=key, created_at=now, tags=check_tags(o.tags, b), meta=check_meta(o.meta, b),
        debounce_key=o.debounce_key, expires_at=expires_at, debounce=debounce,
        debounce_max=opt.seconds("debounce_max", o.debounce_max, b),
        depends_on=depends_on, on_dependency_failure=on_failure,
    )


def _run_at(o: EnqueueOptions, now: float, b: str) -> float:
    """When the job may run: ``delay`` seconds from now, or ``run_at`` (epoch seconds)."""
    if o.delay is not None and o.run_at is not None:
        raise InvalidOption("delay", o.delay, "either delay or run_at, not both", b)
    delay = opt.seconds("delay", o.delay, b)
    if delay is not None and delay > opt.MAX_DELAY:
        raise InvalidOption("delay", o.delay, f"seconds >= 0 and <= {opt.MAX_DELAY:g}", b)
    if o.run_at is None:
        return now + (delay or 0.0)
    return _moment("run_at", o.run_at, b)


def _moment(name: str, value: object, b: str) -> float:
    """A moment given as a timezone-aware datetime or epoch seconds, as epoch seconds."""
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise InvalidOption(name, value, "a timezone-aware datetime (or epoch seconds)", b)
        return value.timestamp()
    if isinstance(value, int | float) and not isinstance(value, bool):
        return opt.finite(name, value, b, minimum=opt.MIN_EPOCH, maximum=opt.MAX_EPOCH)
    raise InvalidOption(name, value, "a timezone-aware datetime or epoch seconds", b)


def _debounce(o: EnqueueOptions, b: str) -> float | None:
    """The debounce window in seconds (None: not debounced), its options checked together."""
    if o.debounce is None:
        if o.debounce_key is not None:
            raise InvalidOption("debounce", None, f"seconds >= 0 with debounce_key={o.debounce_key!r}", b)
        if o.debounce_max is not None:
            raise InvalidOption("debounce_max", o.debounce_max, "only with debounce= and debounce_key=", b)
        return None
    window = opt.seconds("debounce", o.debounce, b, allow_none=False)
    assert window is not None
    if window > opt.MAX_DELAY:
        raise InvalidOption("debounce", o.debounce, f"seconds >= 0 and <= {opt.MAX_DELAY:g}", b)
    if o.debounce_key is None:
        raise InvalidOption("debounce_key", None, "a key with debounce= (the enqueues of one key collapse "
                            "into one job)", b)
    if o.delay is not None or o.run_at is not None:
        raise InvalidOption("debounce", o.debounce, "either debounce or delay/run_at, not both (the window "
                            "sets when the job runs)", b)
    if o.unique_key is not None:
        raise InvalidOption("debounce_key", o.debounce_key, "either debounce_key or unique_key, not both", b)
    return window


def _expires_at(spec: PerformerSpec, o: EnqueueOptions, now: float, run_at: float) -> float | None:
    """The moment after which the job never starts: ``expires_at``, ``expires_in`` seconds from now, or
    the performer's ``expires_in``; refused unless it comes after the job's first chance to run."""
    b = spec.binding
    if o.expires_in is not None and o.expires_at is not None:
        raise InvalidOption("expires_in", o.expires_in, "either expires_in or expires_at, not both", b)
    if o.expires_at is not None:
        name, given, at = "expires_at", o.expires_at, _moment("expires_at", o.expires_at, b)
    elif o.expires_in is not None:
        seconds = opt.seconds("expires_in", o.expires_in, b, allow_none=False)
        assert seconds is not None
        if not 0 < seconds <= opt.MAX_DELAY:
            raise InvalidOption("expires_in", o.expires_in, f"seconds > 0 and <= {opt.MAX_DELAY:g}", b)
        name, given, at = "expires_in", o.expires_in, now + seconds
    elif spec.expires_in is not None:
        name, given, at = "expires_in", spec.expires_in, now + spec.expires_in
    else:
        return None
    if at <= max(now, run_at):
        first = "now" if run_at <= now else f"the job's first run at {datetime.fromtimestamp(run_at, UTC).isoformat()}"
        raise InvalidOption(name, given, f"a moment after {first} (a job that expires before it may start "
                            "could never run)", b)
    return at


def job_from_new(job_id: int, new: NewJob) -> Job:
    """The :class:`Job` just inserted, without reading it back."""
    return job_of((
        job_id, new.binding, new.state, 0, new.max_attempts, new.priority, new.unique_key, new.concurrency_key,
        new.delivery, None, new.payload, None, new.run_at, new.created_at, None, None, False, new.run_id, new.node,
        None if new.tags is None else json.dumps(new.tags), new.meta, None, 0, None,
    ))


class Enqueuer:
    """Collects the enqueue calls of one loop tick and inserts them in one transaction."""

    def __init__(self, store: Store, telemetry: Telemetry | None = None, offload: Offload | None = None) -> None:
        self.store = store
        self.telemetry = telemetry or Telemetry()
        self.offload = offload  # large payloads go to this blob store before their transaction
        self._calls: Coalescer[NewJob, Job] = Coalescer(self._insert_coalesced)

    def submit(self, job: NewJob) -> asyncio.Future[Job]:
        """Queue ``job`` for the next flush; the future resolves once it is committed."""
        if not self.telemetry.per_enqueue:  # nothing watches enqueues: the plain path
            return self._calls.submit(job)
        told = EnqueueTold(self.telemetry, (job,))  # in the caller's context: its trace, if any
        fut = self._calls.submit(job)
        fut.add_done_callback(told.settled)
        return fut

    async def _insert_coalesced(self, jobs: Sequence[NewJob]) -> list[Job]:
        return await self._insert_now(jobs)

    async def insert(self, jobs: Sequence[NewJob]) -> list[Job]:
        """Insert ``jobs`` now, atomically: one statement when no unique key needs checking first."""
        with EnqueueTold(self.telemetry, jobs) as told:
            created = await self._insert_now(jobs)
            told.done([j.id for j in created])
        return created

    async def insert_flagged(self, jobs: Sequence[NewJob]) -> list[tuple[Job, bool]]:
        """Insert ``jobs`` now, atomically; each with whether it was made now (else the unfinished job that
        holds its unique key, which was not enqueued now and is not told as enqueued)."""
        with EnqueueTold(self.telemetry, jobs) as told:
            made = await self._flagged(jobs, single_statement=False)
            told.done([j.id for j, created in made if created],
                      [new for new, (_, created) in zip(jobs, made, strict=True) if created])
        return made

    async def _insert_now(self, jobs: Sequence[NewJob]) -> list[Job]:
        # tags and dependencies take statements of their own; a unique or debounce key reads first
        single = all(job.unique_key is None and job.debounce_key is None and not job.tags and job.depends_on is None
                     for job in jobs)
        return [job for job, _ in await self._flagged(jobs, single_statement=single)]

    async def _flagged(self, jobs: Sequence[NewJob], *, single_statement: bool) -> list[tuple[Job, bool]]:
        """Insert ``jobs``, their large payloads offloaded first (a blob whose row is not committed is
        left to the sweeper: after an error the commit may have happened all the same)."""
        async def work(tx: Tx) -> list[tuple[Job, bool]]:
            return await _insert_flagged(tx, jobs)

        offload = self.offload
        originals = {} if offload is None else await offload.put_jobs(jobs)
        made = await self._committed(work, single_statement=single_statement)
        if originals:
            assert offload is not None
            # a row holds the reference written for it when it was made now, or when a debounced enqueue
            # collapsed into its key's job (which took the payload); a unique key's holder keeps its own
            ours = {i for i in originals if made[i][1] or made[i][0].payload_json == jobs[i].payload}
            await offload.forget_jobs(jobs, [i for i in originals if i not in ours])
            made = [(with_payload(job, originals[i]) if i in ours else job, created)
                    for i, (job, created) in enumerate(made)]
        return made

    async def insert_streamed(self, chunks: Callable[[], Iterable[Sequence[NewJob]]]) -> list[Job]:
        """Insert jobs without unique keys in one transaction, built chunk by chunk while the store
        writes the chunks before (``chunks`` is called again if the transaction is retried)."""

        built: list[NewJob] = []
        told: list[EnqueueTold] = []
        originals: dict[int, str] = {}
        if self.offload is not None:  # every chunk built (and its large payloads written) before the transaction
            prebuilt = [list(jobs) for jobs in chunks()]
            originals = await self.offload.put_jobs([job for jobs in prebuilt for job in jobs])
            chunks = lambda: prebuilt  # noqa: E731

        async def work(tx: Tx) -> list[Job]:
            built.clear()

            def kept() -> Iterator[Sequence[NewJob]]:
                for jobs in chunks():
                    if not told:  # the first chunk opens the enqueue's span; later ones carry its context
                        told.append(EnqueueTold(self.telemetry, jobs))
                    else:
                        told[0].carry(jobs)
                    built.extend(jobs)
                    yield jobs

            ids = await coordinator.enqueue_streamed(tx, kept(), self.store.now())
            return [job_from_new(job_id, new) for job_id, new in zip(ids, built, strict=True)]

        try:
            created = await self._committed(work, single_statement=False)
        except BaseException as exc:
            if told:
                told[0].failed(exc, built)
            raise
        if told:
            told[0].done([j.id for j in created], built)
        return [with_payload(job, originals[i]) if i in originals else job for i, job in enumerate(created)]

    async def _committed(self, work: Callable[[Tx], Awaitable[T]], *, single_statement: bool) -> T:
        """Run ``work`` in a transaction (or as one statement) and wake idle workers unless it did."""
        notified = False

        async def tracked(tx: Tx) -> T:
            nonlocal notified
            created = await work(tx)
            notified = tx.notified
            return created

        run = self.store.autocommit if single_statement else self.store.transact
        created = await run(tracked)
        if not notified:
            await self.store.notify()
        return created


async def _insert_flagged(tx: Tx, jobs: Sequence[NewJob]) -> list[tuple[Job, bool]]:
    now = max((job.created_at for job in jobs), default=time.time())  # the store's clock, read when built
    ids = await coordinator.enqueue(tx, jobs, now)
    out: list[tuple[Job, bool]] = []
    for new, (job_id, created) in zip(jobs, ids, strict=True):
        if created:
            out.append((job_from_new(job_id, new), True))
        else:
            row = await tx.fetchone(Q.get_job, {"id": job_id})
            assert row is not None
            out.append((job_from_row(row, tx.codec), False))
    return out


async def _insert(tx: Tx, jobs: Sequence[NewJob]) -> list[Job]:
    return [job for job, _ in await _insert_flagged(tx, jobs)]


async def insert_in(tx: Tx, jobs: Sequence[NewJob]) -> list[Job]:
    """Insert jobs inside a transaction that the caller owns (their large payloads offloaded before, with
    :meth:`Offload.put_jobs`: a driver's synchronous transaction awaits nothing but its statements)."""
    return await _insert(tx, jobs)


def restored(made: Sequence[Job], jobs: Sequence[NewJob], originals: dict[int, str]) -> list[Job]:
    """The jobs inserted from ``jobs`` with the payloads :meth:`Offload.put_jobs` replaced by references
    given back (a job that holds the reference written for it is the one made now)."""
    return [with_payload(job, originals[i]) if i in originals and job.payload_json == jobs[i].payload else job
            for i, job in enumerate(made)]


def with_payload(job: Job, payload_json: str) -> Job:
    """``job`` as its caller gave it: its payload itself rather than the reference its row keeps."""
    return dataclasses.replace(job, payload_json=payload_json)


PerformerRef = type[Performer[Any, Any]] | RemoteBinding | str


@dataclass(frozen=True, slots=True)
class EnqueueRequest:
    """One item of :meth:`App.enqueue_many`."""

    performer: PerformerRef
    payload: Any
    options: EnqueueOptions = DEFAULT_OPTIONS
