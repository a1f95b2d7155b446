"""415 for a JSON route sent another content type, before the body is read or parsed.

``curl -d '{...}'`` sends ``application/x-www-form-urlencoded`` unless told otherwise; without this
check the body would fail validation with a message that does not say what is wrong. Under ``/v1``, a
POST, PUT or PATCH whose ``Content-Type`` is given and is not JSON (``application/json`` or a
``+json`` type) is answered ``415`` with an error that says to send ``Content-Type: application/json``.
A request without a ``Content-Type`` (a body-less action) passes through.
"""

from __future__ import annotations

from jobloom.http.bounds import ASGIApp, Receive, Scope, Send
from jobloom.http.encode import dumps
from jobloom.http.errors import error_body

_METHODS = frozenset({"POST", "PUT", "PATCH"})


def is_json(content_type: str) -> bool:
    """Whether a ``Content-Type`` value names JSON (parameters such as ``charset`` are ignored)."""
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


class JsonOnly:
    """Answer 415 to a state-changing ``/v1`` request with a content type that is not JSON."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on, or answer 415 when it declares a body that is not JSON."""
        if scope["type"] == "http" and scope["method"] in _METHODS:
            path, root = scope.get("path", ""), scope.get("root_path", "")
            if root and path.startswith(root):
                path = path[len(root):]
            if path == "/v1" or path.startswith("/v1/"):
                for name, value in scope.get("headers", ()):
                    if name == b"content-type":
                        given = value.decode("latin-1")
                        if not is_json(given):
                            await _refuse(send, given)
                            return
        await self.app(scope, receive, send)


async def _refuse(send: Send, given: str) -> None:
    message = (f"the body must be JSON: send `Content-Type: application/json` (got {given!r}; "
               "curl -d sends a form content type unless given -H 'Content-Type: application/json')")
    body = dumps(error_body("UnsupportedMediaType", message, "Content-Type"))
    await send({"type": "http.response.start", "status": 415,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
