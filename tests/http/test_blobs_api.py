"""The API of an app with a blob store: a job read alone shows its offloaded payload and result (the
server reads the blobs); a list shows each as the string of its reference."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import jobloom
from jobloom.blobs import Directory
from jobloom.core.blobref import PREFIX, parse_ref
from jobloom.http.factory import create_fastapi
from jobloom.http.tokens import create_token
from tests.helpers import eventually_sync
from tests.http.conftest import httpx
from tests.http.server import serving


class Shout(jobloom.Performer[dict[str, Any], dict[str, Any]]):
    async def perform(self, payload: dict[str, Any]) -> dict[str, Any]:
        return {"loud": payload["text"].upper()}


def test_one_job_is_resolved_and_a_list_shows_references(store_url: str, tmp_path: Path) -> None:
    app = jobloom.App(store_url, performers=[Shout], blobs=Directory(tmp_path / "blobs"), offload_over=1024)
    app.run_sync(app.migrate())
    token, _ = app.run_sync(_token(app))
    h = {"Authorization": f"Bearer {token}"}
    text = "q" * 5000
    waited: list[Any] = []
    try:
        api = create_fastapi(app, auth="required", token_ttl=0.0)
        waits = api.state.jobloom.waits
        with serving(api) as url, httpx.Client(base_url=url, timeout=30) as client:
            r = client.post("/v1/jobs", json={"binding": "Shout", "payload": {"text": text}}, headers=h)
            assert r.status_code == 201, r.text
            job = r.json()
            assert job["payload"] == {"text": text}
            waiting = threading.Thread(target=lambda: waited.append(
                client.get(f"/v1/jobs/{job['id']}/wait", params={"timeout": 60}, headers=h).json()))
            waiting.start()  # the long poll reads the job as a row when it ends: the blobs are read then
            eventually_sync(lambda: waits.rounds >= 1, timeout=30, what="the wait to read the job once")
            assert app.run_sync(app.drain()) == 1
            waiting.join(timeout=90)
            assert waited[0]["payload"] == {"text": text} and waited[0]["result"] == {"loud": text.upper()}
            one = client.get(f"/v1/jobs/{job['id']}", headers=h).json()
            assert one["payload"] == {"text": text} and one["result"] == {"loud": text.upper()}
            [listed] = client.get("/v1/jobs", headers=h).json()["jobs"]
            assert listed["payload"].startswith(PREFIX) and listed["result"].startswith(PREFIX)
            ref = parse_ref(listed["payload"])
            assert ref is not None and ref.size == len('{"text":""}') + 5000
    finally:
        app.close_sync()
        asyncio.set_event_loop(None)


async def _token(app: jobloom.App) -> tuple[str, Any]:
    return await create_token(await app.store(), "tok", "admin")
