"""Bindings at run time: their stored limits, pausing and resuming them, and what ``list_bindings``
shows of each (limits in force, paused or not, jobs by state, the workers that serve it).

The :class:`~jobloom.app.facade.App` delegates here; everything goes through the store, so a pause or
a limit set by one process is seen by every worker at its next dispatch.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from jobloom.app.runtime import Runtime
from jobloom.core.decide import held
from jobloom.core.errors import InvalidOption, UnknownBinding
from jobloom.core.queries import Q
from jobloom.core.records import LIMIT_FIELDS, backoff_json, check_limits, key_rules_json, policy_from_row
from jobloom.core.rows import BindingRow, PolicyRow, StateCountRow
from jobloom.core.text import MAX_NAME_BYTES, check_name
from jobloom.core.types import Policy, to_datetime
from jobloom.engine import registry
from jobloom.engine.registry import WorkerInfo
from jobloom.engine.rules import rules_json
from jobloom.housekeeping.retention import retention_json
from jobloom.store.base import Tx


@dataclass(frozen=True, slots=True)
class BindingInfo:
    """One binding as ``App.list_bindings`` shows it.

    ``policy``: the limits in force (code values under run-time overrides; ``overridden`` names those
    changed with ``set_limits``). ``counts``: jobs by state, succeeded and skipped ones left out (see
    ``App.counts``). ``workers``: the live workers that serve the binding."""

    binding: str
    policy: Policy
    overridden: tuple[str, ...] = ()
    registered: bool = False  # a worker has stored this binding's limits from its code
    defaults_known: bool = True  # False: only run-time overrides are known (no worker, no app code)
    paused_ts: float | None = None
    counts: dict[str, int] = field(default_factory=dict)
    workers: tuple[str, ...] = ()
    keyed: bool | None = None  # its performer has a concurrency_key (None: not known: no worker, no app code)

    @property
    def key_limit(self) -> int | None:
        """The per-key limit when it applies: the binding's jobs have keys (or a per-key limit was set at
        run time, or it is not known whether they have), else None."""
        if self.keyed is False and "key_concurrency" not in self.overridden:
            return None
        return self.policy.key_concurrency

    @property
    def paused(self) -> bool:
        """Whether the binding is paused: its queued jobs wait, running ones finish."""
        return self.policy.paused

    @property
    def held_by(self) -> str | None:
        """Why no job of the binding starts whatever is queued (``"paused"``), or None."""
        return held(self.policy)

    def as_json(self) -> dict[str, Any]:
        """Plain JSON values (rate in tokens per second, times as ISO 8601)."""
        p = self.policy
        paused_at = to_datetime(self.paused_ts)
        return {
            "binding": self.binding, "paused": self.paused,
            "paused_at": paused_at.isoformat() if paused_at and self.paused else None,
            "concurrency": p.concurrency, "key_concurrency": p.key_concurrency, "keyed": self.keyed,
            "batch_size": p.batch_size,
            "rate_per_second": p.rate.rate if p.rate else None, "burst": p.rate.burst if p.rate else None,
            "priority_aging": p.priority_aging, "overridden": list(self.overridden),
            "key_rate_per_second": p.key_rate.rate if p.key_rate else None,
            "key_burst": p.key_rate.burst if p.key_rate else None,
            "fairness": p.fairness, "key_weights": dict(p.key_weights),
            "registered": self.registered, "defaults_known": self.defaults_known,
            "counts": dict(self.counts), "workers": list(self.workers),
        }


async def register_bindings(runtime: Runtime, bindings: list[str] | None = None) -> None:
    """Store the performers' limits, retention and enqueue rules with their bindings (workers do it at start)."""
    store = await runtime.store()
    now = store.now()
    rows = []
    for name in bindings or runtime.specs:
        spec = runtime.specs.get(name)
        if spec is None:
            continue
        p = spec.policy
        rows.append({
            "binding": name, "concurrency": p.concurrency, "key_concurrency": p.key_concurrency,
            "rate": p.rate.rate if p.rate else None, "burst": p.rate.burst if p.rate else None,
            "priority_aging": p.priority_aging, "backoff": backoff_json(spec.backoff),
            "retention": retention_json(spec.retention), "batch_size": p.batch_size,
            "batch_wait": p.batch_wait if p.batch_size else None, "keyed": spec.concurrency_key is not None,
            "rules": rules_json(spec), "key_rules": key_rules_json(p), "now": now,
        })

    async def work(tx: Tx) -> None:
        await tx.executemany(Q.upsert_binding, rows)

    await store.transact(work)


async def set_limits(runtime: Runtime, binding: str, limits: dict[str, Any], *, known_only: bool = False) -> None:
    """See :meth:`App.set_limits`. ``known_only``: refuse (``UnknownBinding``) a binding that the app does
    not perform and the store has no row of, rather than make its row (the HTTP API never invents one)."""
    check_limits(binding, limits)
    store = await runtime.store()

    async def work(tx: Tx) -> bool:
        row = await tx.fetchone(Q.get_binding, {"binding": binding})
        if known_only and row is None and binding not in runtime.specs and binding not in runtime.internal_bindings:
            return False
        if known_only and not limits:
            return True
        current = json.loads(row.overrides) if row and row.overrides else {}
        current.update(limits)
        await tx.execute(Q.set_overrides, {"binding": binding, "overrides": json.dumps(current), "now": store.now()})
        if "key_rate_limit" in limits and limits["key_rate_limit"] is None:
            await tx.execute(Q.drop_key_buckets, {"binding": binding})  # lifted: no key keeps a row
        return True

    if not await store.transact(work):
        raise UnknownBinding(binding, why="the app does not perform it and no worker has registered it")
    await store.notify()


