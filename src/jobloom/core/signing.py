"""Request signatures of push performers: how a request is signed, and how its receiver checks it.

A signed request carries ``Jobloom-Signature: t=<unix seconds>,v1=<hex>``, where ``<hex>`` is the
HMAC-SHA256, keyed with the app's ``signing_secret``, of ``"<t>.<body>"`` (the body's exact bytes).
The receiver recomputes it (in constant time), and refuses a timestamp further than ``tolerance``
seconds from its own clock, so that a captured request cannot be replayed later.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import time
from collections.abc import Mapping
from typing import Any

from jobloom.core.errors import InvalidOption, JobloomError

SIGNATURE_HEADER = "Jobloom-Signature"
MIN_SECRET_BYTES = 16


class InvalidSignature(JobloomError):
    """A signed request failed :func:`verify_signature`: the message says why (missing, malformed,
    too old, or not matching the body: tampered with, or signed with another secret)."""


def secret_bytes(secret: object, field: str = "signing_secret") -> bytes:
    """The secret as bytes; ``InvalidOption`` unless it is a str or bytes of at least 16 bytes."""
    if isinstance(secret, str):
        data = secret.encode()
    elif isinstance(secret, bytes):
        data = secret
    else:
        raise InvalidOption(field, "<hidden>" if secret else secret, "a str or bytes secret")
    if len(data) < MIN_SECRET_BYTES:
        raise InvalidOption(field, f"<{len(data)} bytes>", f"a secret of at least {MIN_SECRET_BYTES} bytes")
    return data


def signature(secret: bytes, timestamp: int, body: bytes) -> str:
    """The hex HMAC-SHA256 of ``"<timestamp>.<body>"``."""
    return hmac.new(secret, str(timestamp).encode() + b"." + body, hashlib.sha256).hexdigest()


def signature_header(secret: bytes, body: bytes, timestamp: int | None = None) -> str:
    """The value of the ``Jobloom-Signature`` header for ``body``, signed now (or at ``timestamp``)."""
    t = int(time.time()) if timestamp is None else timestamp
    return f"t={t},v1={signature(secret, t, body)}"


def _header(headers: Mapping[str, Any], name: str) -> str | None:
    value = headers.get(name)
    if value is None:
        lower = name.lower()
        value = next((v for k, v in headers.items() if isinstance(k, str) and k.lower() == lower), None)
    if isinstance(value, bytes):
        value = value.decode("latin-1")
    return value if isinstance(value, str) else None


def verify_signature(
    secret: str | bytes, headers: Mapping[str, Any], body: bytes | str, tolerance: float = 300,
    *, now: float | None = None,
) -> bool:
    """Check a push request's ``Jobloom-Signature`` header against its raw ``body``; returns True.

    ``headers``: any mapping of the request's headers (the name is matched without regard to case).
    Raises :class:`InvalidSignature`, saying why, when the header is missing or malformed, when its
    timestamp is more than ``tolerance`` seconds from ``now`` (default: this host's clock), or when no
    ``v1`` signature matches the body (compared in constant time)."""
    key = secret_bytes(secret, "secret")
    if not (isinstance(tolerance, (int, float)) and math.isfinite(tolerance) and tolerance >= 0):
        raise InvalidOption("tolerance", tolerance,
                            "a finite number of seconds >= 0 (NaN or inf would accept any time)")
    if now is not None and not (isinstance(now, (int, float)) and math.isfinite(now)):
        raise InvalidOption("now", now, "a finite timestamp")
    data = body.encode() if isinstance(body, str) else body
    raw = _header(headers, SIGNATURE_HEADER)
    if raw is None:
        raise InvalidSignature(f"no {SIGNATURE_HEADER} header")
    timestamp: int | None = None
    given: list[str] = []
    for part in raw.split(","):
        name, sep, value = part.strip().partition("=")
        if not sep:
            raise InvalidSignature(f"malformed {SIGNATURE_HEADER} header: {raw[:200]!r}")
        if name == "t":
            if not (value.isascii() and value.isdigit()):
                raise InvalidSignature(f"malformed timestamp in {SIGNATURE_HEADER}: {value[:40]!r}")
            timestamp = int(value)
        elif name == "v1":
            given.append(value)
    if timestamp is None or not given:
        raise InvalidSignature(f"{SIGNATURE_HEADER} needs t= and v1= parts; got {raw[:200]!r}")
    clock = time.time() if now is None else now
    if abs(clock - timestamp) > tolerance:
        raise InvalidSignature(f"the signature's timestamp {timestamp} is {clock - timestamp:+.0f} s from now; "
                               f"the tolerance is {tolerance:g} s")
    expected = signature(key, timestamp, data)
    matched = False
    for candidate in given:  # every candidate is compared, in constant time each
        matched |= hmac.compare_digest(expected.encode(), candidate.encode("utf-8", "surrogatepass"))
    if not matched:
        raise InvalidSignature("the signature does not match the body (tampered with, or another secret)")
    return True
