"""Push performers on every store: a real HTTP receiver on a loopback port, a real worker in this process.

What the receiver answers decides each attempt: 2xx succeeds with the body as result, 429/503 retry at
Retry-After, other 4xx fail at once, 5xx, timeouts and connection errors are retried with backoff;
every request is signed so that the receiver can tell a tampered one.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import socket
import time
from collections.abc import AsyncIterator
from email.utils import formatdate
from typing import Any

import pytest

import jobloom
from jobloom.engine.push import retry_after
from jobloom.testing import TestClock
from tests.receiver import Answer, Receiver, Request

SECRET = "test-secret-0123456789abcdef"


class Stop:
    def __init__(self, app: jobloom.App, **kw: Any) -> None:
        self.worker = jobloom.Worker(app, grace=2.0, **kw)
        self.task = asyncio.create_task(self.worker.run())

    async def stop(self) -> None:
        self.worker.stop()
        await asyncio.wait_for(self.task, 10)


@pytest.fixture
async def running(store_url: str) -> AsyncIterator[list[Any]]:
    """Apps and workers made by a test, stopped and closed after it."""
    made: list[Any] = []
    yield made
    for thing in reversed(made):
        if isinstance(thing, Stop):
            await thing.stop()
        else:
            await thing.close()


async def start(running: list[Any], store_url: str, *performers: Any, secret: str | None = SECRET) -> jobloom.App:
    app = jobloom.App(store_url, performers=list(performers), auto_migrate=True, lease=2.0, signing_secret=secret)
    running.append(app)
    running.append(Stop(app, concurrency=4))
    return app


def answers(*script: Any) -> Any:
    """A handler that gives the scripted answers in turn (a float: hold the request that many seconds,
    then answer with the next one; a function: the answer it makes then); the last answer repeats."""
    queue = list(script)

    async def handler(req: Request) -> Answer:
        while True:
            item = queue.pop(0) if len(queue) > 1 else queue[0]
            if isinstance(item, float):
                await asyncio.sleep(item)
                continue
            return item() if callable(item) else item

    return handler


OK: Answer = (200, {"Content-Type": "application/json"}, b'{"frames": 24}')


async def test_success_is_signed_and_the_json_body_is_the_result(running: list[Any], store_url: str) -> None:
    async with Receiver(answers(OK)) as rx:
        class Hook(jobloom.HttpPerformer[dict[str, Any], dict[str, int]]):
            url = rx.url
            headers = {"X-Team": "media"}

        app = await start(running, store_url, Hook)
        job = await app.enqueue(Hook, {"video": "a.mp4"})
        done = await app.wait(job.id, timeout=10)
        assert done.state == "succeeded" and done.result == {"frames": 24}
        (req,) = rx.requests
        assert req.method == "POST" and req.headers["x-team"] == "media"
        assert req.headers["idempotency-key"] == f"{job.id}:1"
        assert req.headers["content-type"] == "application/json"
        body = json.loads(req.body)
        assert body["job_id"] == job.id and body["attempt"] == 1 and body["binding"] == "Hook"
        assert body["payload"] == {"video": "a.mp4"}
        assert body["deadline"] == pytest.approx(time.time() + 60, abs=10)
        assert jobloom.verify_signature(SECRET, req.headers, req.body) is True
        with pytest.raises(jobloom.InvalidSignature, match="does not match"):
            jobloom.verify_signature(SECRET, req.headers, req.body.replace(b"a.mp4", b"b.mp4"))
        with pytest.raises(jobloom.InvalidSignature, match="does not match"):
            jobloom.verify_signature("another-secret-0123456789", req.headers, req.body)
        with pytest.raises(jobloom.InvalidSignature, match="tolerance"):
            jobloom.verify_signature(SECRET, req.headers, req.body, now=time.time() + 301)
        with pytest.raises(jobloom.InvalidSignature, match="no Jobloom-Signature"):
            jobloom.verify_signature(SECRET, {}, req.body)


async def test_the_signature_covers_the_idempotency_key_and_a_performer_may_have_its_own_secret(
    running: list[Any], store_url: str
) -> None:
    own = "performer-own-secret-0123456789"
    async with Receiver(answers(OK)) as rx:
        class Plain(jobloom.HttpPerformer[dict[str, Any], dict[str, int]]):
            url = rx.url

        class Own(jobloom.HttpPerformer[dict[str, Any], dict[str, int]]):
            url = rx.url
            signing_secret = own

        app = await start(running, store_url, Plain, Own)
        plain = await app.enqueue(Plain, {"n": 1})
        mine = await app.enqueue(Own, {"n": 2})
        assert (await app.wait(plain.id, timeout=10)).state == "succeeded"
        assert (await app.wait(mine.id, timeout=10)).state == "succeeded"
        by_binding = {json.loads(r.body)["binding"]: r for r in rx.requests}
        req = by_binding["Plain"]
        assert jobloom.verify_signature(SECRET, req.headers, req.body) is True
        replayed = {**req.headers, "idempotency-key": f"{plain.id}:9"}  # the same request under a new key
        with pytest.raises(jobloom.InvalidSignature, match="Idempotency-Key"):
            jobloom.verify_signature(SECRET, replayed, req.body)
        assert jobloom.verify_signature(SECRET, replayed, req.body, scheme="v1")  # v1 covers the body only
        stripped = {**req.headers, "jobloom-signature": req.headers["jobloom-signature"].rsplit(",v2=", 1)[0]}
        with pytest.raises(jobloom.InvalidSignature, match="v2="):
            jobloom.verify_signature(SECRET, stripped, req.body)  # a v1-only header is refused by default
        other = by_binding["Own"]
        assert jobloom.verify_signature(own, other.headers, other.body) is True
        with pytest.raises(jobloom.InvalidSignature, match="does not match"):
            jobloom.verify_signature(SECRET, other.headers, other.body)


async def test_5xx_and_connection_errors_are_retried_with_backoff(running: list[Any], store_url: str) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}/hook"
    async with Receiver(answers((500, {}, b"database down"), (502, {}, b""), OK)) as rx:
        class Flaky(jobloom.HttpPerformer[dict[str, Any], Any]):
            url = rx.url
            backoff = jobloom.Backoff.fixed(0.3)

        class Gone(jobloom.HttpPerformer[dict[str, Any], Any]):
            url = dead
            max_attempts = 2
            backoff = jobloom.Backoff.fixed(0.05)

        app = await start(running, store_url, Flaky, Gone)
        job = await app.enqueue(Flaky, {})
        gone = await app.enqueue(Gone, {})
        done = await app.wait(job.id, timeout=10)
        assert done.state == "succeeded" and done.attempt == 3
        attempts = await app.attempts(job.id)
        assert [a.outcome for a in attempts] == ["failed", "failed", "succeeded"]
        assert "HTTP 500" in (attempts[0].error or "") and "database down" in (attempts[0].error or "")
        gaps = [b.at - a.at for a, b in zip(rx.requests, rx.requests[1:], strict=False)]
        assert all(gap >= 0.3 for gap in gaps), gaps  # the backoff between attempts
        failed = await app.wait(gone.id, timeout=10)
        assert failed.state == "failed" and failed.attempt == 2
        assert "ConnectError" in (failed.error or "")


async def test_429_and_503_retry_when_retry_after_says(store_url: str) -> None:
    """Retry-After in seconds and as an HTTP date each hold the next attempt back that long; a 503 without
    it retries after the backoff. Time is the test clock's, so the gaps are exact however busy the host:
    the attempts are run by ``clock.advance`` (``app.drain()`` at each moment a retry comes due)."""
    clock = TestClock()

    def later() -> Answer:  # an HTTP date has whole seconds: 2 s on, from 1 s to 2 s away
        return 503, {"Retry-After": formatdate(time.time() + 2, usegmt=True)}, b""

    async with Receiver(answers((429, {"Retry-After": "1"}, b"slow down"), later, (503, {}, b""), OK)) as rx:
        class Busy(jobloom.HttpPerformer[dict[str, Any], Any]):
            url = rx.url
            max_attempts = 5
            backoff = jobloom.Backoff.fixed(0.05)

        app = jobloom.App(store_url, performers=[Busy], auto_migrate=True, signing_secret=SECRET, clock=clock)
        try:
            job = await app.enqueue(Busy, {})
            await clock.advance(10)
            done = await app.get_job(job.id)
            assert done.state == "succeeded" and done.attempt == 4 and len(rx.requests) == 4
            attempts = await app.attempts(job.id)
            assert [a.outcome for a in attempts] == ["retry", "retry", "retry", "succeeded"]
            gaps = [(b.started_at - a.finished_at).total_seconds()  # type: ignore[operator]
                    for a, b in itertools.pairwise(attempts)]
            assert gaps[0] >= 1.0, f"Retry-After: 1 (seconds) was not honoured: {gaps}"
            assert gaps[1] >= 0.9, f"Retry-After as an HTTP date was not honoured: {gaps}"
            assert gaps[2] < 0.9, f"without Retry-After the backoff (0.05 s) applies: {gaps}"
        finally:
            await app.close()


async def test_other_4xx_fail_at_once_with_status_and_body(running: list[Any], store_url: str) -> None:
    async with Receiver(answers((422, {}, b'{"error": "unsupported codec"}'))) as rx:
        class Strict(jobloom.HttpPerformer[dict[str, Any], Any]):
            url = rx.url

        app = await start(running, store_url, Strict)
        job = await app.enqueue(Strict, {})
        done = await app.wait(job.id, timeout=10)
        assert done.state == "failed" and done.attempt == 1 and len(rx.requests) == 1
        assert "HTTP 422" in (done.error or "") and "unsupported codec" in (done.error or "")


async def test_a_failed_push_stores_a_bounded_summary_never_the_answer_verbatim(
    running: list[Any], store_url: str
) -> None:
    """The job's error, which every read token sees, holds the status, a short escaped excerpt of the body
    and URLs without user info, query or fragment: never a redirect's credentials or the whole body."""
    noise = b"\x1b[2J\x1b]0;owned\x07" + b"<html>" + b"x" * 5000 + b"TAIL-SECRET</html>"
    redirect = (302, {"Location": "https://alice:pw-SECRET@login.example/cb?token=tok-SECRET#frag"}, noise)
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there: a connection error
    async with Receiver(answers(redirect)) as rx:
        class Moved(jobloom.HttpPerformer[dict[str, Any], Any]):
            url = rx.url

        class Gone(jobloom.HttpPerformer[dict[str, Any], Any]):
            url = f"http://bob:pw-SECRET@127.0.0.1:{port}/hook?key=key-SECRET"
            max_attempts = 1

        app = await start(running, store_url, Moved, Gone)
        moved = await app.wait((await app.enqueue(Moved, {})).id, timeout=10)
        gone = await app.wait((await app.enqueue(Gone, {})).id, timeout=10)
    assert moved.state == "failed" and gone.state == "failed"
    error = moved.error or ""
    assert "HTTP 302" in error and "(redirects are not followed; Location: https://login.example/cb [...])" in error
    assert "<html>xxx" in error and len(error) < 500, error
    assert "\\x1b[2J" in error and "\x1b" not in error and "\x07" not in error, error
    assert "SECRET" not in error and "alice" not in error and "frag" not in error, error
    attempt = (await app.attempts(moved.id))[0]
    assert attempt.error == error
    failed = gone.error or ""
    assert f"POST http://127.0.0.1:{port}/hook [...] failed: ConnectError" in failed, failed
    assert "SECRET" not in failed and "bob" not in failed and len(failed) < 500, failed


