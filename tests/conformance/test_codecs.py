"""Encrypted payloads on every store: nothing of a job's content is stored in plaintext (read from the raw
database file, its WAL, and raw PostgreSQL rows), keys rotate, `reencrypt` rewrites old rows safely, and
content that no configured key opens is a clear error for a worker and "encrypted" for a reader."""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

import pytest

import jobloom
from jobloom.app.reencrypt import _KINDS, ReencryptReport, _changes, _reader, _writer, reencrypt
from jobloom.codecs import Encrypted, InvalidKey, is_encrypted, key_id, new_key
from jobloom.core.extras import MissingExtra

MARK = "Zebra-Plaintext-7f3a"  # what must never reach the database in clear

OLD, NEW, OTHER = new_key(), new_key(), new_key()


class Child(jobloom.Performer[dict[str, Any], dict[str, Any]]):
    async def perform(self, payload: dict[str, Any]) -> dict[str, Any]:
        return {"child": payload["secret"] + "-child"}


class Secretive(jobloom.Performer[dict[str, Any], dict[str, Any]]):
    async def perform(self, payload: dict[str, Any]) -> dict[str, Any]:
        step = await self.step("lookup", lambda: {"step": payload["secret"] + "-step"})
        child = await self.call(Child, {"secret": payload["secret"]}, name="child")
        event = await self.wait_for_event("approval")
        return {"result": payload["secret"] + "-result", "step": step, "child": child, "event": event}


class Echo(jobloom.Performer[dict[str, Any], dict[str, Any]]):
    async def perform(self, payload: dict[str, Any]) -> dict[str, Any]:
        return {"echo": payload}


PERFORMERS = [Secretive, Child, Echo]


def _flow() -> jobloom.Flow:
    flow = jobloom.Flow("secret-flow")
    first = flow.node("first", Echo)
    flow.node("second", Echo, after=[first], input=lambda inp, up: {"up": up["first"]})
    return flow


def make_app(url: str, *keys: str) -> jobloom.App:
    codec = Encrypted(keys=list(keys)) if keys else None
    return jobloom.App(url, performers=PERFORMERS, flows=[_flow()], auto_migrate=True, codec=codec)


async def drain_all(app: jobloom.App) -> None:
    for _ in range(10):
        if not await app.drain():
            return


async def _run_everything(app: jobloom.App) -> tuple[int, str]:
    """A job with a step, a call and an event; a flow run: all carrying MARK. (job id, run id)."""
    job = await app.enqueue(Secretive, {"secret": MARK})
    await drain_all(app)
    assert (await app.get_job(job.id)).state == "scheduled"  # waits for its event
    assert await app.send_event(job.id, "approval", {"by": MARK + "-event"}) is True
    run = await app.start(app.flows["secret-flow"], {"input": MARK + "-run"}, id="secret-run")
    await drain_all(app)
    return job.id, run.id


def _raw_texts(url: str) -> list[bytes]:
    """The raw bytes where the store keeps the content: the SQLite file and its WAL, or PostgreSQL's rows."""
    if url.startswith("sqlite"):
        path = Path(url.removeprefix("sqlite:///"))
        files = [path, Path(f"{path}-wal")]
        return [f.read_bytes() for f in files if f.exists()]
    import psycopg

    out = []
    with psycopg.connect(url, autocommit=True) as conn:
        for sql in ("SELECT payload, result FROM jobloom_jobs", "SELECT name, result FROM jobloom_steps",
                    "SELECT name, data FROM jobloom_signals", "SELECT id, input FROM jobloom_runs"):
            for row in conn.execute(sql).fetchall():
                out += [str(v).encode() for v in row if v is not None]
    return out


