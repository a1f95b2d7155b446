"""Bindings' policies in the store: the limits and retention an app declares, and limits changed at run time."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from jobloom.core.records import backoff_json, check_limits
from jobloom.housekeeping.retention import retention_json

if TYPE_CHECKING:
    from jobloom.engine.performer import PerformerSpec
    from jobloom.store.base import Store, Tx


async def register_bindings(store: Store, specs: Mapping[str, PerformerSpec], bindings: Iterable[str] | None) -> None:
    """Store the limits of ``bindings`` (default: every one of ``specs``) with their coordinators, and their
    retention, which every app's pruning then applies to their jobs."""
    now = store.now()
    rows = []
    for name in bindings or specs:
        spec = specs.get(name)
        if spec is None:
            continue
        p = spec.policy
        rows.append({
            "binding": name, "concurrency": p.concurrency, "key_concurrency": p.key_concurrency,
            "rate": p.rate.rate if p.rate else None, "burst": p.rate.burst if p.rate else None,
            "priority_aging": p.priority_aging, "backoff": backoff_json(spec.backoff),
            "retention": retention_json(spec.retention), "now": now,
        })

    async def work(tx: Tx) -> None:
        await tx.executemany("upsert_binding", rows)

    await store.transact(work)


async def set_limits(store: Store, binding: str, limits: dict[str, Any]) -> None:
    """Override ``binding``'s limits at run time (checked first), and wake the workers."""
    check_limits(binding, limits)

    async def work(tx: Tx) -> None:
        row = await tx.fetchone("get_binding", {"binding": binding})
        current = json.loads(row[6]) if row and row[6] else {}
        current.update(limits)
        await tx.execute("set_overrides", {"binding": binding, "overrides": json.dumps(current),
                                           "now": store.now()})

    await store.transact(work)
    await store.notify()