async def test_a_failed_push_never_records_what_the_receiver_echoes_of_the_request(
    running: list[Any], store_url: str
) -> None:
    """A receiver that echoes the request in its error body (a debug page) does not put the performer's
    header values or its URL's user info and query into the job's error."""
    echo = (b"bad request: Authorization: Bearer hdr-SECRET-1234; GET /hook?key=key-SECRET-5678&x=1 "
            b"as carol:pw-SECRET-9")
    async with Receiver(answers((400, {}, echo))) as rx:
        class Echoed(jobloom.HttpPerformer[dict[str, Any], Any]):
            url = rx.url.replace("http://", "http://carol:pw-SECRET-9@") + "?key=key-SECRET-5678&x=1"
            headers = {"Authorization": "Bearer hdr-SECRET-1234"}

        app = await start(running, store_url, Echoed)
        done = await app.wait((await app.enqueue(Echoed, {})).id, timeout=10)
    error = done.error or ""
    assert done.state == "failed" and "HTTP 400" in error and "bad request: Authorization: [hidden]" in error, error
    assert "SECRET" not in error, error


async def test_a_request_past_the_timeout_is_a_timed_out_attempt(running: list[Any], store_url: str) -> None:
    async with Receiver(answers(5.0, OK)) as rx:
        class Sluggish(jobloom.HttpPerformer[dict[str, Any], Any]):
            url = rx.url
            timeout = 0.5
            backoff = jobloom.Backoff.fixed(0.05)

        app = await start(running, store_url, Sluggish)
        job = await app.enqueue(Sluggish, {})
        done = await app.wait(job.id, timeout=10)
        assert done.state == "succeeded" and done.attempt == 2
        first = (await app.attempts(job.id))[0]
        assert first.outcome == "timeout" and "timed out after 0.5 s" in (first.error or "")


