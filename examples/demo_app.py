"""The demo's jobs: a mailer with limits, a flaky job that retries, one that gives up, one that times out."""

from __future__ import annotations

import asyncio
import os
import random
from dataclasses import dataclass

from image_pipeline import PERFORMERS as PIPELINE
from image_pipeline import publish_image

import jobloom


@dataclass
class Mail:
    to: str
    subject: str


class SendMail(jobloom.Performer[Mail, str]):
    """At most 3 mails at once across all workers, 10 per second."""

    concurrency = 3
    rate_limit = "10/s"

    async def perform(self, payload: Mail) -> str:
        await asyncio.sleep(random.uniform(0.3, 0.5))  # long enough for the limit of 3 to bind
        return f"sent {payload.subject!r} to {payload.to}"


class FlakyThumbnail(jobloom.Performer[dict[str, str], str]):
    """Fails on its first two attempts, then succeeds: retries with backoff."""

    backoff = jobloom.Backoff.exponential(base=0.5)

    async def perform(self, payload: dict[str, str]) -> str:
        if self.ctx.attempt < 3:
            raise ConnectionError(f"image service unavailable (attempt {self.ctx.attempt})")
        return f"thumbnail of {payload['image']}"


class ChargeCard(jobloom.Performer[dict[str, int], None]):
    """Refuses bad input at once: no retry."""

    delivery = "at_most_once"

    def perform(self, payload: dict[str, int]) -> None:  # a plain def runs in a thread
        if payload["cents"] <= 0:
            raise jobloom.Permanent(f"cannot charge {payload['cents']} cents")


class Report(jobloom.Performer[dict[str, str], None]):
    """Runs past its timeout: each attempt is cancelled and counted as failed."""

    timeout = 0.5
    max_attempts = 2
    backoff = jobloom.Backoff.fixed(0.2)

    async def perform(self, payload: dict[str, str]) -> None:
        await asyncio.sleep(5)


app = jobloom.App(
    os.environ.get("JOBLOOM_DEMO_URL", "sqlite:///demo/jobloom.db"),
    performers=[SendMail, FlakyThumbnail, ChargeCard, Report, *PIPELINE],
    flows=[publish_image],
)
