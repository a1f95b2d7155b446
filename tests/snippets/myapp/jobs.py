"""``myapp.jobs:app``: the bindings, flow and schedule that the documentation's shell examples use.

Its store is ``sqlite:///jobloom.db`` in the folder a block runs in, as the examples' ``--url`` says.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from image_pipeline import PERFORMERS as PIPELINE  # examples/image_pipeline.py
from image_pipeline import publish_image

import jobloom


@dataclass
class Mail:
    """A mail to send."""

    to: str


class SendMail(jobloom.Performer[Mail, str]):
    """Send a mail (it does nothing here)."""

    concurrency = 3
    rate_limit = "10/s"
    triggers = ["user.signed_up"]

    async def perform(self, payload: Mail) -> str:
        return f"sent to {payload.to}"


class Report(jobloom.Performer[dict[str, str], None]):
    """A nightly report."""

    async def perform(self, payload: dict[str, str]) -> None:
        return None


app = jobloom.App(
    os.environ.get("MYAPP_URL", "sqlite:///jobloom.db"),
    performers=[SendMail, Report, *PIPELINE, jobloom.RemoteBinding("Transcode", payload={"type": "object"})],
    flows=[publish_image],
    schedules=[jobloom.Schedule("nightly-report", cron="0 3 * * *", performer=Report, payload={},
                                timezone="Europe/Berlin")],
    signing_secret=os.environ.get("JOBLOOM_SIGNING_SECRET"),
)
