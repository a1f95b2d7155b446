"""The jobs of the FastAPI example: one performer, on the store of ``$JOBLOOM_URL`` (default ./jobloom.db)."""

from __future__ import annotations

import os

from pydantic import BaseModel

import jobloom


class Signup(BaseModel):
    email: str
    name: str


class Welcome(jobloom.Performer[Signup, str]):
    rate_limit = "20/s"

    async def perform(self, payload: Signup) -> str:
        return f"welcome mail sent to {payload.name} <{payload.email}>"


app = jobloom.App(os.environ.get("JOBLOOM_URL", "sqlite:///jobloom.db"), performers=[Welcome])
