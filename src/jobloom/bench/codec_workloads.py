"""The codec's cost per job: the identity codec (content stored as JSON) beside ``Encrypted`` (AES-256-GCM).

Two views: the CPU of the codec alone (encoding a payload and a result, and decoding them back, as a job's
way through the store does once each), and the whole of a job's way, enqueued and drained in this process
with each codec, in alternating pairs so that a change of the machine's load between them cancels out.
"""

from __future__ import annotations

import json
import statistics
import time
from typing import Any

from jobloom.app.facade import App
from jobloom.bench.model import Measurement
from jobloom.bench.processes import BenchError
from jobloom.bench.sandbox import Sandbox
from jobloom.bench.workloads import Context
from jobloom.core.codecs import IDENTITY, Codec, Encrypted, new_key
from jobloom.engine.performer import Performer

CODEC_JOBS = 5_000
CPU_ROUNDS = 20_000
TEXT = "x" * 200  # a payload of about 256 bytes of JSON, and a result as large


class Echo(Performer[dict[str, Any], dict[str, Any]]):
    """Return the payload: a job whose payload and result both pass through the codec."""

    async def perform(self, payload: dict[str, Any]) -> dict[str, Any]:
        """The payload itself."""
        return payload


def _cpu(codec: Codec, rounds: int) -> float:
    """Seconds per job of the codec alone: a payload and a result encoded, then decoded."""
    text = json.dumps({"order": 12345, "note": TEXT})
    began = time.perf_counter()
    for _ in range(rounds):
        codec.decode(codec.encode(text), "payload")
        codec.decode(codec.encode(text), "result")
    return (time.perf_counter() - began) / rounds


async def _drain(box: Sandbox, codec: Codec, n: int) -> float:
    """Seconds per job to enqueue ``n`` jobs in one transaction and drain them in this process."""
    app = App(box.url, performers=[Echo], codec=codec, auto_migrate=True, **box.options)
    try:
        began = time.perf_counter()
        await app.enqueue_many([(Echo, {"order": i, "note": TEXT}) for i in range(n)])
        ran = await app.drain(concurrency=100)
        seconds = time.perf_counter() - began
    finally:
        await app.close()
    if ran != n:
        raise BenchError(f"codec: {ran} of {n} jobs ran")
    return seconds / n


async def codec(ctx: Context) -> list[Measurement]:
    """The identity codec and ``Encrypted``: CPU per job of the codec alone, and a job's whole way
    (``enqueue_many`` of 5,000 jobs, or ``--jobs N``, then ``App.drain``) per job, in ``--pairs`` alternating
    pairs (the medians are reported), and the ratio of the two."""
    n = ctx.params.n(CODEC_JOBS)
    encrypted = Encrypted(keys=[new_key()])
    rounds = max(100, min(CPU_ROUNDS, n * 4))
    cpu = {"identity": _cpu(IDENTITY, rounds), "encrypted": _cpu(encrypted, rounds)}
    box = await ctx.sandbox()
    runs: dict[str, list[float]] = {"identity": [], "encrypted": []}
    try:
        for pair in range(max(1, ctx.params.pairs)):
            ctx.progress.begin(f"codec: pair {pair + 1} of {ctx.params.pairs}", 2)
            runs["identity"].append(await _drain(box, IDENTITY, n))
            ctx.progress.update(1)
            runs["encrypted"].append(await _drain(box, encrypted, n))
            ctx.progress.end()
    finally:
        box.close()
    way = {name: statistics.median(values) for name, values in runs.items()}
    details = {"jobs": n, "pairs": len(runs["identity"]), "payload_bytes": len(json.dumps({"order": 0, "note": TEXT}))}
    return [
        Measurement("codec.cpu.identity", "codec alone, identity: a payload and a result, per job",
                    cpu["identity"] * 1e6, "µs", better="lower", details={"rounds": rounds}),
        Measurement("codec.cpu.encrypted", "codec alone, Encrypted (AES-GCM): a payload and a result, per job",
                    cpu["encrypted"] * 1e6, "µs", better="lower", details={"rounds": rounds}),
        Measurement("codec.job.identity", f"enqueue and drain {n:,} jobs, identity codec, per job",
                    way["identity"] * 1e6, "µs", better="lower", details=details | {"runs": runs["identity"]}),
        Measurement("codec.job.encrypted", f"enqueue and drain {n:,} jobs, Encrypted, per job",
                    way["encrypted"] * 1e6, "µs", better="lower", details=details | {"runs": runs["encrypted"]}),
        Measurement("codec.job.ratio", "a job's way, Encrypted / identity", way["encrypted"] / way["identity"],
                    "ratio", better="lower", details=details),
    ]
