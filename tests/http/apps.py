"""The app the HTTP tests serve: typed payloads, a flow and a schedule."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

import jobloom


class Email(BaseModel):
    to: str
    subject: str = ""


class SendMail(jobloom.Performer[Email, dict[str, Any]]):
    async def perform(self, payload: Email) -> dict[str, Any]:
        return {"sent": payload.to}


class Echo(jobloom.Performer[Any, Any]):
    async def perform(self, payload: Any) -> Any:
        return payload


class Waits(jobloom.Performer[dict[str, Any], Any]):
    async def perform(self, payload: dict[str, Any]) -> Any:
        return await self.wait_for_event("go", timeout=60)


def make_flow() -> jobloom.Flow:
    flow = jobloom.Flow("greet")
    first = flow.node("first", Echo)
    flow.node("second", Echo, after=[first], input=lambda inp, up: {"got": up["first"]})
    return flow


def make_app(url: str, extra: tuple[Any, ...] = ()) -> jobloom.App:
    return jobloom.App(
        url, performers=[SendMail, Echo, Waits, jobloom.RemoteBinding("Render", concurrency=1), *extra],
        flows=[make_flow()],
        schedules=[jobloom.Schedule("hourly", every=3600, performer=Echo, payload={"tick": True})],
    )
