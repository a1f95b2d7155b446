"""The engine: performers, enqueue, the coordinator's decisions in a store transaction, the worker
that runs jobs, durable steps, runners for sync jobs and the process supervisor."""

from __future__ import annotations
