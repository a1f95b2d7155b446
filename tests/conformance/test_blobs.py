"""Large payloads offloaded to a blob store, on every store: a 20 MB payload and result round-trip, a
small one stays in its row, deletion and retention remove the blobs, and the sweeper removes blobs
no row refers to (the test clock), among them one a process killed before its commit left."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import jobloom
from jobloom.blobs import Directory
from jobloom.core.blobref import PREFIX, parse_ref
from jobloom.engine.performer import MAX_PAYLOAD_BYTES
from jobloom.housekeeping.blobs import sweep
from jobloom.housekeeping.retention import prune
from jobloom.store.base import Tx
from jobloom.testing import TestClock

MB20 = 20 * 1000 * 1000
OVER = 64 * 1024
SRC = str(Path(jobloom.__file__).resolve().parent.parent)


class Big(jobloom.Performer[dict[str, Any], dict[str, Any]]):
    """Echoes the payload's text with one more character, and its length."""

    async def perform(self, payload: dict[str, Any]) -> dict[str, Any]:
        text = payload["data"]
        return {"data": text + "!", "seen": len(text)}


class Small(jobloom.Performer[dict[str, Any], int]):
    async def perform(self, payload: dict[str, Any]) -> int:
        return len(payload["data"])


class Stepper(jobloom.Performer[dict[str, Any], int]):
    """A step with a 100 kB result, then a retry: the second attempt reads the step back."""

    max_attempts = 2
    made = 0

    async def perform(self, payload: dict[str, Any]) -> int:
        def make() -> str:
            Stepper.made += 1
            return "s" * 100_000

        value = await self.step("big", make)
        if self.ctx.attempt == 1:
            raise jobloom.Retry(after=0)
        return len(value)


def files(folder: Path) -> list[str]:
    """The blobs in a Directory's folder (not its temporary files)."""
    return sorted(p.name for p in folder.glob("*/*") if not p.name.endswith(".tmp"))


async def raw_job(app: jobloom.App, job_id: int) -> tuple[str, str | None]:
    """A job's payload and result as its row keeps them."""
    store = await app.store()

    async def work(tx: Tx) -> Any:
        return await tx.fetchone("get_job", {"id": job_id})

    row = await store.transact(work, exclusive=False)
    return row.payload, row.result


async def advance(app: jobloom.App) -> None:
    """A minute of the app's test clock: jobs and their retries run."""
    assert isinstance(app.clock, TestClock)
    await app.clock.advance(60)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return tmp_path / "blobs"


@pytest.fixture
async def app(store_url: str, folder: Path) -> AsyncIterator[jobloom.App]:
    app = jobloom.App(store_url, performers=[Big, Small, Stepper], auto_migrate=True, blobs=Directory(folder),
                      offload_over=OVER, clock=TestClock())
    yield app
    await app.close()


async def test_a_20_mb_payload_and_result_round_trip(app: jobloom.App, folder: Path) -> None:
    text = "x" * MB20
    job = await app.enqueue(Big, {"data": text})
    assert job.payload["data"] == text  # the caller's job shows its payload, not the reference
    stored, _ = await raw_job(app, job.id)
    ref = parse_ref(stored)
    assert ref is not None and ref.size == MB20 + len('{"data":""}') and files(folder) == [ref.id]
    await app.drain()
    done = await app.get_job(job.id)
    assert done.state == "succeeded"
    assert done.payload["data"] == text
    assert done.result == {"data": text + "!", "seen": MB20}
    _, result = await raw_job(app, job.id)
    assert result is not None and result.startswith(PREFIX) and len(result) < 100
    assert len(files(folder)) == 2
    waited = await app.wait(job.id, timeout=5)
    assert waited.result["seen"] == MB20


