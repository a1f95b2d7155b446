"""Issue 28, items 4 and 5: a client cannot exhaust the server.

Against a real ``jobloom serve`` on each store: abandoned long polls give their descriptors back within
a second, a token holds only so many long polls, SIGTERM ends them at once, job waits share their reads
of the store; a caller without a token cannot make the server read a body, bodies are capped by their
exact route, headers by size and time, bodies by time, connections by number. Descriptors are counted
in ``/proc/<pid>/fd``, memory is the peak resident size (``VmHWM``) of ``/proc/<pid>/status``.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import STORES
from tests.helpers import eventually_sync
from tests.security.conftest import SCOPED, Served, httpx, serve, store_for

QUICK = ("--header-timeout", "1", "--body-timeout", "1", "--max-long-polls", "3", "--max-connections", "150")
"""The options of the server of the tests that wait for a limit: short times, small caps."""


@pytest.fixture(scope="module", params=STORES)
def served(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """A server with the default limits, per store."""
    folder = tmp_path_factory.mktemp(f"limits-{request.param}")
    with store_for(request.param, folder) as url, serve(url, folder, tokens=SCOPED) as s:
        yield s


@pytest.fixture(scope="module", params=STORES)
def quick(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """A server with short timeouts and small caps, per store."""
    folder = tmp_path_factory.mktemp(f"quick-{request.param}")
    with store_for(request.param, folder) as url, serve(url, folder, *QUICK, tokens=SCOPED) as s:
        yield s


def pid(s: Served) -> int:
    assert s.proc is not None
    return s.proc.pid


def descriptors(s: Served) -> int:
    """The server's open file descriptors."""
    return len(os.listdir(f"/proc/{pid(s)}/fd"))


def peak_rss(s: Served) -> int:
    """The server's peak resident memory so far, in bytes."""
    for line in Path(f"/proc/{pid(s)}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def gauge(s: Served, name: str) -> int:
    """One of the server's own metrics."""
    text = httpx.get(f"{s.url}/metrics", headers=s.auth("reader"), timeout=10).text
    return int(next(line.split()[1] for line in text.splitlines() if line.startswith(f"{name} ")))


def connect(s: Served) -> socket.socket:
    host, port = s.url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=10)
    return sock


def request(method: str, path: str, token: str | None = None, body: bytes = b"",
            headers: dict[str, str] | None = None) -> bytes:
    """An HTTP/1.1 request's bytes."""
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1"]
    if token is not None:
        lines.append(f"Authorization: Bearer {token}")
    if body or method in ("POST", "PUT"):
        lines += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def claim(s: Served, token: str, worker: str, wait: float = 60) -> bytes:
    body = json.dumps({"worker": worker, "bindings": ["Render"], "max": 1, "wait": wait}).encode()
    return request("POST", "/v1/worker/claim", s.tokens[token], body)


