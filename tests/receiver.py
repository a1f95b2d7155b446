"""A tiny real HTTP/1.1 server on a loopback port, for the push performer tests (no framework).

Each request is answered by ``handler(request)``, which returns (status, headers, body) and may be
async (to hold the request open). The server records every request and how many it held at once.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

Answer = tuple[int, dict[str, str], bytes]


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    at: float = field(default_factory=time.time)


class Receiver:
    def __init__(self, handler: Callable[[Request], Answer | Awaitable[Answer]]) -> None:
        self.handler = handler
        self.requests: list[Request] = []
        self.inflight = 0
        self.peak = 0
        self.server: asyncio.Server | None = None
        self.port = 0
        self.tasks: set[asyncio.Task[Any]] = set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    async def __aenter__(self) -> Receiver:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: Any) -> None:
        assert self.server is not None
        self.server.close()
        for task in list(self.tasks):
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.tasks.add(task)
        try:
            while True:
                line = await reader.readline()
                if not line:
                    return
                method, path, _ = line.decode().split(" ", 2)
                headers: dict[str, str] = {}
                while (h := await reader.readline()) not in (b"\r\n", b"\n", b""):
                    name, _, value = h.decode().partition(":")
                    headers[name.strip().lower()] = value.strip()
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                req = Request(method, path, headers, body)
                self.requests.append(req)
                self.inflight += 1
                self.peak = max(self.peak, self.inflight)
                try:
                    answer = self.handler(req)
                    status, extra, data = await answer if inspect.isawaitable(answer) else answer
                finally:
                    self.inflight -= 1
                head = [f"HTTP/1.1 {status} X", f"Content-Length: {len(data)}",
                        *(f"{k}: {v}" for k, v in extra.items())]
                writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + data)
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            return
        finally:
            self.tasks.discard(task)
            writer.close()
