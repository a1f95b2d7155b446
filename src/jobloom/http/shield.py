"""What guards a server that takes no token (``jobloom serve --insecure-no-auth``, loopback only) from
other web sites a browser on the same machine visits.

Without tokens, the only thing between a hostile page and the API is the browser's same-origin policy,
which two tricks get around: DNS rebinding (a name of the attacker's that resolves to 127.0.0.1, so the
page's requests are same-origin to it) and "simple" cross-site requests (an HTML form, or ``fetch`` in
``no-cors`` mode, can send a POST without a body or with a form content type, and the server acts on
it even though the page never reads the answer). :class:`OpenShield` refuses both:

- a request whose ``Host`` is not one of the names the server was bound to (``421``);
- under ``/v1`` and ``/metrics``, a state-changing request (any method but GET, HEAD and OPTIONS) that
  carries neither a JSON content type nor an ``Authorization`` or ``X-Jobloom-Client`` header: a
  cross-site page can send none of those without a CORS preflight, which this server never answers
  (``403``).

The dashboard's own actions carry their session's CSRF token, and its login form its own (see
:mod:`jobloom.dashboard.session`), so they pass through.
"""

from __future__ import annotations

from jobloom.http.bounds import ASGIApp, Receive, Scope, Send
from jobloom.http.encode import dumps
from jobloom.http.errors import error_body

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
CLIENT_HEADER = b"x-jobloom-client"
"""A header a browser never sends by itself: a client without a JSON body sends it on a body-less POST."""
_GUARDED = ("/v1", "/metrics")


def host_names(host: str) -> frozenset[str]:
    """The ``Host`` names (without port) a server bound to ``host`` answers to: the address itself and,
    for a loopback address, ``localhost``, ``127.0.0.1`` and ``[::1]``."""
    names = {host.lower(), f"[{host.strip('[]').lower()}]" if ":" in host else host.lower()}
    names |= {"localhost", "127.0.0.1", "[::1]"}
    return frozenset(names)


def _hostname(value: str) -> str:
    """The name part of a ``Host`` header (``[::1]:8080`` -> ``[::1]``, ``a:80`` -> ``a``)."""
    value = value.strip().lower()
    if value.startswith("["):
        return value.partition("]")[0] + "]"
    return value.partition(":")[0]


class OpenShield:
    """Refuse DNS-rebound and cross-site requests to an API that takes no token (see the module)."""

    def __init__(self, app: ASGIApp, names: frozenset[str]) -> None:
        self.app = app
        self.names = names

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on, or refuse it."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers", ()))
        host = headers.get(b"host", b"").decode("latin-1")
        if _hostname(host) not in self.names:
            await _refuse(send, 421, "Misdirected", f"this server answers to {', '.join(sorted(self.names))}, "
                          f"not to Host {host[:100]!r} (a page of another site reaching it by DNS rebinding?)")
            return
        path: str = scope.get("path", "")
        if scope["method"] not in SAFE_METHODS and path.startswith(_GUARDED) and not _deliberate(headers):
            await _refuse(send, 403, "Forbidden", "a request that changes something must send a JSON body "
                          "(Content-Type: application/json), an Authorization header or X-Jobloom-Client: "
                          "a web page of another site can send none of them (cross-site request forgery)")
            return
        await self.app(scope, receive, send)


def _deliberate(headers: dict[bytes, bytes]) -> bool:
    """Whether the request carries something a cross-site form or no-cors fetch cannot send."""
    if b"authorization" in headers or CLIENT_HEADER in headers:
        return True
    media = headers.get(b"content-type", b"").partition(b";")[0].strip().lower()
    return media == b"application/json" or (media.startswith(b"application/") and media.endswith(b"+json"))


async def _refuse(send: Send, status: int, kind: str, message: str) -> None:
    body = dumps(error_body(kind, message))
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
