"""The jobs of the Flask example, on the store of ``$JOBLOOM_URL`` (default ./jobloom.db)."""

from __future__ import annotations

import os
from dataclasses import dataclass

import jobloom


@dataclass
class Address:
    email: str


class Welcome(jobloom.Performer[Address, str]):
    def perform(self, payload: Address) -> str:
        return f"welcome mail sent to {payload.email}"


app = jobloom.App(os.environ.get("JOBLOOM_URL", "sqlite:///jobloom.db"), performers=[Welcome])