def answer(sock: socket.socket, timeout: float = 10) -> tuple[int, bytes]:
    """The status and body of the response on ``sock`` (read until the connection closes or the body is in)."""
    sock.settimeout(timeout)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    assert head, "no response"
    lengths = [int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")]
    length = lengths[0] if lengths else None
    while length is not None and len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return int(head.split(b" ")[1]), body


def closed(sock: socket.socket) -> bool:
    """Whether the server closed ``sock`` (after any response)."""
    sock.settimeout(0.01)
    try:
        while chunk := sock.recv(65536):
            del chunk
        return True
    except TimeoutError:
        return False
    except OSError:
        return True


@contextlib.contextmanager
def sockets(n: int, s: Served) -> Iterator[list[socket.socket]]:
    opened = [connect(s) for _ in range(n)]
    try:
        yield opened
    finally:
        for sock in opened:
            sock.close()


def settled(s: Served, base: int) -> Iterator[int]:
    """Wait until the server holds no long poll and at most a few descriptors more than ``base`` (on
    PostgreSQL, the pool's connections, up to 10, may have opened meanwhile)."""
    slack = 8 + (11 if s.store_url.startswith("postgres") else 0)
    return eventually_sync(lambda: gauge(s, "jobloom_http_long_polls") == 0 and descriptors(s) <= base + slack,
                           timeout=10, interval=0.02, what="long polls and descriptors freed")


# -- item 4: long polls ---------------------------------------------------------------------------------


@pytest.mark.serial
def test_abandoned_claims_free_their_descriptors_within_a_second(served: Served) -> None:
    assert json.loads(answer_of(served, claim(served, "w1", "warm", wait=0.01))[1]) == {"jobs": []}
    base = descriptors(served)
    with sockets(200, served) as polls:
        for i, sock in enumerate(polls):
            sock.sendall(claim(served, "w1" if i % 2 else "w2", f"gone-{i}"))
        eventually_sync(lambda: gauge(served, "jobloom_http_claims_waiting") == 200, what="200 claims waiting",
                        timeout=20)
        held = descriptors(served)
    started = time.monotonic()
    settled(served, base)
    freed = time.monotonic() - started
    print(f"\n{served.store_url.split(':')[0]}: descriptors {base} before, {held} with 200 claims waiting, "
          f"{descriptors(served)} {freed:.2f} s after their sockets closed")
    assert held >= base + 200
    assert freed < 1.5, f"abandoned claims held their descriptors for {freed:.2f} s"


def answer_of(s: Served, raw: bytes) -> tuple[int, bytes]:
    with connect(s) as sock:
        sock.sendall(raw)
        return answer(sock)


@pytest.mark.serial
def test_abandoned_job_waits_stop_and_share_their_reads(served: Served) -> None:
    job = httpx.post(f"{served.url}/v1/jobs", json={"binding": "Echo", "payload": 1}, headers=served.auth("pusher"),
                     timeout=10).json()["id"]  # `jobloom serve` runs no worker: it stays queued
    base = descriptors(served)
    with sockets(100, served) as waits:
        for sock in waits:
            sock.sendall(request("GET", f"/v1/jobs/{job}/wait?timeout=60", served.tokens["reader"]))
        eventually_sync(lambda: gauge(served, "jobloom_http_long_polls") == 100, what="100 waits", timeout=20)
        reads = gauge(served, "jobloom_http_wait_reads_total")
        time.sleep(1.0)  # the window over which the reads are counted
        per_second = gauge(served, "jobloom_http_wait_reads_total") - reads
    started = time.monotonic()
    settled(served, base)
    freed = time.monotonic() - started
    after = gauge(served, "jobloom_http_wait_reads_total")
    time.sleep(0.5)
    print(f"\n{served.store_url.split(':')[0]}: 100 waits read the store {per_second} times in 1 s; freed in "
          f"{freed:.2f} s")
    assert per_second <= 25, f"100 waits read the store {per_second} times a second"
    assert freed < 1.5
    assert gauge(served, "jobloom_http_wait_reads_total") == after, "abandoned waits still read the store"


def test_a_token_holds_only_so_many_long_polls(quick: Served) -> None:
    base = descriptors(quick)
    with sockets(3, quick) as polls:
        for i, sock in enumerate(polls):
            sock.sendall(claim(quick, "w1", f"cap-{i}"))
        eventually_sync(lambda: gauge(quick, "jobloom_http_long_polls") == 3, what="3 long polls")
        with connect(quick) as sock:
            sock.sendall(claim(quick, "w1", "one-more", wait=5))
            status, body = answer(sock)
            assert closed(sock), "a refused long poll kept its connection"
        assert status == 429, body
        error = json.loads(body)["error"]
        assert error["type"] == "TooManyLongPolls" and "'w1'" in error["message"] and " 3 " in error["message"]
        assert "--max-long-polls" in error["message"]
        job = httpx.post(f"{quick.url}/v1/jobs", json={"binding": "Echo", "payload": 1}, headers=quick.auth("admin"),
                         timeout=10).json()["id"]
        r = httpx.get(f"{quick.url}/v1/jobs/{job}/wait", params={"timeout": 0.1}, headers=quick.auth("admin"),
                      timeout=10)
        assert r.status_code == 408, "another token's long polls count against w1"
        with contextlib.ExitStack() as stack:  # the wait route (FastAPI's) counts and refuses alike
            for _ in range(3):
                held = stack.enter_context(connect(quick))
                held.sendall(request("GET", f"/v1/jobs/{job}/wait?timeout=30", quick.tokens["reader"]))
            eventually_sync(lambda: gauge(quick, "jobloom_http_long_polls") == 6, what="3 waits more")
            r = httpx.get(f"{quick.url}/v1/jobs/{job}/wait", headers=quick.auth("reader"), timeout=10)
            assert r.status_code == 429 and r.headers["connection"] == "close", r.text
        status, _ = answer_of(quick, claim(quick, "w2", "other", wait=0.1))
        assert status == 200
    settled(quick, base)
    assert answer_of(quick, claim(quick, "w1", "again", wait=0.1))[0] == 200


def test_a_worker_still_claims_when_descriptors_are_few(store: str, tmp_path: Path) -> None:
    """``ulimit -n 400``: another token's 150 long polls neither starve the descriptors nor a worker."""
    with store_for(store, tmp_path) as url, serve(url, tmp_path, tokens=SCOPED, max_files=400) as s:
        assert "at most 168 connections" in s.log(), s.log()
        with sockets(150, s) as polls:
            for i, sock in enumerate(polls):
                sock.sendall(claim(s, "w1", f"hog-{i}"))
            eventually_sync(lambda: gauge(s, "jobloom_http_long_polls") == 100, what="w1's 100 long polls")
            assert descriptors(s) < 400 - 64
            status, body = answer_of(s, claim(s, "w2", "real", wait=0.2))
            assert (status, body) == (200, b'{"jobs":[]}')
            assert answer_of(s, request("GET", "/v1/health"))[0] == 200


@pytest.mark.serial
def test_sigterm_ends_long_polls_at_once(store: str, tmp_path: Path) -> None:
    with store_for(store, tmp_path) as url, serve(url, tmp_path, tokens=SCOPED) as s:
        job = httpx.post(f"{s.url}/v1/jobs", json={"binding": "Echo", "payload": 1}, headers=s.auth("pusher"),
                         timeout=10).json()["id"]
        with sockets(20, s) as claims, sockets(20, s) as waits:
            for i, sock in enumerate(claims):
                sock.sendall(claim(s, "w1", f"stop-{i}", wait=300))
            for sock in waits:
                sock.sendall(request("GET", f"/v1/jobs/{job}/wait?timeout=60", s.tokens["reader"]))
            eventually_sync(lambda: gauge(s, "jobloom_http_long_polls") == 40, what="40 long polls", timeout=20)
            assert s.proc is not None
            started = time.monotonic()
            s.proc.send_signal(signal.SIGTERM)
            for sock in claims:
                assert answer(sock) == (200, b'{"jobs":[]}')
            for sock in waits:
                status, body = answer(sock)
                assert status == 408 and b"stopping" in body, body
            s.proc.wait(10)
            took = time.monotonic() - started
    print(f"\n{store}: SIGTERM with 40 long polls: answered and exited in {took:.2f} s")
    assert took < 3, f"the server took {took:.2f} s to stop"


# -- item 5: bodies, headers, slow clients, connections -----------------------------------------------


def test_an_unauthenticated_body_is_never_read(served: Served) -> None:
    before = peak_rss(served)
    huge = 30 * 1024 * 1024
    sent = [0] * 6

    def push(i: int) -> None:
        with connect(served) as sock:
            sock.sendall(f"POST /v1/jobs/batch HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                         f"Content-Length: {huge}\r\n\r\n".encode())
            status, body = answer(sock)
            assert status == 401 and json.loads(body)["error"]["type"] == "Unauthorized", body
            chunk = b"x" * 65536
            with contextlib.suppress(OSError):  # the server closed the connection: the rest is never read
                while sent[i] < huge:
                    sock.sendall(chunk)
                    sent[i] += len(chunk)

    threads = [threading.Thread(target=push, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    with connect(served) as sock:  # chunked, no length, a wrong token: refused the same way
        sock.sendall(b"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer jlt_nope_nope\r\n"
                     b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
        status, body = answer(sock)
        assert status == 401 and b"not valid" in body, body
    with connect(served) as sock:  # the dashboard's login form: a small body only
        sock.sendall(b"POST /login HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\n"
                     b"Content-Length: 65536\r\n\r\n")
        status, body = answer(sock)
        assert status == 413 and b"16384" in body, body
    grew = peak_rss(served) - before
    print(f"\n{served.store_url.split(':')[0]}: six unauthenticated 30 MiB POSTs: peak RSS {before >> 20} MiB "
          f"before, +{grew >> 20} MiB after; sent before the close: {[n >> 20 for n in sent]} MiB")
    assert grew < 8 * 1024 * 1024, f"the peak resident size grew by {grew >> 20} MiB"


def head_of(raw: bytes) -> bytes:
    """A request's line and headers, without its body."""
    return raw.partition(b"\r\n\r\n")[0] + b"\r\n\r\n"


def test_only_the_batch_route_takes_a_batch_sized_body(served: Served) -> None:
    token = served.tokens["admin"]
    big = b'{"data": "' + b"x" * (1024 * 1024) + b'"}'  # over the body cap, under the batch cap
    status, body = answer_of(served, head_of(request("POST", "/v1/jobs/1/events/batch", token, big)))
    assert status == 413 and json.loads(body)["error"]["type"] == "RequestTooLarge", body
    items = json.dumps({"jobs": [{"binding": "Echo", "payload": "x" * 1100}] * 1000}).encode()
    status, body = answer_of(served, request("POST", "/v1/jobs/batch", token, items))
    assert len(items) > 1024 * 1024 and status == 201, body[:300]


def test_oversized_headers_are_refused(served: Served) -> None:
    sent = 0
    status: int | None = None
    with connect(served) as sock:
        sock.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\nX-Big: ")
        with contextlib.suppress(ConnectionError):  # closed while a part was on its way: reset, but refused
            while sent < 4 * 1024 * 1024 and not select.select([sock], [], [], 0.05)[0]:
                sock.sendall(b"a" * 4096)
                sent += 4096
            status, body = answer(sock)
            assert b"16384" in body, body
    print(f"\n{served.store_url.split(':')[0]}: a 4 MB header refused ({status}) after {sent >> 10} KiB")
    assert status in (431, None) and sent < 64 * 1024
    status, _ = answer_of(served, request("GET", "/v1/health", headers={"X-Fine": "a" * 12_000}))
    assert status == 200


@pytest.mark.serial  # a time bound: closed within 5 s of the last byte
def test_half_sent_requests_are_closed(quick: Served) -> None:
    base = descriptors(quick)
    with sockets(100, quick) as slow, connect(quick) as idle, connect(quick) as slow_body:
        for sock in slow:
            sock.sendall(b"GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        token = quick.tokens["pusher"].encode()
        slow_body.sendall(b"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + token
                          + b"\r\nContent-Type: application/json\r\nContent-Length: 40\r\n\r\n{\"binding\": ")
        started = time.monotonic()
        assert answer(slow_body)[0] == 408
        assert all(answer(sock)[0] == 408 for sock in slow)
        eventually_sync(lambda: closed(idle), what="an idle connection closed", timeout=5)
        took = time.monotonic() - started
    settled(quick, base)
    print(f"\n{quick.store_url.split(':')[0]}: 100 half-sent requests closed {took:.2f} s after the last byte "
          f"(--header-timeout 1); descriptors back to {descriptors(quick)} (from {base})")
    assert took < 5


@pytest.mark.serial  # a time bound: 408 within 5 s with --body-timeout 1
def test_a_chunked_body_on_a_get_is_capped_and_timed_too(quick: Served) -> None:
    start = b"GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    with connect(quick) as big:  # without a token or session: the small cap, whatever the method
        big.sendall(start + b"%x\r\n" % 20_000 + b"a" * 20_000 + b"\r\n")
        status, body = answer(big)
        assert status == 413 and b"16384" in body, body
    with connect(quick) as drip:  # a body trickled on a GET: 408 at --body-timeout, then closed
        drip.sendall(start)
        started = time.monotonic()
        while not select.select([drip], [], [], 0.2)[0] and time.monotonic() - started < 10:
            drip.sendall(b"1\r\na\r\n")
        status, body = answer(drip)
        took = time.monotonic() - started
        assert status == 408 and json.loads(body)["error"]["type"] == "RequestTimeout", body
        eventually_sync(lambda: closed(drip), what="the trickling connection closed", timeout=5)
    assert took < 5, f"a trickled GET body held its connection {took:.1f} s (--body-timeout 1)"


def test_connections_past_the_cap_are_refused(quick: Served) -> None:
    with sockets(160, quick) as many:  # nothing sent: the accepted ones are closed by the header timeout
        statuses = [answer(sock)[0] for sock in many]
    print(f"\n{quick.store_url.split(':')[0]}: 160 connections to a server capped at 150: "
          f"{statuses.count(503)} refused at once, {statuses.count(408)} timed out")
    assert statuses.count(503) >= 10 and set(statuses) == {503, 408}
    assert statuses.index(503) > 100, "connections under the cap were refused"