async def test_a_worker_refuses_http_performers_without_a_signing_secret(store_url: str) -> None:
    class Unsigned(jobloom.HttpPerformer[dict[str, Any], Any]):
        url = "https://example.invalid/hook"

    app = jobloom.App(store_url, performers=[Unsigned], auto_migrate=True)
    with pytest.raises(jobloom.InvalidOption, match="signing_secret"):
        jobloom.Worker(app)
    with pytest.raises(jobloom.InvalidOption, match="signing_secret"):
        jobloom.App(store_url, performers=[Unsigned], signing_secret="short")


def test_options_are_checked() -> None:
    class NoUrl(jobloom.HttpPerformer[dict[str, Any], Any]):
        pass

    class BadHeader(jobloom.HttpPerformer[dict[str, Any], Any]):
        url = "https://example.invalid/hook"
        headers = {"Idempotency-Key": "mine"}

    with pytest.raises(jobloom.InvalidOption, match="url on NoUrl"):
        jobloom.App("sqlite:///:memory:", performers=[NoUrl])
    with pytest.raises(jobloom.InvalidOption, match="does not set itself"):
        jobloom.App("sqlite:///:memory:", performers=[BadHeader])


def test_retry_after_reads_seconds_and_http_dates() -> None:
    assert retry_after("120") == 120.0
    assert retry_after(formatdate(1000.0 + 30, usegmt=True), now=1000.0) == pytest.approx(30.0)
    assert retry_after(formatdate(1000.0 - 30, usegmt=True), now=1000.0) == 0.0
    assert retry_after(None) is None and retry_after("soon") is None
