"""Request signatures of push performers: how a request is signed, and how its receiver checks it.

A signed request carries ``Jobloom-Signature: t=<unix seconds>,v1=<hex>,v2=<hex>``: ``v1`` is the
HMAC-SHA256, keyed with the app's ``signing_secret`` (or the performer's own), of ``"<t>.<body>"`` (the
body's exact bytes, which hold the job's id, attempt and binding); ``v2`` of
``"<t>.<Idempotency-Key>.<body>"``, so that the key a receiver acts on is covered too.
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


def signature(secret: bytes, timestamp: int, body: bytes, idempotency_key: str | None = None) -> str:
    """The hex HMAC-SHA256 of ``"<timestamp>.<body>"`` (scheme ``v1``), or with ``idempotency_key`` of
    ``"<timestamp>.<idempotency_key>.<body>"`` (scheme ``v2``)."""
    head = str(timestamp) if idempotency_key is None else f"{timestamp}.{idempotency_key}"
    return hmac.new(secret, head.encode() + b"." + body, hashlib.sha256).hexdigest()


def signature_header(secret: bytes, body: bytes, timestamp: int | None = None,
                     idempotency_key: str | None = None) -> str:
    """The value of the ``Jobloom-Signature`` header for ``body``, signed now (or at ``timestamp``): ``v1``,
    and ``v2`` too when the request carries an ``idempotency_key``."""
    t = int(time.time()) if timestamp is None else timestamp
    value = f"t={t},v1={signature(secret, t, body)}"
    if idempotency_key is not None:
        value += f",v2={signature(secret, t, body, idempotency_key)}"
    return value


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
    *, now: float | None = None, scheme: str = "v2",
) -> bool:
    """Check a push request's ``Jobloom-Signature`` header against its raw ``body``; returns True.

    ``headers``: any mapping of the request's headers (the name is matched without regard to case).
    ``scheme="v2"`` (the default) requires the signature that covers the ``Idempotency-Key`` header as
    well as the body, so a request replayed within the tolerance under another key is refused;
    ``scheme="v1"`` accepts the body-only signature of older senders. Raises :class:`InvalidSignature`,
    saying why, when the header is missing or malformed, when its timestamp is more than ``tolerance``
    seconds from ``now`` (default: this host's clock), or when no signature of the scheme matches
    (compared in constant time)."""
    key = secret_bytes(secret, "secret")
    if not (isinstance(tolerance, (int, float)) and math.isfinite(tolerance) and tolerance >= 0):
        raise InvalidOption("tolerance", tolerance,
                            "a finite number of seconds >= 0 (NaN or inf would accept any time)")
    if now is not None and not (isinstance(now, (int, float)) and math.isfinite(now)):
        raise InvalidOption("now", now, "a finite timestamp")
    if scheme not in ("v1", "v2"):
        raise InvalidOption("scheme", scheme, "'v2' (body and Idempotency-Key) or 'v1' (body only)")
    data = body.encode() if isinstance(body, str) else body
    raw = _header(headers, SIGNATURE_HEADER)
    if raw is None:
        raise InvalidSignature(f"no {SIGNATURE_HEADER} header")
    timestamp, given = _parse(raw, scheme)
    clock = time.time() if now is None else now
    if abs(clock - timestamp) > tolerance:
        raise InvalidSignature(f"the signature's timestamp {timestamp} is {clock - timestamp:+.0f} s from now; "
                               f"the tolerance is {tolerance:g} s")
    idempotency_key = None
    if scheme == "v2":
        idempotency_key = _header(headers, "Idempotency-Key")
        if idempotency_key is None:
            raise InvalidSignature("no Idempotency-Key header, which a v2 signature covers")
    expected = signature(key, timestamp, data, idempotency_key).encode()
    matched = False
    for candidate in given:  # every candidate is compared, in constant time each
        matched |= hmac.compare_digest(expected, candidate.encode("utf-8", "surrogatepass"))
    if not matched:
        what = "the body" if scheme == "v1" else "the body and Idempotency-Key"
        raise InvalidSignature(f"the signature does not match {what} (tampered with, or another secret)")
    return True


def _parse(raw: str, scheme: str) -> tuple[int, list[str]]:
    """The timestamp and the signatures of ``scheme`` in a ``Jobloom-Signature`` header's value."""
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
        elif name == scheme:
            given.append(value)
    if timestamp is None or not given:
        raise InvalidSignature(f"{SIGNATURE_HEADER} needs t= and {scheme}= parts; got {raw[:200]!r}")
    return timestamp, given