async def test_under_the_threshold_stays_in_the_row(app: jobloom.App, folder: Path) -> None:
    at_limit = "a" * (OVER - len('{"data":""}'))
    kept = await app.enqueue(Small, {"data": at_limit})
    over = await app.enqueue(Small, {"data": at_limit + "b"})
    assert (await raw_job(app, kept.id))[0] == '{"data":"' + at_limit + '"}'
    assert (await raw_job(app, over.id))[0].startswith(PREFIX)
    assert len(files(folder)) == 1
    [listed] = [j for j in await app.list_jobs() if j.id == over.id]
    with pytest.raises(jobloom.PayloadOffloaded, match=f"app.get_job\\({over.id}\\)"):
        listed.payload  # noqa: B018 - a list does not read blobs
    await app.drain()
    assert (await app.get_job(over.id)).result == len(at_limit) + 1
    assert len(files(folder)) == 1  # a small result stays in its row


async def test_the_128_kib_limit_holds_only_without_a_blob_store(app: jobloom.App, store_url: str) -> None:
    payload = {"data": "z" * (MAX_PAYLOAD_BYTES + 1)}
    plain = jobloom.App(store_url, performers=[Small], auto_migrate=True)
    try:
        with pytest.raises(jobloom.PayloadTooLarge, match="the limit is 131072 bytes"):
            await plain.enqueue(Small, payload)
    finally:
        await plain.close()
    job = await app.enqueue(Small, payload)
    await app.drain()
    assert (await app.get_job(job.id)).result == MAX_PAYLOAD_BYTES + 1


async def test_enqueue_many_and_a_callers_transaction_offload_too(app: jobloom.App, folder: Path) -> None:
    big = {"data": "m" * (OVER + 1)}
    jobs = await app.enqueue_many([(Small, big), (Small, {"data": "small"}), (Small, big)])
    assert [j.payload == big for j in jobs] == [True, False, True]
    assert len(files(folder)) == 2
    await app.drain()
    assert [(await app.get_job(j.id)).result for j in jobs] == [OVER + 1, 5, OVER + 1]


async def test_step_results_are_offloaded_and_read_back(app: jobloom.App, folder: Path) -> None:
    Stepper.made = 0
    job = await app.enqueue(Stepper, {})
    await advance(app)
    done = await app.get_job(job.id)
    assert done.state == "succeeded" and done.result == 100_000 and Stepper.made == 1
    store = await app.store()
    steps = await store.transact(lambda tx: tx.fetch("get_steps", {"job_id": job.id}), exclusive=False)
    assert [r.result.startswith(PREFIX) for r in steps] == [True]
    assert len(files(folder)) == 1


async def test_delete_removes_the_blobs(app: jobloom.App, folder: Path) -> None:
    big = {"data": "d" * (OVER + 1)}
    one = await app.enqueue(Big, big)  # payload and result offloaded
    many = [await app.enqueue(Small, big) for _ in range(3)]
    stepped = await app.enqueue(Stepper, {})
    newest = await app.enqueue(Big, {"data": ""})  # on SQLite the newest job is never deleted
    await advance(app)
    assert len(files(folder)) == 6
    await app.delete(one.id)
    assert len(files(folder)) == 4
    await app.delete(stepped.id)
    assert len(files(folder)) == 3
    deleted = await app.delete_many(jobloom.JobFilter(binding="Small"))
    assert deleted == 3 and files(folder) == []
    assert newest.id not in [m.id for m in many]


async def test_retention_removes_the_blobs(app: jobloom.App, folder: Path) -> None:
    big = {"data": "r" * (OVER + 1)}
    jobs = [await app.enqueue(Big, big) for _ in range(2)]
    await app.enqueue(Small, {"data": ""}, delay=3600)  # unfinished: kept
    await app.drain()
    assert len(files(folder)) == 4
    deleted, _ = await prune(await app.store(), app.specs, app.now() + 2 * 86400, offload=app.offload)
    assert deleted == 2 and files(folder) == []
    for job in jobs:
        with pytest.raises(jobloom.JobNotFound):
            await app.get_job(job.id)


async def test_a_remote_worker_gets_the_payload_and_may_send_a_large_result(store_url: str, folder: Path) -> None:
    app = jobloom.App(store_url, performers=[jobloom.RemoteBinding("Far", payload=dict, result=dict)],
                      auto_migrate=True, blobs=Directory(folder), offload_over=OVER)
    try:
        text = "f" * (OVER * 3)
        job = await app.enqueue("Far", {"data": text})
        [claimed] = await app.remote_claim("w1", ["Far"], 1)
        assert claimed.payload == {"data": text}
        assert await app.remote_complete("w1", job.id, claimed.attempt, "succeeded", {"back": text},
                                         claim=claimed.claim)
        assert (await raw_job(app, job.id))[1].startswith(PREFIX)  # type: ignore[union-attr]
        assert (await app.get_job(job.id)).result == {"back": text}
        assert len(files(folder)) == 2
    finally:
        await app.close()


