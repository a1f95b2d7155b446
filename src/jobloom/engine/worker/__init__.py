"""The worker runtime: claim jobs from the coordinators, run performers, report outcomes in batches.

A :class:`Worker` is made of parts, each with its dependencies given explicitly:

- :class:`~jobloom.engine.worker.cycle.Cycle`, the claiming cycle: one transaction that reports the
  pending outcomes, reaps expired leases, promotes due jobs and claims up to the free slots (it owns
  the pacing of rate tokens, the rotation of bindings and the candidates read ahead);
- :class:`~jobloom.engine.worker.executor.Executor`: the attempts running (one task each, sync
  performers on threads or child processes, push performers through a pooled HTTP client), their
  timeouts and stops;
- :class:`~jobloom.engine.worker.completer.Completer`: the outcomes of finished attempts until a cycle
  reports them;
- :class:`~jobloom.engine.worker.leases.Leases`: the heartbeat and the lease watch;
- :class:`~jobloom.engine.worker.shutdown.Shutdown`: the stop, the grace period, and what is left.

Running work is keyed by (job id, attempt): a worker may hold a new attempt of a job whose old
attempt it has not finished reporting.
"""

from __future__ import annotations

from jobloom.engine.worker.shutdown import ABANDON_MARGIN, Stopped
from jobloom.engine.worker.worker import DEFAULT_CONCURRENCY, DEFAULT_SYNC_CONCURRENCY, IDLE_CAP, Worker

__all__ = ["ABANDON_MARGIN", "DEFAULT_CONCURRENCY", "DEFAULT_SYNC_CONCURRENCY", "IDLE_CAP", "Stopped", "Worker"]
