"""``jobloom reencrypt``: rewrite stored content with the codec's first key (or encrypt plaintext rows
when encryption is first turned on).

It walks each kind of stored content (jobs' payloads and results, durable steps' results, events' data,
flow runs' inputs) in key order, a page at a time: each page is read in one transaction and its rows
that are not yet as the codec writes them now are rewritten in a second one, each row only if it still
holds the text that was read (a compare-and-set). A row a worker changed meanwhile is left as that worker
wrote it (it is written with the current codec anyway), so the command is safe while workers run, and
running it again (after an interruption) only does what is left.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from jobloom.app.runtime import Runtime
from jobloom.core.blobref import is_ref
from jobloom.core.codecs import Codec, CodecError
from jobloom.core.errors import InvalidOption
from jobloom.core.queries import Q, Query, Statement
from jobloom.core.rows import CodedRow, CodedRunRow
from jobloom.store.base import Tx

if TYPE_CHECKING:
    from jobloom.app.facade import App

DEFAULT_BATCH = 500


@dataclass
class ReencryptReport:
    """What a run of :func:`reencrypt` did, per kind of content (``payloads``, ``results``, ``steps``,
    ``events``, ``runs``): rows rewritten, rows that changed meanwhile (left as written then), and rows no
    configured key opens (left as they are; ``failed`` names them)."""

    rewritten: dict[str, int] = field(default_factory=dict)
    changed_meanwhile: int = 0
    failed: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        """Rows rewritten in all."""
        return sum(self.rewritten.values())


@dataclass(frozen=True)
class _Kind:
    name: str
    page: Query[Any]
    update: Statement
    what: Callable[[Any], str]


_KINDS = (
    _Kind("payloads", Q.coded_payloads, Q.recode_payload, lambda r: f"payload of job {r.id}"),
    _Kind("results", Q.coded_results, Q.recode_result, lambda r: f"result of job {r.id}"),
    _Kind("steps", Q.coded_steps, Q.recode_step, lambda r: f"{r.name} of job {r.id}"),
    _Kind("events", Q.coded_signals, Q.recode_signal, lambda r: f"data of event {r.name!r} of job {r.id}"),
    _Kind("runs", Q.coded_run_inputs, Q.recode_run_input, lambda r: f"input of run {r.id!r}"),
)


async def reencrypt(app: App, *, batch: int = DEFAULT_BATCH,
                    progress: Callable[[str, int], None] | None = None) -> ReencryptReport:
    """Rewrite every stored value of ``app``'s store that is not as ``app.codec`` writes it now (see the
    module). ``batch``: rows per page (1 to 10,000); ``progress(kind, rewritten so far)`` is told after
    each page."""
    return await rewrite(app.runtime, batch=batch, progress=progress)


async def rewrite(runtime: Runtime, *, batch: int = DEFAULT_BATCH,
                  progress: Callable[[str, int], None] | None = None) -> ReencryptReport:
    """:func:`reencrypt` with the app's runtime: its store, and its codec."""
    if isinstance(batch, bool) or not isinstance(batch, int) or not 1 <= batch <= 10_000:
        raise InvalidOption("batch", batch, "an integer from 1 to 10000")
    store, codec = await runtime.store(), runtime.codec
    report = ReencryptReport()
    for kind in _KINDS:
        report.rewritten[kind.name] = 0
        after: tuple[Any, str] = ("", "") if kind.page is Q.coded_run_inputs else (0, "")
        while True:
            rows = await store.transact(_reader(kind, after, batch), exclusive=False)
            if not rows:
                break
            after = (rows[-1].id, getattr(rows[-1], "name", ""))
            changes = _changes(codec, kind, rows, report)
            if changes:
                done = await store.transact(_writer(kind, changes))
                report.rewritten[kind.name] += done
                report.changed_meanwhile += len(changes) - done
            if progress is not None:
                progress(kind.name, report.rewritten[kind.name])
    return report


def _reader(kind: _Kind, after: tuple[Any, str], limit: int) -> Callable[[Tx], Any]:
    async def read(tx: Tx) -> list[CodedRow | CodedRunRow]:
        return await tx.fetch(kind.page, {"after_id": after[0], "after_name": after[1], "limit": limit})
    return read


def _changes(codec: Codec, kind: _Kind, rows: Sequence[CodedRow | CodedRunRow],
             report: ReencryptReport) -> list[dict[str, Any]]:
    out = []
    for r in rows:
        if not r.value or codec.current(r.value) or is_ref(r.value):  # a blob reference stays plain (a
            continue  # blob keeps the key it was written with: keep that key while such blobs live)
        try:
            new = codec.encode(codec.decode(r.value, kind.what(r)))
        except CodecError as exc:
            report.failed.append(str(exc))
            continue
        out.append({"id": r.id, "name": getattr(r, "name", ""), "old": r.value, "new": new})
    return out


def _writer(kind: _Kind, changes: list[dict[str, Any]]) -> Callable[[Tx], Any]:
    async def write(tx: Tx) -> int:
        n = 0
        for change in changes:
            n += await tx.execute(kind.update, change)
        return n
    return write