async def test_the_sweeper_removes_old_unreferenced_blobs_only(store_url: str, folder: Path) -> None:
    clock = TestClock()
    app = jobloom.App(store_url, performers=[Small], auto_migrate=True, blobs=Directory(folder), offload_over=OVER,
                      clock=clock)
    try:
        assert app.offload is not None
        grace = app.offload.grace
        held = await app.enqueue(Small, {"data": "h" * (OVER + 1)}, delay=10 * grace)  # referenced, not run
        old = parse_ref(await app.offload.put("o" * (OVER + 1)))  # a blob whose row never committed
        assert old is not None
        clock.jump(grace - 1)
        await app.drain()  # the sweeper's first pass: nothing is old enough yet
        assert len(files(folder)) == 2
        clock.jump(3600)  # the sweeper's next pass (hourly)
        young = parse_ref(await app.offload.put("y" * (OVER + 1)))
        assert young is not None
        await app.drain()
        held_ref = parse_ref((await raw_job(app, held.id))[0])
        assert held_ref is not None
        assert files(folder) == sorted([held_ref.id, young.id])
        assert (await app.get_job(held.id)).payload == {"data": "h" * (OVER + 1)}
    finally:
        await app.close()


CRASHING = textwrap.dedent('''
    import asyncio, os, sqlite3, sys
    import jobloom
    from jobloom.blobs import Directory
    from jobloom.store.sqlite.store import sqlite_path

    class Small(jobloom.Performer[dict, int]):
        async def perform(self, payload):
            return 0

    async def main(url, folder):
        app = jobloom.App(url, performers=[Small], blobs=Directory(folder), offload_over=65536)
        await app.store()
        if url.startswith("sqlite:"):
            conn = sqlite3.connect(sqlite_path(url))
        else:
            import psycopg
            conn = await psycopg.AsyncConnection.connect(url)
        # the blob is written and the row inserted in the caller's transaction, which never commits
        await app.enqueue(Small, {"data": "c" * 70000}, connection=conn)
        print("written", flush=True)
        await asyncio.sleep(3600)

    asyncio.run(main(sys.argv[1], sys.argv[2]))
''')