async def reset_limits(runtime: Runtime, binding: str, names: tuple[str, ...]) -> None:
    """See :meth:`App.reset_limits`."""
    check_name("binding", binding, MAX_NAME_BYTES)
    for name in names:
        if name not in LIMIT_FIELDS:
            raise InvalidOption("limit", name, f"one of {', '.join(LIMIT_FIELDS)}", binding)
    store = await runtime.store()

    async def work(tx: Tx) -> None:
        row = await tx.fetchone(Q.get_binding, {"binding": binding})
        if row is None or not row.overrides:
            return
        current = json.loads(row.overrides)
        kept = {k: v for k, v in current.items() if k not in (names or tuple(current))}
        await tx.execute(Q.set_overrides, {"binding": binding, "overrides": json.dumps(kept) if kept else None,
                                           "now": store.now()})

    await store.transact(work)
    await store.notify()


async def set_paused(runtime: Runtime, binding: str, paused: bool) -> BindingInfo:
    """Pause or resume ``binding``; see :meth:`App.pause_binding`. Returns the binding as it is now.

    A binding is known if the app performs it or the store has its row (a worker registered it, or
    limits were set); any other name is refused with ``UnknownBinding``."""
    check_name("binding", binding, MAX_NAME_BYTES)
    store = await runtime.store()

    async def work(tx: Tx) -> bool:
        known = binding in runtime.specs or binding in runtime.internal_bindings
        if not known and await tx.fetchone(Q.binding_known, {"binding": binding}) is None:
            return False
        # the exclusive hold first: the dispatches under way commit before this does (PostgreSQL)
        await tx.fetch_batch([(Q.pause_dispatch, {"binding": binding}),
                              (Q.set_paused, {"binding": binding, "paused": paused, "now": store.now()})])
        return True

    if not await store.transact(work):
        raise UnknownBinding(binding, list(runtime.specs))
    if not paused:
        await store.notify()  # the workers take its queued jobs now, not at their next idle re-check
    return next(b for b in await list_bindings(runtime) if b.binding == binding)


async def list_bindings(runtime: Runtime) -> list[BindingInfo]:
    """Every binding the store knows, and the app's performers not registered yet, by name."""
    store = await runtime.store()

    async def work(tx: Tx) -> tuple[list[BindingRow], list[StateCountRow], list[WorkerInfo]]:
        rows, counted = await tx.fetch_batch([(Q.list_bindings, None), (Q.count_by_state_indexed, None)])
        return rows, counted, await registry.workers(tx)

    rows, counted, workers = await store.transact(work, exclusive=False)
    now = store.now()
    counts: dict[str, dict[str, int]] = {}
    for c in counted:
        counts.setdefault(c.binding, {})[c.state] = c.n
    serving: dict[str, list[str]] = {}
    for w in workers:
        if w.alive(now):
            for name in w.bindings:
                serving.setdefault(name, []).append(w.name)
    found: dict[str, BindingInfo] = {}
    for row in rows:
        name, overrides, paused_ts = row.binding, row.overrides, row.paused_at
        registered = row.backoff is not None  # workers store the backoff when they register; `limits set` does not
        values: BindingRow | PolicyRow = row
        if not registered and name in runtime.specs:
            values = _code_row(runtime.specs[name].policy, overrides, bool(row.paused))
        policy = policy_from_row(values)[0]
        changed = tuple(sorted(json.loads(overrides))) if overrides else ()
        keyed = (runtime.specs[name].concurrency_key is not None if name in runtime.specs
                 else None if row.keyed is None else bool(row.keyed))
        found[name] = BindingInfo(name, policy, changed, registered, registered or name in runtime.specs, paused_ts,
                                  counts.get(name, {}), tuple(serving.get(name, ())), keyed)
    for name, spec in runtime.specs.items():
        if name not in found:
            found[name] = BindingInfo(name, spec.policy, counts=counts.get(name, {}),
                                      workers=tuple(serving.get(name, ())), keyed=spec.concurrency_key is not None)
    return [found[name] for name in sorted(found)]


def _code_row(p: Policy, overrides: str | None, paused: bool) -> PolicyRow:
    """A binding's record holding the code's limits, for a binding no worker registered yet."""
    rate, burst = (p.rate.rate, p.rate.burst) if p.rate else (None, None)
    return PolicyRow(concurrency=p.concurrency, key_concurrency=p.key_concurrency, rate=rate, burst=burst,
                     priority_aging=p.priority_aging, backoff=None, overrides=overrides, tokens=None, tokens_at=None,
                     paused=paused, batch_size=p.batch_size, batch_wait=p.batch_wait, key_rules=key_rules_json(p))
