"""Imported last by the fork server of process-isolated jobs: builds their performers' specs once.

The fork server imports ``jobloom.engine.runners`` and the modules of the process-isolated performers, then
this module, which checks each such performer once (pydantic builds its payload and result
validators on first use, which takes tens of milliseconds). Every child is a fork of the warmed
server, so a job's child starts without that cost.
"""

from __future__ import annotations

import contextlib
from typing import Any

from jobloom.engine.performer import Performer, inspect_performer


def _subclasses(cls: type[Any]) -> list[type[Any]]:
    out = []
    for sub in cls.__subclasses__():
        out += [sub, *_subclasses(sub)]
    return out


for _cls in _subclasses(Performer):
    if getattr(_cls, "isolation", None) == "process":
        with contextlib.suppress(Exception):
            inspect_performer(_cls)
