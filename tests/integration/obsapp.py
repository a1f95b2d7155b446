"""The app that the observability tests run in real worker processes (configured by environment).

``JOBLOOM_OBS_URL``: the store. ``JOBLOOM_OBS_DIR``: a folder for files the test reads. With
``JOBLOOM_OBS_TRACES`` set, the process traces with OpenTelemetry's SDK and writes every finished
span to ``<dir>/spans-<pid>.jsonl`` (one JSON object per line), for the test to read.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jobloom

URL = os.environ.get("JOBLOOM_OBS_URL", "sqlite:///obs.db")
DIR = Path(os.environ.get("JOBLOOM_OBS_DIR", "."))


class Ok(jobloom.Performer[dict[str, Any], str]):
    concurrency = 4
    rate_limit = "1000/s burst 50"

    async def perform(self, payload: dict[str, Any]) -> str:
        return "ok"


class Boom(jobloom.Performer[dict[str, Any], None]):
    async def perform(self, payload: dict[str, Any]) -> None:
        raise jobloom.Permanent("boom")


class Hold(jobloom.Performer[dict[str, Any], None]):
    """Runs until the file ``release`` exists in the test's folder."""

    timeout = 60

    async def perform(self, payload: dict[str, Any]) -> None:
        (DIR / f"holding-{os.getpid()}").write_text(str(self.ctx.job_id))
        while not (DIR / "release").exists():
            await asyncio.sleep(0.02)


class Step(jobloom.Performer[dict[str, Any], str]):
    def perform(self, payload: dict[str, Any]) -> str:  # a sync perform: its span is current in the thread
        from opentelemetry import trace

        with trace.get_tracer("obsapp").start_as_current_span("inside-step"):
            return "stepped"


pipeline = jobloom.Flow("pipeline")
first = pipeline.node("first", Ok, input=lambda inp, up: inp)
pipeline.node("second", Ok, after=[first], input=lambda inp, up: {"after": up["first"]})

app = jobloom.App(URL, performers=[Ok, Boom, Hold, Step], flows=[pipeline], lease=2.0)


def setup_tracing() -> None:
    """Trace with the SDK, each finished span appended to this process's spans file."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

    from jobloom.observe.tracing import instrument

    class FileExporter(SpanExporter):
        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            with open(DIR / f"spans-{os.getpid()}.jsonl", "a") as f:
                for s in spans:
                    ctx, parent = s.get_span_context(), s.parent
                    f.write(json.dumps({
                        "name": s.name, "kind": s.kind.name, "trace_id": ctx.trace_id, "span_id": ctx.span_id,
                        "parent_id": parent.span_id if parent else None, "attributes": dict(s.attributes or {}),
                        "links": [link.context.span_id for link in s.links], "status": s.status.status_code.name,
                    }) + "\n")
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(FileExporter()))
    trace.set_tracer_provider(provider)
    instrument(app)


if os.environ.get("JOBLOOM_OBS_TRACES"):
    setup_tracing()
