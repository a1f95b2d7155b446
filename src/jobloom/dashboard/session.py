"""The dashboard's sessions: a login with an API token, a signed session cookie, CSRF tokens and scopes.

A login takes a token that carries the ``read`` scope (``admin`` carries every scope) and sets a
cookie holding the token's prefix, the login time and a random nonce, signed with the server's key
(HMAC-SHA256). The cookie never holds the token's secret. Every request reads the token again from
the API's token cache (:class:`~jobloom.http.auth.TokenCache`): a revoked token ends its sessions
within the cache's time to live, and the scopes are the token's current ones. The CSRF token of a
session is an HMAC of its nonce; every action (a POST) must send it, in the form (``csrf``) or in
the ``X-CSRF-Token`` header (htmx requests).

Logging out ends the session on the server: its nonce is kept as ended until the session would have
expired, so the cookie is refused even if it was copied. The login form is protected too (login
CSRF: another site's form must not log the browser into the attacker's session): showing the form
sets a short-lived ``jobloom_login`` cookie (``SameSite=Strict``, so another site's form never sends
it) whose HMAC the form carries; a login without both is refused.

The cookie is ``HttpOnly`` and ``SameSite=Strict``, and ``Secure`` when the dashboard is served over
HTTPS. The key is made when the server starts, unless one is given (``session_key``): a restart ends
every session.

Where the API takes no token (``auth="off"``), the login page opens a session without one, with
every scope.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
import time
from dataclasses import dataclass

from starlette.requests import Request

from jobloom.http.auth import Guard
from jobloom.http.tokens import SCOPES, parse_token

COOKIE = "jobloom_session"
"""The session cookie's name."""
SESSION_TTL = 12 * 3600.0
"""How long a session lasts after its login (seconds)."""
CSRF_HEADER = "x-csrf-token"
"""The header htmx sends the CSRF token in."""
LOGIN_COOKIE = "jobloom_login"
"""The cookie of the login form, whose HMAC the form carries (login CSRF)."""
LOGIN_TTL = 3600
"""How long a login form stays usable (seconds)."""
_OPEN = "-"  # the prefix of a session opened without a token


class LoginRefused(Exception):
    """The token given at login does not open a session (the message says why)."""


@dataclass(frozen=True, slots=True)
class Session:
    """A logged-in browser: the token it logged in with (``name``), its scopes and its CSRF token."""

    name: str
    prefix: str | None
    issued: float
    csrf: str
    scopes: frozenset[str]
    nonce: str = ""

    def allows(self, scope: str) -> bool:
        """Whether the session's token carries ``scope``."""
        return scope in self.scopes or "admin" in self.scopes


class Sessions:
    """Makes and checks session cookies for the tokens ``guard`` knows."""

    def __init__(self, guard: Guard, key: bytes | None = None, ttl: float = SESSION_TTL) -> None:
        self.guard = guard
        self.key = key if key is not None else os.urandom(32)
        self.ttl = ttl
        self._ended: dict[str, float] = {}  # nonce -> when the session would have expired

    def _sign(self, text: str) -> str:
        digest = hmac.new(self.key, text.encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).decode().rstrip("=")

    async def open_without_token(self) -> bool:
        """Whether the API takes no token (so neither does the login)."""
        return self.guard.mode == "off"

    def login_form(self) -> tuple[str, str]:
        """A new login form's cookie value and the CSRF token its form carries."""
        nonce = secrets.token_urlsafe(18)
        return nonce, self._sign(f"login:{nonce}")

    def login_form_ok(self, request: Request, sent: str | None) -> bool:
        """Whether a login POST carries the form's CSRF token for the browser's login cookie."""
        nonce = request.cookies.get(LOGIN_COOKIE) or ""
        expected = self._sign(f"login:{nonce}")
        return bool(nonce) and _same(sent or "", expected)

    @staticmethod
    def login_cookie_header(nonce: str, request: Request, max_age: int = LOGIN_TTL) -> str:
        """The ``Set-Cookie`` header of the login form's cookie (``max_age=0``: removed, once logged in)."""
        secure = "; Secure" if request.url.scheme == "https" else ""
        return f"{LOGIN_COOKIE}={nonce}; Path=/; Max-Age={max_age}; HttpOnly; SameSite=Strict{secure}"

    def end(self, session: Session) -> None:
        """End ``session`` on the server (logout): its cookie is refused from now on."""
        now = time.time()
        self._ended = {n: t for n, t in self._ended.items() if t > now}
        self._ended[session.nonce] = session.issued + self.ttl

    async def login(self, token: str) -> str:
        """The cookie value of a new session for ``token``; ``LoginRefused`` if it cannot open one."""
        token = token.strip()
        prefix = _OPEN
        if token or not await self.open_without_token():
            parsed = parse_token(token)
            if parsed is None:
                raise LoginRefused("that is not a jobloom token (they start with jlt_)")
            found = await self.guard.cache.find(parsed[0])
            if found is None or not found.matches(parsed[1]):
                raise LoginRefused("the token is not valid (wrong or revoked)")
            if not found.allows("read"):
                raise LoginRefused(f"token {found.name!r} lacks the 'read' scope the dashboard needs")
            prefix = parsed[0]
        body = f"{prefix}.{int(time.time())}.{secrets.token_urlsafe(18)}"
        return f"{body}.{self._sign(body)}"

    async def read(self, request: Request) -> Session | None:
        """The request's session, or None (no cookie, a bad signature, expired, or its token revoked)."""
        value = request.cookies.get(COOKIE)
        if not value or value.count(".") != 3:
            return None
        body, _, signature = value.rpartition(".")
        if not _same(signature, self._sign(body)):
            return None
        prefix, issued_text, nonce = body.split(".")
        if not (issued_text.isascii() and issued_text.isdigit()) or time.time() - int(issued_text) > self.ttl:
            return None
        if nonce in self._ended:
            return None
        csrf = self._sign(f"csrf:{nonce}")
        if prefix == _OPEN:
            if not await self.open_without_token():
                return None
            return Session("(no token)", None, float(issued_text), csrf, frozenset(SCOPES), nonce)
        token = await self.guard.cache.find(prefix)
        if token is None or not token.allows("read"):
            return None
        return Session(token.name, prefix, float(issued_text), csrf, token.scopes, nonce)

    @staticmethod
    def csrf_ok(session: Session, request: Request, sent: str | None) -> bool:
        """Whether the request carries the session's CSRF token (form field or header)."""
        given = sent or request.headers.get(CSRF_HEADER) or ""
        return _same(given, session.csrf)

    def cookie_header(self, value: str, request: Request) -> str:
        """The ``Set-Cookie`` header of a session (``Secure`` over HTTPS)."""
        secure = "; Secure" if request.url.scheme == "https" else ""
        return f"{COOKIE}={value}; Path=/; Max-Age={int(self.ttl)}; HttpOnly; SameSite=Strict{secure}"

    @staticmethod
    def clear_header(request: Request) -> str:
        """The ``Set-Cookie`` header that ends the session in the browser."""
        secure = "; Secure" if request.url.scheme == "https" else ""
        return f"{COOKIE}=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict{secure}"


def _same(given: str, expected: str) -> bool:
    """Whether ``given`` (anything a client sent, non-ASCII included) equals ``expected``, in constant time."""
    return hmac.compare_digest(given.encode("utf-8", "surrogatepass"), expected.encode())


__all__ = ["COOKIE", "CSRF_HEADER", "LOGIN_COOKIE", "SESSION_TTL", "LoginRefused", "Session", "Sessions"]
