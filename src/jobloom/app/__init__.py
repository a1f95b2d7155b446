"""The ``App`` facade: the public API that ties the engine, flows, schedules and housekeeping to one store."""

from __future__ import annotations

from jobloom.app.facade import App, EnqueueRequest

__all__ = ["App", "EnqueueRequest"]
