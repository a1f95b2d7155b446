"""jobloom on the store ``PEERS_JOBLOOM_URL`` (PostgreSQL options, e.g. a schema, in ``PEERS_JOBLOOM_OPTIONS``)."""

from __future__ import annotations

import json
import os
from typing import Any

from stamps import drain_stamp, latency_stamp

import jobloom


class Noop(jobloom.Performer[dict[str, Any], None]):
    async def perform(self, payload: dict[str, Any]) -> None:
        drain_stamp()


class Stamped(jobloom.Performer[dict[str, Any], None]):
    async def perform(self, payload: dict[str, Any]) -> None:
        latency_stamp(payload["enqueued"])


app = jobloom.App(os.environ.get("PEERS_JOBLOOM_URL", "sqlite:///peers.db"), performers=[Noop, Stamped],
                  **json.loads(os.environ.get("PEERS_JOBLOOM_OPTIONS") or "{}"))