def _stored(url: str) -> list[str]:
    """Every stored payload, result, step result, event data and run input (not empty)."""
    import sqlite3

    queries = ("SELECT payload FROM jobloom_jobs", "SELECT result FROM jobloom_jobs",
               "SELECT result FROM jobloom_steps WHERE name LIKE 'step:%'", "SELECT data FROM jobloom_signals",
               "SELECT input FROM jobloom_runs")
    if url.startswith("sqlite"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
            return [r[0] for q in queries for r in conn.execute(q).fetchall() if r[0]]
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return [r[0] for q in queries for r in conn.execute(q).fetchall() if r[0]]


async def test_no_plaintext_reaches_the_database(store_url: str) -> None:
    app = make_app(store_url, NEW)
    try:
        job_id, run_id = await _run_everything(app)
        done = await app.get_job(job_id)
        assert done.state == "succeeded", done.error
        assert done.payload == {"secret": MARK}
        assert done.result == {"result": MARK + "-result", "step": {"step": MARK + "-step"},
                               "child": {"child": MARK + "-child"}, "event": {"by": MARK + "-event"}}
        run = await app.get_run(run_id)
        assert run.state == "succeeded" and run.input == {"input": MARK + "-run"}
        assert run.nodes["second"].result == {"echo": {"up": {"echo": {"input": MARK + "-run"}}}}
        raw = _raw_texts(store_url)  # while the app is open: the WAL holds the latest pages
        assert raw and not any(MARK.encode() in blob for blob in raw)
    finally:
        await app.close()
    assert not any(MARK.encode() in blob for blob in _raw_texts(store_url))
    stored = _stored(store_url)
    assert len(stored) >= 8 and all(is_encrypted(text) for text in stored), stored


async def test_rotation_then_reencrypt_leaves_only_the_new_key(store_url: str) -> None:
    plain = make_app(store_url)  # before encryption was turned on
    try:
        first = await plain.enqueue(Echo, {"n": MARK})
    finally:
        await plain.close()
    old = make_app(store_url, OLD)
    try:
        job_id, _ = await _run_everything(old)
        second = await old.enqueue(Echo, {"n": 2})  # still queued when the keys change
    finally:
        await old.close()
    rotated = make_app(store_url, NEW, OLD)  # the new key first, the old one still decrypts
    try:
        assert (await rotated.get_job(job_id)).payload == {"secret": MARK}
        await rotated.drain()
        assert (await rotated.get_job(second.id)).result == {"echo": {"n": 2}}
        report = await reencrypt(rotated, batch=2)
        assert report.failed == [] and report.changed_meanwhile == 0
        assert report.rewritten["payloads"] >= 4 and report.rewritten["steps"] == 1
        assert report.rewritten["events"] == 1 and report.rewritten["runs"] == 1
        assert (await reencrypt(rotated)).total == 0  # again: nothing left to do
    finally:
        await rotated.close()
    stored = _stored(store_url)
    new_id = key_id(base64.b64decode(NEW))
    assert all(text.startswith(f'"jlenc1:{new_id}:') for text in stored), stored
    only_new = make_app(store_url, NEW)
    try:
        assert (await only_new.get_job(job_id)).result["step"] == {"step": MARK + "-step"}
        assert (await only_new.get_job(first.id)).result == {"echo": {"n": MARK}}
        assert (await only_new.get_run("secret-run")).input == {"input": MARK + "-run"}
    finally:
        await only_new.close()


async def test_a_worker_without_the_key_fails_the_job_with_a_clear_error(store_url: str) -> None:
    writer = make_app(store_url, OLD)
    try:
        job = await writer.enqueue(Echo, {"n": MARK})
    finally:
        await writer.close()
    wrong = make_app(store_url, OTHER)
    try:
        await wrong.drain()
        failed = await wrong.get_job(job.id)
        assert failed.state in ("scheduled", "failed")
        assert failed.error is not None and f"payload of job {job.id}" in failed.error
        assert key_id(base64.b64decode(OLD)) in failed.error and "not among the configured keys" in failed.error
        assert failed.payload == "encrypted"  # a reader without the key sees the word, not ciphertext
        report = await reencrypt(wrong)  # nothing that no key opens is rewritten, and it is named
        assert report.total == 0 and any(f"payload of job {job.id}" in p for p in report.failed)
    finally:
        await wrong.close()
    keyless = make_app(store_url)
    try:
        assert (await keyless.get_job(job.id)).payload == "encrypted"
    finally:
        await keyless.close()


async def test_reencrypt_never_overwrites_a_row_that_changed_meanwhile(store_url: str) -> None:
    old = make_app(store_url, OLD)
    try:
        job = await old.enqueue(Echo, {"n": 1})
    finally:
        await old.close()
    app = make_app(store_url, NEW, OLD)
    try:
        store, kind = await app.store(), _KINDS[0]
        rows = await store.transact(_reader(kind, (0, ""), 10), exclusive=False)
        changes = _changes(app.codec, kind, rows, ReencryptReport())
        assert [c["id"] for c in changes] == [job.id]
        await app.drain()  # meanwhile a worker runs the job; then its payload changes under the command
        async def rewrite(tx: Any) -> int:
            return await tx.execute(kind.update, {"id": job.id, "name": "", "old": rows[0].value,
                                                  "new": app.codec.encode('{"n": 99}')})
        assert await store.transact(rewrite) == 1
        assert await store.transact(_writer(kind, changes)) == 0  # the stale rewrite is refused
        assert (await app.get_job(job.id)).payload == {"n": 99}
    finally:
        await app.close()


def test_keys_are_checked_when_the_codec_is_made() -> None:
    good = new_key()
    with pytest.raises(InvalidKey, match="key 0 is 5 bytes"):
        Encrypted(keys=[b"short"])
    with pytest.raises(InvalidKey, match="key 1 is not base64"):
        Encrypted(keys=[good, "not base64 at all!"])
    with pytest.raises(InvalidKey, match="key 1 must be bytes or base64 text, not int"):
        Encrypted(keys=[good, 42])  # type: ignore[list-item]
    with pytest.raises(InvalidKey, match="non-empty list"):
        Encrypted(keys=[])
    with pytest.raises(InvalidKey, match="non-empty list"):
        Encrypted(keys=good)  # type: ignore[arg-type]
    raw = os.urandom(32)
    both = Encrypted(keys=[raw, good])
    assert both.key_ids == [key_id(raw), key_id(base64.b64decode(good))]
    sealed = both.encode('{"a": 1}')
    assert sealed != both.encode('{"a": 1}')  # a random nonce each time
    assert Encrypted(keys=[good, raw]).decode(sealed, "x") == '{"a": 1}'


def test_a_damaged_ciphertext_is_an_error_naming_it() -> None:
    codec = Encrypted(keys=[NEW])
    sealed = codec.encode('{"a": 1}')
    damaged = sealed[:-6] + ("A" if sealed[-6] != "A" else "B") + sealed[-5:]
    with pytest.raises(jobloom.codecs.CodecError, match="payload of job 7 cannot be decrypted"):
        codec.decode(damaged, "payload of job 7")


def test_a_missing_cryptography_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "cryptography.hazmat.primitives.ciphers.aead", None)
    with pytest.raises(MissingExtra, match=r"pip install 'jobloom\[encryption\]'"):
        Encrypted(keys=[NEW])


async def test_a_batch_callback_gets_its_counts_merged_into_its_encrypted_payload(store_url: str) -> None:
    app = make_app(store_url, NEW)
    try:
        batch = await app.batch([(Echo, {"n": i}) for i in range(3)], on_complete=(Echo, {"secret": MARK}))
        await drain_all(app)
        done = await app.get_batch(batch.id)
        callback = await app.get_job(done.on_complete) if done.on_complete else None
        assert callback is not None and callback.state == "succeeded", callback
        assert callback.payload == {"secret": MARK, "batch": batch.id, "total": 3, "succeeded": 3, "failed": 0,
                                    "cancelled": 0}
        assert not any(MARK.encode() in blob for blob in _raw_texts(store_url))
    finally:
        await app.close()


def test_app_refuses_a_codec_that_is_not_one(sqlite_url: str) -> None:
    with pytest.raises(jobloom.InvalidOption, match=r"invalid codec: \['.*'\]; expected a jobloom.codecs.Codec"):
        jobloom.App(sqlite_url, performers=PERFORMERS, codec=[NEW])  # type: ignore[arg-type]
    assert jobloom.App(sqlite_url, performers=PERFORMERS).codec is jobloom.codecs.IDENTITY
