"""The app of the remote-performer tests, run in real worker processes (configured by environment).

``PushGate`` POSTs to the test's receiver (``JOBLOOM_IT_PUSH_URL``) at most 2 at once; ``Transcode`` is
the Python side of a binding that remote workers (``jobloom.RemoteBinding("Transcode")`` in the test)
share, counting itself in itapp's cross-process gauge; ``served`` is the app that ``jobloom serve`` serves
to the remote workers.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from itapp import gauge  # type: ignore[import-not-found]  # copied beside this file

import jobloom

SECRET = "remote-it-secret-0123456789"


class PushGate(jobloom.HttpPerformer[dict[str, Any], Any]):
    url = os.environ.get("JOBLOOM_IT_PUSH_URL", "http://127.0.0.1:9/hook")
    concurrency = 2


class Transcode(jobloom.Performer[dict[str, Any], str]):
    concurrency = 2

    async def perform(self, payload: dict[str, Any]) -> str:
        gauge(+1)
        try:
            await asyncio.sleep(float(payload.get("seconds", 0.05)))
        finally:
            gauge(-1)
        return "python"


app = jobloom.App(os.environ.get("JOBLOOM_IT_URL", "sqlite:///remote.db"), performers=[PushGate, Transcode],
                  lease=float(os.environ.get("JOBLOOM_IT_LEASE", "1.0")), signing_secret=SECRET)

served = jobloom.App(os.environ.get("JOBLOOM_IT_URL", "sqlite:///remote.db"),
                     performers=[PushGate, jobloom.RemoteBinding("Transcode", concurrency=2)],
                     lease=float(os.environ.get("JOBLOOM_IT_LEASE", "1.0")), signing_secret=SECRET)
"""The app ``jobloom serve`` serves to remote workers: ``Transcode`` declared as a remote binding."""
