"""Huey on the local Redis (db ``PEERS_REDIS_DB``): a no-op task and a latency-stamping one."""

from __future__ import annotations

import os

from huey import RedisHuey
from stamps import drain_stamp, latency_stamp

huey = RedisHuey("jobloom-peers", host="127.0.0.1", port=6379, db=int(os.environ.get("PEERS_REDIS_DB", "13")))


@huey.task()
def noop(i: int) -> None:
    drain_stamp()


@huey.task()
def stamped(enqueued: float) -> None:
    latency_stamp(enqueued)
