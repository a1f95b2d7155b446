"""``jobloom serve``'s uvicorn, bounded where uvicorn itself is not (see ``SECURITY.md``, "Limits").

:class:`BoundedProtocol` is uvicorn's HTTP/1.1 protocol (httptools) with three more limits, checked
before any ASGI code runs:

- a request's line and headers together may not pass ``max_header_bytes`` (431, connection closed);
- they must arrive within ``header_time`` seconds of the connection, or of a request's first byte on
  a kept-alive one (408, closed): a client that sends half a request cannot hold a connection;
- at most ``max_connections`` connections are open: one more is answered 503 and closed at once.

:class:`DrainingServer` ends the long polls the moment the server is asked to stop (SIGTERM, Ctrl+C),
before uvicorn waits for the requests under way, so a stop is never held up by a worker's long poll.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from jobloom.http.bounds import Bounds, connection_cap
from jobloom.http.encode import dumps
from jobloom.http.errors import error_body
from jobloom.http.longpoll import LongPolls

_REASONS = {408: b"Request Timeout", 431: b"Request Header Fields Too Large", 503: b"Service Unavailable"}


class BoundedProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a header size cap, a header timeout and a connection cap."""

    bounds: Bounds = Bounds()
    """Set on the subclass :func:`protocol_for` makes."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._in_headers = True
        self._header_bytes = 0
        self._header_timer: asyncio.TimerHandle | None = None
        self._marks = 0  # requests begun, headers and bodies completed: did the last bytes reach one?

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Take the connection, or refuse it when the server holds as many as it may."""
        super().connection_made(transport)
        if len(self.connections) > self.bounds.max_connections:
            self._answer(503, "ServiceUnavailable", f"the server holds {self.bounds.max_connections} connections, "
                         "the most it takes (jobloom serve --max-connections): try again shortly")
            return
        self._start_header_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        """Forget the connection (and its header timer)."""
        self._stop_header_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        """Parse what arrived; refuse headers that are growing past the cap before they are complete."""
        if self._in_headers and self._header_timer is None and not self.transport.is_closing():
            self._start_header_timer()  # the first bytes of a request on a kept-alive connection
        marks = self._marks
        super().data_received(data)
        if self._marks != marks:  # a request began, or its headers or body ended, within `data`
            return
        if self._in_headers and not self.transport.is_closing():
            self._header_bytes += len(data)
            if self._header_bytes > self.bounds.max_header_bytes:
                self._too_large()

    def on_message_begin(self) -> None:
        """A new request: its headers are counted and timed from here."""
        super().on_message_begin()
        self._marks += 1
        self._in_headers = True
        self._header_bytes = 0

    def on_headers_complete(self) -> None:
        """The headers are in: refuse them if too large, else hand the request on."""
        self._stop_header_timer()
        self._marks += 1
        self._in_headers = False
        size = len(self.url) + sum(len(name) + len(value) + 4 for name, value in self.headers)
        if size > self.bounds.max_header_bytes:
            self._too_large()
            return
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        """The request's body is in; the next bytes are another request's."""
        super().on_message_complete()
        self._marks += 1
        self._in_headers = True
        self._header_bytes = 0

    def _start_header_timer(self) -> None:
        self._stop_header_timer()
        self._header_timer = self.loop.call_later(self.bounds.header_time, self._headers_late)

    def _stop_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_late(self) -> None:
        self._header_timer = None
        idle = self.cycle is None or self.cycle.response_complete  # no request of this connection under way
        if self._in_headers and idle and not self.transport.is_closing():
            self._answer(408, "RequestTimeout", f"the request's headers did not arrive within "
                         f"{self.bounds.header_time:g} s")

    def _too_large(self) -> None:
        self._answer(431, "RequestHeadersTooLarge", f"the request line and headers are larger than "
                     f"{self.bounds.max_header_bytes} bytes")

    def _answer(self, status: int, kind: str, message: str) -> None:
        """Write an error response and close the connection (no ASGI request was started)."""
        self._stop_header_timer()
        body = dumps(error_body(kind, message))
        head = (b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\nconnection: close\r\n\r\n"
                % (status, _REASONS[status], len(body)))
        self.transport.write(head + body)
        self.transport.close()


def protocol_for(bounds: Bounds) -> type[BoundedProtocol]:
    """The protocol class enforcing ``bounds``."""
    return type("BoundedHttp", (BoundedProtocol,), {"bounds": bounds, "__doc__": BoundedProtocol.__doc__})


class DrainingServer(uvicorn.Server):
    """A uvicorn server that ends every long poll as soon as it is asked to stop."""

    def __init__(self, config: uvicorn.Config, polls: LongPolls | None) -> None:
        super().__init__(config)
        self.polls = polls

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        """End the long polls (they answer at once), then stop as uvicorn does."""
        if self.polls is not None:
            self.polls.stop()
        await super().shutdown(sockets)


def serve(site: Any, host: str, port: int, bounds: Bounds, polls: LongPolls | None, **options: Any) -> None:
    """Run ``site`` on ``host:port`` under ``bounds`` until SIGTERM or Ctrl+C."""
    config = uvicorn.Config(
        site, host=host, port=port, http=protocol_for(bounds), timeout_keep_alive=bounds.keep_alive,
        timeout_graceful_shutdown=max(1, round(bounds.shutdown_grace)), **options)
    DrainingServer(config, polls).run()


__all__ = ["BoundedProtocol", "DrainingServer", "connection_cap", "protocol_for", "serve"]
