"""What every system's no-op job does: append the moment its body began to a file of its process.

The same few microseconds for every system: one ``os.write`` of one line to a file opened once per
process (append mode), in the folder ``PEERS_STAMPS`` names. ``drain-<pid>`` files get one start time per
line; ``latency-<pid>`` files get ``enqueued started`` pairs (epoch seconds).
"""

from __future__ import annotations

import os
import time

_files: dict[str, int] = {}


def _fd(kind: str) -> int:
    key = f"{kind}-{os.getpid()}"  # a forked process (RQ's work horse) opens its own
    fd = _files.get(key)
    if fd is None:
        path = os.path.join(os.environ["PEERS_STAMPS"], key)
        fd = _files[key] = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    return fd


def drain_stamp() -> None:
    """Record that a drain job began now."""
    os.write(_fd("drain"), b"%.6f\n" % time.time())


def latency_stamp(enqueued: float) -> None:
    """Record that a latency job enqueued at ``enqueued`` began now."""
    now = time.time()
    os.write(_fd("latency"), b"%.6f %.6f\n" % (enqueued, now))
