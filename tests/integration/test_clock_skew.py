"""Hosts whose clocks disagree: on PostgreSQL the server's clock decides, so a worker whose clock runs
two minutes ahead reaps no live job of a worker whose clock runs two minutes behind, delays are honoured,
and limits stay exact. The skewed clocks are real: each worker runs under libfaketime."""

from __future__ import annotations

import os
import signal
import time

import pytest

import jobloom
from tests.conftest import IN_CI
from tests.helpers import eventually

from .conftest import Processes

pytestmark = [pytest.mark.slow, pytest.mark.postgres]


LIBFAKETIME = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"


def _faketime(offset: str) -> dict[str, str]:
    """The environment that runs a process under libfaketime with its clock moved by ``offset`` (the
    library itself, not the ``faketime`` command, which would stand between the test and the worker
    and not pass SIGTERM on)."""
    if not os.path.exists(LIBFAKETIME):
        message = "libfaketime is not installed (Debian package `faketime`): apt-get install faketime to run this test"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
    return {"LD_PRELOAD": LIBFAKETIME, "FAKETIME": offset, "FAKETIME_DONT_FAKE_MONOTONIC": "1"}


@pytest.fixture
def store_url(postgres_url: str) -> str:
    """Only PostgreSQL: a SQLite store lives on one machine, with one clock."""
    return postgres_url


@pytest.mark.serial
async def test_workers_two_minutes_apart_agree_on_leases_delays_and_limits(app: jobloom.App, procs: Processes) -> None:
    ahead = procs.worker(env=_faketime("+2m"), lease=1.0)
    behind = procs.worker(env=_faketime("-2m"), lease=1.0)
    try:
        long = await app.enqueue_many([("Node", {"sleep": 2.5, "n": i}) for i in range(6)])
        gated = await app.enqueue_many([("Gate", {}) for _ in range(60)])
        t0 = time.time()
        delayed = [await app.enqueue("Plain", {"n": i}, delay=2.0) for i in range(4)]
        for job in [*long, *gated, *delayed]:
            done = await app.wait(job.id, timeout=60)
            assert done.state == "succeeded", done
        for job in long:  # each ran once, to its end: no live lease was taken for an expired one
            attempts = await app.attempts(job.id)
            assert [a.outcome for a in attempts] == ["succeeded"], (job.id, attempts)
        for job in delayed:
            started = (await app.get_job(job.id)).started_at
            assert started is not None
            waited = started.timestamp() - job.created_at.timestamp()
            assert 1.8 <= waited <= 4.0, f"a 2 s delay waited {waited:.2f} s"
        assert time.time() - t0 < 60
        now, peak = (int(x) for x in (procs.state_dir / "gauge").read_text().split())
        assert now == 0 and peak <= 3, f"{peak} Gate jobs ran at once; the limit is 3"
    finally:
        for p in (ahead, behind):
            p.send_signal(signal.SIGTERM)
        await eventually(lambda: ahead.poll() is not None and behind.poll() is not None, timeout=30,
                         what="both workers stopped")
