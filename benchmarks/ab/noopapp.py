"""The app both engines run in ``ab_drain.py``: one no-op performer (the store from ``AB_URL``)."""

from __future__ import annotations

import os

import jobloom


class Noop(jobloom.Performer[int, None]):
    """Does nothing: the drain measures jobloom alone."""

    async def perform(self, payload: int) -> None:
        return None


app = jobloom.App(os.environ.get("AB_URL", "sqlite:///ab.db"), [Noop])
if os.environ.get("AB_NO_PROJECTOR") == "1":  # the drain without the read model's folding (both engines)
    app.housekeepers = [h for h in app.housekeepers if type(h).__name__ != "Projector"]
