"""Every number that bounds what a client can make the server hold: bodies, headers, time, connections
and long polls (see ``SECURITY.md``, "Limits").

:class:`Bounds` gathers them with their defaults; :func:`body_cap` says which body a request may send,
by its exact route and by whether its caller is authenticated; :func:`refuse` answers a request the
server will not read further (``Connection: close``, so what the client still sends is not read).
"""

from __future__ import annotations

import re
import resource
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

from jobloom.engine.performer import MAX_PAYLOAD_BYTES
from jobloom.http.encode import dumps

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

MAX_BODY = MAX_PAYLOAD_BYTES + 64 * 1024
"""The largest request body of an authenticated caller: one payload at its limit plus room for the options."""
MAX_BATCH_BODY = 32 * 1024 * 1024
"""The largest body of ``POST /v1/jobs/batch`` and ``POST /v1/batches``."""
MAX_ANONYMOUS_BODY = 16 * 1024
"""The largest body of a caller without a valid token or session (the dashboard's login form)."""
MAX_CONNECTIONS = 1000
"""Open connections at most (fewer when the process may open fewer descriptors, see :func:`connection_cap`)."""
LONG_POLLS_PER_TOKEN = 100
"""Long polls (a claim with ``wait``, ``GET /v1/jobs/{id}/wait``) one token may hold at once."""

_BATCHES = frozenset({("POST", "/v1/jobs/batch"), ("POST", "/v1/batches")})
_PUBLIC = re.compile(r"/v1/(health|docs|redoc|openapi\.json|docs/assets/[^/]+)")
"""The API paths that take no token."""


@dataclass(frozen=True)
class Bounds:
    """The server's limits (all sizes in bytes, times in seconds)."""

    max_body: int = MAX_BODY
    """Body of an authenticated request (any route but the batch)."""
    max_batch_body: int = MAX_BATCH_BODY
    """Body of an authenticated ``POST /v1/jobs/batch`` or ``POST /v1/batches``."""
    max_anonymous_body: int = MAX_ANONYMOUS_BODY
    """Body of a request without a valid token or session."""
    body_idle: float = 10.0
    """Longest pause while a body arrives; 408 beyond."""
    body_time: float = 60.0
    """Longest time a whole body may take to arrive; 408 beyond."""
    max_header_bytes: int = 16 * 1024
    """Request line and headers together; 431 beyond (``jobloom serve``)."""
    header_time: float = 10.0
    """Longest time from a connection (or the first byte of a request) to its last header; 408 beyond
    (``jobloom serve``)."""
    keep_alive: int = 5
    """An idle keep-alive connection is closed after this long (``jobloom serve``)."""
    max_connections: int = MAX_CONNECTIONS
    """Open connections at most; one more is answered 503 and closed (``jobloom serve``)."""
    long_polls_per_token: int = LONG_POLLS_PER_TOKEN
    """Long polls one token may hold at once; 429 beyond."""
    shutdown_grace: float = 10.0
    """On SIGTERM, long polls end at once; other requests get this long to finish (``jobloom serve``)."""


def path_within(scope: Scope) -> str:
    """The request's path within this application (without the ``root_path`` it is mounted under)."""
    path: str = scope.get("path", "")
    root: str = scope.get("root_path", "")
    return path[len(root):] if root and path.startswith(root) else path


def needs_token(path: str) -> bool:
    """Whether a path of the API takes a token (everything under ``/v1`` but health and the docs, and
    ``/metrics``)."""
    if path == "/metrics":
        return True
    return (path == "/v1" or path.startswith("/v1/")) and _PUBLIC.fullmatch(path) is None


def body_cap(bounds: Bounds, method: str, path: str, authenticated: bool) -> int:
    """The largest body this request may send: by exact route, and small without a credential."""
    if not authenticated:
        return bounds.max_anonymous_body
    return bounds.max_batch_body if (method, path) in _BATCHES else bounds.max_body


def connection_cap(wanted: int) -> int:
    """``wanted`` connections, or fewer if the descriptor limit (``ulimit -n``) would run out first: each
    connection may hold two (its socket and, on SQLite, a wake-up socket), and 64 are kept for the store,
    logs and the listening socket."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return wanted
    return max(1, min(wanted, (soft - 64) // 2))


async def refuse(send: Send, status: int, kind: str, message: str, field: str | None = None,
                 headers: list[tuple[bytes, bytes]] | None = None) -> None:
    """Answer with the error envelope and close the connection (the rest of the request is not read)."""
    from jobloom.http.errors import error_body  # here: `jobloom serve`'s options import this module, not FastAPI
    body = dumps(error_body(kind, message, field))
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close"), *(headers or [])]})
    await send({"type": "http.response.body", "body": body})
