"""Performers and flows used by the flow and step conformance tests."""

from __future__ import annotations

import asyncio
from typing import Any

import jobloom

calls: dict[str, int] = {}


def count(name: str) -> None:
    calls[name] = calls.get(name, 0) + 1


class Analyze(jobloom.Performer[dict[str, Any], dict[str, Any]]):
    async def perform(self, payload: dict[str, Any]) -> dict[str, Any]:
        count("analyze")
        return {"image": payload["image"], "width": 640, "sizes": [64, 128, 256]}


class Thumbnail(jobloom.Performer[dict[str, Any], str]):
    async def perform(self, payload: dict[str, Any]) -> str:
        count("thumbnail")
        if payload.get("fail"):
            raise jobloom.Permanent("thumbnail service refused")
        return f"thumb-{payload['image']}-{payload.get('size', 'x')}"


class SaveMeta(jobloom.Performer[dict[str, Any], dict[str, Any]]):
    async def perform(self, payload: dict[str, Any]) -> dict[str, Any]:
        count("metadata")
        return {"saved": payload["width"]}


class Publish(jobloom.Performer[dict[str, Any], str]):
    async def perform(self, payload: dict[str, Any]) -> str:
        count("publish")
        return f"published {payload['thumb']} with {payload['meta']}"


class Resize(jobloom.Performer[int, int]):
    async def perform(self, payload: int) -> int:
        count("resize")
        if payload < 0:
            raise jobloom.Permanent("negative size")
        return payload * 2


class Collect(jobloom.Performer[dict[str, Any], dict[str, Any]]):
    async def perform(self, payload: dict[str, Any]) -> dict[str, Any]:
        return payload


class Slowish(jobloom.Performer[dict[str, Any], None]):
    async def perform(self, payload: dict[str, Any]) -> None:
        await asyncio.sleep(float(payload.get("seconds", 5)))


def image_flow() -> jobloom.Flow:
    flow = jobloom.Flow("publish-image")
    analyze = flow.node("analyze", Analyze, input=lambda inp, up: inp)
    thumb = flow.node("thumbnail", Thumbnail, after=[analyze],
                      input=lambda inp, up: {"image": up["analyze"]["image"], "fail": inp.get("fail_thumb", False)})
    meta = flow.node("metadata", SaveMeta, after=[analyze], input=lambda inp, up: {"width": up["analyze"]["width"]})
    flow.node("publish", Publish, after=[thumb, meta],
              input=lambda inp, up: {"thumb": up["thumbnail"], "meta": up["metadata"]})
    return flow


def fanout_flow() -> jobloom.Flow:
    flow = jobloom.Flow("fan-out")
    analyze = flow.node("analyze", Analyze)
    sizes = flow.map("resize", Resize, after=[analyze], over=lambda inp, up: inp.get("sizes", up["analyze"]["sizes"]))
    flow.node("collect", Collect, after=[sizes], input=lambda inp, up: up["resize"])
    return flow


def parent_flow(child: jobloom.Flow) -> jobloom.Flow:
    flow = jobloom.Flow("parent")
    sub = flow.subflow("child", child, input=lambda inp, up: {"image": inp["image"]})
    flow.node("after", Collect, after=[sub], input=lambda inp, up: {"child": up["child"]["publish"]})
    return flow


PERFORMERS = [Analyze, Thumbnail, SaveMeta, Publish, Resize, Collect, Slowish]
