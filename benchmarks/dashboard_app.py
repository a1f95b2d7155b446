"""The app that ``benchmarks/dashboard.py`` seeds and serves (``jobloom serve --app dashboard_app:app``):
a few bindings of a production-like system and a flow with a fan-out. Its store comes from
``JOBLOOM_BENCH_URL`` (and ``JOBLOOM_BENCH_SCHEMA`` on PostgreSQL)."""

from __future__ import annotations

import os
from typing import Any

import jobloom


class EmailSend(jobloom.Performer[dict[str, Any], None]):
    binding = "email.send"
    concurrency_key = staticmethod(lambda p: p.get("tenant"))
    key_concurrency = 2

    async def perform(self, payload: dict[str, Any]) -> None:
        return None


class ImageResize(jobloom.Performer[int, int]):
    binding = "image.resize"

    async def perform(self, payload: int) -> int:
        return payload * 2


class ReportBuild(jobloom.Performer[dict[str, Any], None]):
    binding = "report.build"
    concurrency = 3

    async def perform(self, payload: dict[str, Any]) -> None:
        return None


class WebhookDeliver(jobloom.Performer[dict[str, Any], None]):
    binding = "webhook.deliver"
    rate_limit = "20/s burst 20"

    async def perform(self, payload: dict[str, Any]) -> None:
        return None


class BillingCharge(jobloom.Performer[dict[str, Any], None]):
    binding = "billing.charge"

    async def perform(self, payload: dict[str, Any]) -> None:
        return None


class Fetch(jobloom.Performer[dict[str, Any], dict[str, Any]]):
    binding = "ingest.fetch"

    async def perform(self, payload: dict[str, Any]) -> dict[str, Any]:
        return {"sizes": list(range(int(payload.get("n", 200))))}


class Publish(jobloom.Performer[Any, None]):
    binding = "ingest.publish"

    async def perform(self, payload: Any) -> None:
        return None


def _ingest() -> jobloom.Flow:
    flow = jobloom.Flow("ingest")
    fetch = flow.node("fetch", Fetch, input=lambda inp, up: inp)
    resize = flow.map("resize", ImageResize, after=[fetch], over=lambda inp, up: up["fetch"]["sizes"])
    flow.node("publish", Publish, after=[resize], input=lambda inp, up: len(up["resize"]))
    return flow


PERFORMERS = [EmailSend, ImageResize, ReportBuild, WebhookDeliver, BillingCharge, Fetch, Publish]
HISTORY_BINDINGS = ("email.send", "image.resize", "report.build", "webhook.deliver", "billing.charge")
INGEST = _ingest()

_options: dict[str, Any] = {}
if os.environ.get("JOBLOOM_BENCH_SCHEMA"):
    _options["schema"] = os.environ["JOBLOOM_BENCH_SCHEMA"]
app = jobloom.App(os.environ.get("JOBLOOM_BENCH_URL", "sqlite:///dashboard-bench.db"), performers=PERFORMERS,
                  flows=[INGEST], **_options)