async def test_a_process_killed_between_blob_and_commit_leaves_a_blob_the_sweeper_removes(
    store_url: str, folder: Path
) -> None:
    env = {**os.environ, "PYTHONPATH": SRC}
    child = subprocess.Popen([sys.executable, "-c", CRASHING, store_url, str(folder)], env=env,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "written"  # blocks until the hook point: no race
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.kill()
        child.wait(timeout=30)
        if child.stdout is not None:
            child.stdout.close()
    assert child.returncode == -signal.SIGKILL
    [orphan] = files(folder)
    clock = TestClock()
    app = jobloom.App(store_url, performers=[Small], auto_migrate=True, blobs=Directory(folder), offload_over=OVER,
                      clock=clock)
    try:
        assert await app.list_jobs() == []  # the row never committed
        await app.drain()
        assert files(folder) == [orphan]  # younger than the grace period: kept (its commit could be on the way)
        assert app.offload is not None
        clock.jump(app.offload.grace + 1)
        await app.drain()
        assert files(folder) == []
    finally:
        await app.close()


SEEN: list[tuple[int, int]] = []


class Told(jobloom.Performer[dict[str, Any], dict[str, Any]]):
    async def perform(self, payload: dict[str, Any]) -> dict[str, Any]:
        return {"back": payload["data"]}

    async def on_success(self, payload: dict[str, Any], result: dict[str, Any]) -> None:
        SEEN.append((len(payload["data"]), len(result["back"])))


async def test_a_success_hook_gets_the_offloaded_payload_and_result(store_url: str, folder: Path) -> None:
    SEEN.clear()
    app = jobloom.App(store_url, performers=[Told], auto_migrate=True, blobs=Directory(folder), offload_over=OVER)
    try:
        await app.enqueue(Told, {"data": "t" * (OVER * 2)})
        await app.drain()
        assert SEEN == [(OVER * 2, OVER * 2)] and len(files(folder)) == 2
    finally:
        await app.close()


class Length(jobloom.Performer[dict[str, Any], int]):
    async def perform(self, payload: dict[str, Any]) -> int:
        return len(payload["data"]["data"])


async def test_a_flows_large_results_stay_in_their_rows_for_the_next_node(store_url: str, folder: Path) -> None:
    flow = jobloom.Flow("grow")
    grow = flow.node("grow", Big, input=lambda inp, up: inp)
    flow.node("length", Length, after=[grow], input=lambda inp, up: {"data": up["grow"]})
    app = jobloom.App(store_url, performers=[Big, Length], flows=[flow], auto_migrate=True, blobs=Directory(folder),
                      offload_over=OVER)
    try:
        run = await app.start(flow, {"data": "g" * (OVER * 2)})
        while await app.drain():
            pass
        done = await app.get_run(run.id)
        assert done.state == "succeeded" and done.nodes["length"].result == OVER * 2 + 1
        assert files(folder) == []
    finally:
        await app.close()


async def test_with_a_codec_the_blob_holds_ciphertext_and_the_row_a_plain_reference(
    store_url: str, folder: Path
) -> None:
    from jobloom.codecs import Encrypted, new_key

    app = jobloom.App(store_url, performers=[Big, Stepper], auto_migrate=True, blobs=Directory(folder),
                      offload_over=OVER, codec=Encrypted(keys=[new_key()]), clock=TestClock())
    try:
        secret = "secret-" * (OVER // 4)
        job = await app.enqueue(Big, {"data": secret})
        stepped = await app.enqueue(Stepper, {})
        await advance(app)
        payload, result = await raw_job(app, job.id)
        assert parse_ref(payload) is not None and parse_ref(result) is not None  # plain: SQL finds them
        blobs = [p for p in folder.glob("*/*")]
        assert len(blobs) == 3  # payload, result, step result
        for path in blobs:
            data = path.read_bytes()
            assert data.startswith(b'"jlenc1:') and b"secret-" not in data and b"sssss" not in data
        done = await app.get_job(job.id)
        assert done.payload == {"data": secret} and done.result == {"data": secret + "!", "seen": len(secret)}
        assert (await app.get_job(stepped.id)).result == 100_000
        assert app.offload is not None
        clock = app.clock
        assert isinstance(clock, TestClock)
        clock.jump(app.offload.grace + 1)
        deleted, _ = await sweep(await app.store(), app.offload, clock.now() + app.offload.grace + 1)
        assert deleted == 0 and len(files(folder)) == 3  # every blob is referenced
    finally:
        await app.close()


async def test_a_debounced_payload_keeps_its_blob_and_a_held_unique_key_drops_the_new_one(
    app: jobloom.App, folder: Path
) -> None:
    first, second = {"data": "1" * (OVER + 1)}, {"data": "2" * (OVER + 1)}
    a = await app.enqueue(Small, first, debounce=10, debounce_key="k")
    b = await app.enqueue(Small, second, debounce=10, debounce_key="k")  # collapses into a: its payload now
    assert a.id == b.id and b.payload == second
    assert len(files(folder)) == 2  # the first payload's blob is unreferenced now: the sweeper's
    held = await app.enqueue(Small, first, unique_key="u")
    again = await app.enqueue(Small, second, unique_key="u")  # the key's holder keeps its payload
    assert again.id == held.id
    assert len(files(folder)) == 3
    assert app.offload is not None and isinstance(app.clock, TestClock)
    deleted, _ = await sweep(await app.store(), app.offload, app.now() + app.offload.grace + 1)
    assert deleted == 1 and len(files(folder)) == 2
    assert app.clock is not None
    await app.clock.advance(60)
    assert (await app.get_job(a.id)).result == OVER + 1
    assert (await app.get_job(a.id)).payload == second
    assert (await app.get_job(held.id)).payload == first
