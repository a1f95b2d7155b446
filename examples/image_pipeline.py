"""The image pipeline: analyze, then thumbnail and metadata in parallel, then publish.

Run it on its own with ``python examples/image_pipeline.py``: it starts two runs on a SQLite file,
works them in-process and prints each node's state and result. ``./dev demo`` runs it too, on
worker processes.
"""

from __future__ import annotations

import asyncio
import os
import random
import sys
from typing import Any

import jobloom


class Analyze(jobloom.Performer[dict[str, str], dict[str, Any]]):
    """Pretend to look at the image: its size and dominant colour."""

    async def perform(self, payload: dict[str, str]) -> dict[str, Any]:
        await asyncio.sleep(random.uniform(0.05, 0.15))
        return {"image": payload["image"], "width": 1024, "height": 768, "colour": "teal"}


class Thumbnail(jobloom.Performer[dict[str, Any], str]):
    """Make a thumbnail; durable steps make a retried attempt skip the finished work."""

    async def perform(self, payload: dict[str, Any]) -> str:
        resized = await self.step("resize", self._resize, payload["image"], payload["width"])
        return await self.step("upload", self._upload, resized)

    async def _resize(self, image: str, width: int) -> str:
        await asyncio.sleep(0.1)
        return f"{image}@{width // 8}px"

    async def _upload(self, name: str) -> str:
        await asyncio.sleep(0.05)
        return f"https://cdn.example.com/{name}"


class SaveMeta(jobloom.Performer[dict[str, Any], dict[str, Any]]):
    """Store the analysis (limited to 2 at once, like a small database)."""

    concurrency = 2

    async def perform(self, payload: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(0.05)
        return {"stored": True, "colour": payload["colour"]}


class Publish(jobloom.Performer[dict[str, Any], str]):
    """Publish once both branches are done."""

    async def perform(self, payload: dict[str, Any]) -> str:
        return f"published {payload['thumbnail']} ({payload['meta']['colour']})"


publish_image = jobloom.Flow("publish-image")
analyze = publish_image.node("analyze", Analyze, input=lambda inp, up: inp)
thumb = publish_image.node("thumbnail", Thumbnail, after=[analyze], input=lambda inp, up: up["analyze"])
meta = publish_image.node("metadata", SaveMeta, after=[analyze], input=lambda inp, up: up["analyze"])
publish_image.node(
    "publish", Publish, after=[thumb, meta],
    input=lambda inp, up: {"thumbnail": up["thumbnail"], "meta": up["metadata"]},
)

PERFORMERS = [Analyze, Thumbnail, SaveMeta, Publish]
app = jobloom.App(
    os.environ.get("JOBLOOM_PIPELINE_URL", "sqlite:///image_pipeline.db"), performers=PERFORMERS,
    flows=[publish_image],
)


async def main() -> int:
    runs = [await app.start(publish_image, {"image": name}, id=f"img-{name}") for name in ("cat.png", "dog.png")]
    while await app.drain():
        pass
    finished = [await app.get_run(run.id) for run in runs]
    for done in finished:
        print(f"run {done.id}: {done.state}")
        for name, node in done.nodes.items():
            print(f"  {name:<10} {node.state:<10} {node.result}")
    await app.close()
    return 0 if all(done.state == "succeeded" for done in finished) else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
