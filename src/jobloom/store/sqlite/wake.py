"""Wake-ups between processes on one machine: a Unix datagram socket per listener in a shared folder.

Senders write one byte to every socket in the folder after a commit; a listener that is gone is
noticed (connection refused) and its socket file removed. Losing a signal is harmless: listeners
also wake at their next due moment.

A sender lists the folder at most every :data:`REFRESH` seconds (and at its next send after a
failed one), not on every send: with 10,000 commits a second, that is a system call saved per
commit. The price is that a listener that has just started may miss the signals of the first
``REFRESH`` seconds from senders in other processes; so every listener also wakes once by itself
``REFRESH`` (plus a margin) after it started listening, and sees then whatever those signals were
about. A signal is therefore late by at most about ``REFRESH`` seconds, and only in a listener's
first ``REFRESH`` seconds. Listeners opened or closed in the sender's own process are seen at once
(they bump a process-wide generation that senders check on every send).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
import uuid
from collections.abc import Callable

from jobloom.store.base import Wakeups, read_hint, wait_event

REFRESH = 0.1  # seconds a sender keeps its listing of the folder
_MARGIN = 0.01  # a listener's own wake-up comes this long after the senders' listings expire
_LONGEST = 4096  # bytes of a wake-up read: "j", a job id, ":" and its binding's name
_generation = 0  # bumped by every listener opened or closed in this process


class WakeFolder:
    """The sending side: cheap to call after every commit."""

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self._targets: list[str] = []
        self._expires = 0.0  # monotonic time after which the listing is read again
        self._generation = -1
        self._sock: socket.socket | None = None

    def _refresh(self) -> None:
        self._generation = _generation
        self._expires = time.monotonic() + REFRESH
        try:
            names = os.listdir(self.folder)
        except OSError:  # no folder: nobody listens yet
            self._targets = []
            return
        self._targets = [os.path.join(self.folder, n) for n in names if n.endswith(".sock")]

    def send(self, hint: str | None = None) -> None:
        """Signal every listener (naming the one job enqueued, with ``hint``: :func:`~jobloom.store.base.
        job_hint`); never blocks, never raises."""
        if self._generation != _generation or time.monotonic() >= self._expires:
            self._refresh()
        if not self._targets:
            return
        if self._sock is None:
            self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            self._sock.setblocking(False)
        message = b"w" if hint is None else b"j" + hint.encode()
        for path in self._targets:
            try:
                self._sock.sendto(message, path)
            except (BlockingIOError, InterruptedError):
                pass  # the listener's buffer is full: it has a wake-up pending already
            except (ConnectionRefusedError, FileNotFoundError):
                with contextlib.suppress(OSError):
                    os.unlink(path)  # its process is gone
                self._expires = 0.0  # list the folder again at the next send
            except OSError:
                self._expires = 0.0

    def close(self) -> None:
        """Close the sending socket."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None


class SocketWakeups(Wakeups):
    """The listening side: a socket named after this process, readable from the event loop.

    It wakes once by itself :data:`REFRESH` seconds after it starts listening (see the module's
    docstring): senders in other processes may not know of it before then.
    """

    def __init__(self, folder: str) -> None:
        global _generation
        os.makedirs(folder, exist_ok=True)
        self.path = os.path.join(folder, f"{os.getpid()}-{uuid.uuid4().hex[:8]}.sock")
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._sock.bind(self.path)
        _generation += 1
        self._sock.setblocking(False)
        self._event = asyncio.Event()
        self._callbacks: list[Callable[[], None]] = []
        self._job_callbacks: list[Callable[[int, str], None]] = []
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(self._sock.fileno(), self._readable)
        self._catch_up = self._loop.call_later(REFRESH + _MARGIN, self._readable)

    def _readable(self) -> None:
        jobs: list[tuple[int, str]] = []
        try:
            while True:
                message = self._sock.recv(_LONGEST)
                if message[:1] == b"j" and (job := read_hint(message[1:].decode(errors="replace"))) is not None:
                    jobs.append(job)
        except (BlockingIOError, InterruptedError):
            pass
        except OSError:
            return
        self._event.set()
        for job_id, binding in jobs:
            for on_job in self._job_callbacks:
                on_job(job_id, binding)
        for callback in self._callbacks:
            callback()

    async def wait(self, timeout: float | None) -> bool:
        """Wait for a wake-up or the timeout."""
        return await wait_event(self._event, timeout)

    def on_signal(self, callback: Callable[[], None]) -> bool:
        """Call ``callback()`` from the socket's reader, the moment a wake-up arrives."""
        self._callbacks.append(callback)
        return True

    def on_job(self, callback: Callable[[int, str], None]) -> bool:
        """Call ``callback(job_id, binding)`` from the socket's reader for a wake-up that names its job."""
        self._job_callbacks.append(callback)
        return True

    async def close(self) -> None:
        """Stop listening and remove the socket file."""
        global _generation
        self._catch_up.cancel()
        with contextlib.suppress(Exception):
            self._loop.remove_reader(self._sock.fileno())
        self._sock.close()
        with contextlib.suppress(OSError):
            os.unlink(self.path)
        _generation += 1
