"""Debounce and expiry across processes: enqueues of one key from several processes at once make one
job, which runs once, with the latest payload; and no worker process starts a job at or past its expiry."""

from __future__ import annotations

import jobloom
from jobloom.core.queries import Q
from jobloom.store.base import Tx
from tests.helpers import eventually

from .conftest import Processes

RACERS, ROUNDS, KEYS = 4, 3, 20


async def test_one_job_per_key_runs_once_with_the_latest_payload(app: jobloom.App, procs: Processes) -> None:
    # every process enqueues to keys 0..19 in turn, ROUNDS times: the first enqueues of a key race to make it
    code = (
        "import os, time, itapp\n"
        "p = int(os.environ['RACER'])\n"
        "itapp.app.run_sync(itapp.app.store())\n"  # connected and checked before the race starts
        "while not os.path.exists('go'): time.sleep(0.005)\n"
        f"ids = [itapp.app.enqueue_sync('Plain', {{'n': p * 1000 + r}}, debounce=600, debounce_key=f'user:{{k}}').id\n"
        f"       for r in range({ROUNDS}) for k in range({KEYS})]\n"
        "print(' '.join(map(str, ids)))\n"
        "itapp.app.close_sync()\n"
    )
    await app.list_jobs()  # the store exists before the racers start
    racers = []
    for p in range(RACERS):
        procs.env["RACER"] = str(p)
        racers.append(procs.python(code))
    (procs.state_dir / "go").write_text("")
    seen: list[list[int]] = []
    for r in racers:
        out, _ = r.communicate(timeout=60)
        assert r.returncode == 0
        seen.append([int(x) for x in out.split()])
    jobs = await app.list_jobs(binding="Plain", limit=100)
    assert len(jobs) == KEYS  # one job per key, however the enqueues raced
    for k in range(KEYS):  # every enqueue of key k, in every process, returned that key's job
        assert len({ids[r * KEYS + k] for ids in seen for r in range(ROUNDS)}) == 1
    # the last enqueue committed to a key is some process's last one: its payload is the job's
    assert all(j.state == "scheduled" and j.payload["n"] % 1000 == ROUNDS - 1 for j in jobs)
    job = await app.enqueue("Plain", {"n": 9999}, debounce=0, debounce_key="user:0")  # a window of 0: due now
    assert job.id == seen[0][0]
    procs.worker()

    async def ran() -> jobloom.Job | None:
        done = await app.get_job(job.id)
        return done if done.state == "succeeded" else None

    done = await eventually(ran, timeout=60, what="the debounced job ran")
    assert (done.result, done.attempt) == (9999, 1)
    assert len(await app.list_jobs(binding="Plain", limit=100)) == KEYS


async def test_no_worker_process_starts_a_job_past_its_expiry(app: jobloom.App, procs: Processes) -> None:
    for _ in range(3):
        procs.worker()
    ping = await app.enqueue("Plain", {"n": 1})

    async def up() -> bool:
        return (await app.get_job(ping.id)).state == "succeeded"

    await eventually(up, timeout=60, what="the workers are up")
    # 20/s burst 5 starts at most 65 in 3 s: the others must expire, never start late (3 s, not less: the
    # first start must come within it on a loaded host, or none runs)
    jobs = await app.enqueue_many([jobloom.EnqueueRequest("Rated", {}, jobloom.EnqueueOptions(expires_in=3.0))
                                   for _ in range(100)])

    ids = {j.id for j in jobs}

    async def settled() -> list[jobloom.Job] | None:  # one read a poll, not one per job
        now = [j for j in await app.list_jobs(binding="Rated", limit=10 * len(jobs)) if j.id in ids]
        assert len(now) == len(jobs)
        return now if all(j.state in ("succeeded", "expired") for j in now) else None

    done = await eventually(settled, timeout=60, interval=0.1, what="every job ran or expired")
    store = await app.store()

    async def expiries(tx: Tx) -> dict[int, float]:
        found = await tx.fetch_batch([(Q.job_timing, {"id": j.id}) for j in jobs])
        return {j.id: rows[0].expires_at for j, rows in zip(jobs, found, strict=True)}

    expires = await store.transact(expiries, exclusive=False)
    ran = [j for j in done if j.state == "succeeded"]
    lapsed = [j for j in done if j.state == "expired"]
    assert ran and lapsed, (len(ran), len(lapsed))
    assert all(j.started_ts is not None and j.started_ts < expires[j.id] for j in ran)
    assert all(j.attempt == 0 and j.started_ts is None for j in lapsed)
    performed = {int(line.split()[0]) for line in procs.read("rated")}
    assert performed == {j.id for j in ran}
