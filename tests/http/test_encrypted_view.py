"""The API and the dashboard of an app without the key show encrypted content as "encrypted" (not an
error page, not ciphertext), and the content itself where the key is configured."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import httpx

import jobloom
from jobloom.codecs import Encrypted, new_key
from jobloom.http.tokens import create_token
from jobloom.web import asgi
from tests.http.server import serving

MARK = "Okapi-Secret-51c2"
KEY = new_key()


class Note(jobloom.Performer[dict[str, Any], dict[str, Any]]):
    async def perform(self, payload: dict[str, Any]) -> dict[str, Any]:
        await self.step("seen", lambda: {"seen": MARK + "-step"})
        return {"done": MARK + "-result"}


def _app(url: str, codec: Any = None) -> jobloom.App:
    return jobloom.App(url, performers=[Note], auto_migrate=True, codec=codec)


async def _token(app: jobloom.App) -> str:
    token, _ = await create_token(await app.store(), f"viewer-{id(app)}", "read")
    return token


def _pages(app: jobloom.App, job_id: int) -> tuple[dict[str, Any], str]:
    """The API's view of the job and the dashboard's job page (logged in with a read token), served by ``app``."""
    token = app.run_sync(_token(app))
    with serving(asgi(app, token_ttl=0.0)) as url, httpx.Client(base_url=url, timeout=30) as client:
        api = client.get(f"/v1/jobs/{job_id}", headers={"Authorization": f"Bearer {token}"})
        form = client.get("/login")
        found = re.search(r'name="csrf" value="([^"]+)"', form.text)
        assert found is not None, form.text[:500]
        client.post("/login", data={"token": token, "csrf": found.group(1), "next": "/"})
        page = client.get(f"/jobs/{job_id}")
    assert api.status_code == 200 and page.status_code == 200, (api.text, page.text[:500])
    return api.json(), page.text


def test_without_the_key_content_reads_as_encrypted(store_url: str) -> None:
    keyed = _app(store_url, Encrypted(keys=[KEY]))
    try:
        job = keyed.run_sync(keyed.enqueue(Note, {"text": MARK}))
        keyed.run_sync(keyed.drain())
        shown, page = _pages(keyed, job.id)
        assert shown["payload"] == {"text": MARK} and shown["result"] == {"done": MARK + "-result"}
        assert MARK in page and MARK + "-step" in page and "jlenc1:" not in page
    finally:
        keyed.close_sync()
    asyncio.set_event_loop(None)
    keyless = _app(store_url)  # `jobloom serve` started without the codec
    try:
        shown, page = _pages(keyless, job.id)
        assert shown["payload"] == "encrypted" and shown["result"] == "encrypted"
        assert shown["state"] == "succeeded"  # what is not content still shows
        assert "encrypted" in page and MARK not in page and "jlenc1:" not in page
    finally:
        keyless.close_sync()
    asyncio.set_event_loop(None)
