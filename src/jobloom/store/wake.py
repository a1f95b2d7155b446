"""Wake-ups between processes on one machine: a Unix datagram socket per listener in a shared folder.

Senders write one byte to every socket in the folder after a commit; a listener that is gone is
noticed (connection refused) and its socket file removed. Losing a signal is harmless: listeners
also wake at their next due moment.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import uuid

from .base import Wakeups, wait_event


class WakeFolder:
    """The sending side: cheap to call after every commit."""

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self._mtime_ns = -1
        self._targets: list[str] = []
        self._sock: socket.socket | None = None

    def _refresh(self) -> None:
        try:
            mtime = os.stat(self.folder).st_mtime_ns
        except FileNotFoundError:
            self._targets = []
            return
        if mtime != self._mtime_ns:
            self._mtime_ns = mtime
            with contextlib.suppress(FileNotFoundError):
                self._targets = [
                    os.path.join(self.folder, n) for n in os.listdir(self.folder) if n.endswith(".sock")
                ]

    def send(self) -> None:
        """Signal every listener; never blocks, never raises."""
        self._refresh()
        if not self._targets:
            return
        if self._sock is None:
            self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            self._sock.setblocking(False)
        for path in self._targets:
            try:
                self._sock.sendto(b"w", path)
            except (BlockingIOError, InterruptedError):
                pass  # the listener's buffer is full: it has a wake-up pending already
            except (ConnectionRefusedError, FileNotFoundError):
                with contextlib.suppress(OSError):
                    os.unlink(path)  # its process is gone
            except OSError:
                pass

    def close(self) -> None:
        """Close the sending socket."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None


class SocketWakeups(Wakeups):
    """The listening side: a socket named after this process, readable from the event loop."""

    def __init__(self, folder: str) -> None:
        os.makedirs(folder, exist_ok=True)
        self.path = os.path.join(folder, f"{os.getpid()}-{uuid.uuid4().hex[:8]}.sock")
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._sock.bind(self.path)
        self._sock.setblocking(False)
        self._event = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(self._sock.fileno(), self._readable)

    def _readable(self) -> None:
        try:
            while True:
                self._sock.recv(64)
        except (BlockingIOError, InterruptedError):
            pass
        except OSError:
            return
        self._event.set()

    async def wait(self, timeout: float | None) -> bool:
        """Wait for a wake-up or the timeout."""
        return await wait_event(self._event, timeout)

    async def close(self) -> None:
        """Stop listening and remove the socket file."""
        with contextlib.suppress(Exception):
            self._loop.remove_reader(self._sock.fileno())
        self._sock.close()
        with contextlib.suppress(OSError):
            os.unlink(self.path)
