"""Batch performers: a worker hands up to ``batch_size`` queued jobs of one binding to a single
``perform_batch`` call. Every item stays a job of its own, with its own attempts: an item is settled
on its own (``item.retry``, ``item.fail``, ``item.succeed``), and items left unsettled succeed when
``perform_batch`` returns, or end as its exception says (each spending an attempt) when it raises.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar

from jobloom.core import lifecycle
from jobloom.core.codecs import IDENTITY, Codec
from jobloom.core.options import MAX_DELAY, finite
from jobloom.core.signals import Permanent, Skip
from jobloom.core.text import MAX_ERROR_BYTES, storable_text
from jobloom.core.types import JobContext
from jobloom.engine import reporting
from jobloom.engine.jobs import Claimed, Outcome
from jobloom.engine.offload import Offload
from jobloom.engine.performer import Performer, PerformerSpec

P = TypeVar("P")
R = TypeVar("R")


@dataclass(eq=False)
class BatchItem(Generic[P]):
    """One job of a batch: its ``payload`` and its ``ctx`` (job id, attempt, ...), settled on its own."""

    payload: P
    ctx: JobContext
    _ending: reporting.Ending | None = field(default=None, repr=False)
    _result: Any = field(default=None, repr=False)
    _succeeded: bool = field(default=False, repr=False)

    @property
    def job_id(self) -> int:
        """The item's job id."""
        return self.ctx.job_id

    @property
    def result(self) -> Any:
        """The result given to :meth:`succeed` (None before, or if the item was not settled by it)."""
        return self._result

    @property
    def ending(self) -> reporting.Ending | None:
        """How :meth:`retry` or :meth:`fail` settled the item (None: neither did)."""
        return self._ending

    @property
    def settled(self) -> bool:
        """Whether ``retry``, ``fail`` or ``succeed`` was called for this item."""
        return self._ending is not None or self._succeeded

    def _settle(self) -> None:
        if self.settled:
            raise RuntimeError(f"batch item (job {self.job_id}) is already settled")

    def succeed(self, result: Any = None) -> None:
        """The item's job succeeded, with ``result`` (stored as the job's result)."""
        self._settle()
        self._succeeded, self._result = True, result

    def retry(self, after: float | None = None, reason: str = "retry requested") -> None:
        """Another attempt of this item's job, after ``after`` seconds (else its backoff), as ``Retry`` does."""
        self._settle()
        delay = None if after is None else finite("after", after, maximum=MAX_DELAY)
        self._ending = reporting.Ending(lifecycle.RETRY, reason, retry_after=delay)

    def fail(self, reason: str) -> None:
        """Fail this item's job for good (no further attempts), with ``reason`` as its error."""
        self._settle()
        self._ending = reporting.Ending(lifecycle.PERMANENT, f"Permanent: {reason}")


class BatchPerformer(Performer[P, R]):
    """Subclass and implement ``async def perform_batch(self, items: list[BatchItem[P]]) -> None``.

    ``batch_size``: at most this many jobs per call; ``batch_wait``: seconds a batch waits to fill
    before it starts with fewer. ``concurrency`` counts batches (``concurrency = 2``: at most 2 calls
    at once, across all workers); ``concurrency_key`` and ``rate_limit`` apply per job. ``timeout``
    applies to the whole call. A batch takes one slot of a worker's ``concurrency``.
    """

    batch_size: ClassVar[int] = 100
    batch_wait: ClassVar[float] = 1.0

    async def perform_batch(self, items: list[BatchItem[P]]) -> None:  # pragma: no cover - always overridden
        """Do the work for a batch of jobs; settle items on their own, or let them succeed together."""
        raise NotImplementedError

    def perform(self, payload: P) -> Any:  # a batch performer's jobs run through perform_batch
        """Not used: a batch performer's jobs run through :meth:`perform_batch`."""
        raise Permanent("a batch performer's jobs run through perform_batch")


async def run_batch(
    spec: PerformerSpec, claims: Sequence[Claimed], *, worker: str, env: Any,
    context: Callable[[Claimed], JobContext], node_payload: Callable[[Claimed], Awaitable[str]],
    stopped: Callable[[Claimed], str | None], now: Callable[[], float], codec: Codec = IDENTITY,
    offload: Offload | None = None,
) -> list[Outcome]:
    """Run one batch and return an outcome per job. ``stopped(claim)``: why the worker stopped that
    job (``"cancel"`` or ``"lease_lost"`` for one item; ``"timeout"`` or ``"shutdown"`` stop the call)."""
    items: list[tuple[Claimed, BatchItem[Any]]] = []
    endings: dict[int, tuple[reporting.Ending, str | None]] = {}  # by job id: (ending, payload built here)
    built: dict[int, str] = {}
    for c in claims:
        try:
            raw = codec.decode(c.payload, f"payload of job {c.id}")
            if c.node is not None and c.payload == "":
                raw = built[c.id] = await node_payload(c)
            if offload is not None:
                raw = await offload.load(raw)
            items.append((c, BatchItem(spec.load_payload(raw), context(c))))
        except Skip as exc:  # a node whose when= is false
            endings[c.id] = (reporting.ending_of(exc, None, None), None)
        except Exception as exc:  # one item's payload never fails the others
            endings[c.id] = (reporting.Ending(lifecycle.PERMANENT, f"{type(exc).__name__}: {exc}"), None)
    whole: reporting.Ending | None = None
    performer = spec.cls()
    performer.env = env
    if items:
        performer.ctx = items[0][1].ctx
        try:
            await performer.perform_batch([item for _, item in items])  # type: ignore[attr-defined]
        except BaseException as exc:  # the unsettled items end as the exception says
            why = next((r for c, _ in items if (r := stopped(c)) in ("timeout", "shutdown")), None)
            whole = reporting.ending_of(exc, why, claims[0].timeout)
    finished = now()
    outcomes = []
    for c in claims:
        result: str | None = None
        if c.id in endings:
            ending = endings[c.id][0]
        else:
            item = next(i for cl, i in items if cl is c)
            ending = _item_ending(spec, c, item, whole, stopped(c))
            if ending.kind == lifecycle.SUCCEEDED:
                try:
                    result = spec.dump_result(item.result)
                    if offload is not None and c.run_id is None:  # a flow's results stay in their rows
                        result = await offload.put_opt(result)
                except Exception as exc:
                    ending = reporting.Ending(lifecycle.FAILED, f"{type(exc).__name__}: {exc}")
        outcomes.append(Outcome(c.id, c.attempt, ending.kind, worker, c.started_at, finished, result,
                                storable_text(ending.error, MAX_ERROR_BYTES), ending.traceback, ending.retry_after,
                                built.get(c.id), ending.wait, c.run_id))
    return outcomes


def _item_ending(spec: PerformerSpec, c: Claimed, item: BatchItem[Any], whole: reporting.Ending | None,
                 stop: str | None) -> reporting.Ending:
    if stop == "cancel":
        return reporting.Ending(lifecycle.CANCELLED, "cancelled while its batch ran")
    if stop == "lease_lost":
        return reporting.Ending(lifecycle.LOST, "lease lost: the worker could not renew it in time")
    if item.ending is not None:
        return item.ending
    if item.settled or whole is None:  # settled without an ending: by succeed
        return reporting.Ending(lifecycle.SUCCEEDED)
    return whole
