"""The app of the lifecycle-hook kill test, run in real worker processes (configured by environment).

Its ``on_success`` writes ``entered-<pid>`` into ``JOBLOOM_IT_DIR``, then waits for the file ``release``
before it writes ``ran-<pid>``: a worker killed meanwhile has stored the outcome but not run the hook.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import jobloom

STATE = os.environ.get("JOBLOOM_IT_DIR", ".")


def _path(name: str) -> str:
    return os.path.join(STATE, name)


class Noted(jobloom.Performer[dict[str, Any], dict[str, Any]]):
    hook_lease = 2.0  # a hook whose worker died runs again this long after the outcome

    async def perform(self, payload: dict[str, Any]) -> dict[str, Any]:
        return {"n": payload["n"]}

    async def on_success(self, payload: dict[str, Any], result: dict[str, Any]) -> None:
        with open(_path(f"entered-{os.getpid()}"), "a") as f:
            f.write(f"{self.ctx.job_id} {result['n']}\n")
        while not os.path.exists(_path("release")):
            await asyncio.sleep(0.02)
        with open(_path(f"ran-{os.getpid()}"), "a") as f:
            f.write(f"{self.ctx.job_id} {result['n']}\n")


app = jobloom.App(os.environ["JOBLOOM_IT_URL"], performers=[Noted],
                  lease=float(os.environ.get("JOBLOOM_IT_LEASE", "1")))
