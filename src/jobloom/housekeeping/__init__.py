"""Housekeeping beside the worker loop: retention (deleting finished jobs) and stats (the outbox
projected into the read model)."""

from __future__ import annotations
