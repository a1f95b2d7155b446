"""Push performers: a binding whose work is an HTTP POST to a service (``HttpPerformer``), signed with the
app's ``signing_secret``, and the one pooled HTTP client that a worker process sends them with.

What the answer means: 2xx, succeeded (the JSON body is the result); 429 or 503, another attempt at the
time ``Retry-After`` names (or after the backoff without one); any other 3xx or 4xx, a permanent failure
with the status and an excerpt of the body; 5xx, a timeout or a connection error, a failed attempt
(retried after the backoff). The worker's own timer stops a request at the performer's ``timeout``.

The error a failed attempt stores (which every ``read`` token sees) is a bounded summary, never the
receiver's answer verbatim: the status line, at most :data:`EXCERPT_CHARS` characters of the body on
one line with control characters escaped, and URLs (the performer's, a redirect's ``Location``) as
scheme, host, port and path only: user info, query and fragment, which may hold credentials, are
never recorded.
"""

from __future__ import annotations

import email.utils
import json
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import pydantic

from jobloom.core.errors import InvalidOption
from jobloom.core.extras import needs_extra
from jobloom.core.options import MAX_DELAY
from jobloom.core.signals import Permanent, Retry
from jobloom.core.signing import SIGNATURE_HEADER, secret_bytes, signature_header
from jobloom.core.text import name_problem
from jobloom.engine.performer import MAX_RESULT_BYTES, Performer, describe_validation

if TYPE_CHECKING:
    import httpx

    from jobloom.engine.performer import PerformerSpec

_BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")  # can reorder what is shown

P = TypeVar("P")
R = TypeVar("R")

EXCERPT_CHARS = 200
"""How many characters of an error response's body a failure records (on one line, escaped)."""
EXCERPT_BYTES = 4 * EXCERPT_CHARS
"""How much of an error response's body is read (enough for :data:`EXCERPT_CHARS` characters)."""
URL_CHARS = 200
"""How many characters of a URL (scheme, host, port and path) a failure records."""
NETWORK_MARGIN = 1.0
"""Seconds past the performer's ``timeout`` at which the HTTP client gives up by itself (the worker's
timer, at ``timeout``, normally stops the request first, and the attempt ends as ``timeout``)."""


class PushFailed(Exception):
    """A push attempt that failed for a reason worth retrying: a 5xx answer, a connection error."""


class HttpPerformer(Performer[P, R]):
    """A performer whose work is done by an HTTP service: each attempt POSTs the job to ``url``.

    The body is ``{"job_id", "attempt", "binding", "payload", "deadline"}`` (``deadline``: epoch seconds,
    or null without a timeout), with ``Idempotency-Key: <job_id>:<attempt>`` and ``Jobloom-Signature:
    t=<unix>,v1=<hex HMAC-SHA256 of "<t>.<body>">,v2=<hex HMAC-SHA256 of "<t>.<Idempotency-Key>.<body>">``
    (``signing_secret``, else the app's; the receiver checks it with :func:`jobloom.verify_signature`).
    ``headers`` are sent too. Every performer option applies
    (``concurrency``, ``rate_limit``, ``max_attempts``, ``backoff``, ``timeout``...).
    """

    url: ClassVar[str] = ""
    headers: ClassVar[Mapping[str, str]] = {}
    signing_secret: ClassVar[str | bytes | None] = None
    """This performer's own signing secret (at least 16 bytes); None: the app's ``signing_secret``."""
    pushes: ClassVar[bool] = True

    _push: PushClient

    async def perform(self, payload: P) -> R:
        """POST the job to ``url`` and turn the answer into the attempt's outcome."""
        return await self._push.post(self, payload)  # type: ignore[no-any-return]

    @classmethod
    def check_options(cls, binding: str) -> None:
        """Refuse a missing or malformed ``url`` and malformed ``headers``."""
        with needs_extra("web", "HttpPerformer"):
            import httpx  # imported by the apps that push only

        url = cls.url
        try:
            parsed = httpx.URL(url) if isinstance(url, str) else None
        except (httpx.InvalidURL, TypeError):
            parsed = None
        if parsed is None or parsed.scheme not in ("http", "https") or not parsed.host:
            raise InvalidOption("url", url, "an http:// or https:// URL with a host", binding)
        if cls.signing_secret is not None:
            try:
                secret_bytes(cls.signing_secret)
            except InvalidOption as exc:
                raise InvalidOption("signing_secret", "<hidden>", "a str or bytes secret of at least 16 bytes",
                                    binding) from exc
        headers = cls.headers
        if not isinstance(headers, Mapping):
            raise InvalidOption("headers", headers, "a dict of header name -> value", binding)
        for name, value in headers.items():
            problem = name_problem(name, 256) or (None if isinstance(value, str) and "\n" not in value
                                                  and "\r" not in value else "a one-line string value")
            if problem is not None:
                raise InvalidOption(f"headers[{name!r}]", value, problem, binding)
            if name.lower() in ("idempotency-key", SIGNATURE_HEADER.lower(), "content-type"):
                raise InvalidOption(f"headers[{name!r}]", value, "a header jobloom does not set itself", binding)


def give_client(performer: Performer[Any, Any], client: PushClient) -> None:
    """Give an :class:`HttpPerformer` of an attempt the worker's pooled ``client``, which sends its POST."""
    performer._push = client  # type: ignore[attr-defined]


class PushClient:
    """The pooled HTTP client of one worker process, shared by all its push performers' attempts."""

    def __init__(self, secret: bytes, specs: Mapping[str, PerformerSpec]) -> None:
        self.secret = secret
        self.specs = specs
        with needs_extra("web", "HttpPerformer"):
            import httpx  # imported by the apps that push only

        self.client = httpx.AsyncClient(follow_redirects=False, headers={"User-Agent": "jobloom"})

    async def aclose(self) -> None:
        """Close the pooled connections."""
        await self.client.aclose()

    def body(self, performer: HttpPerformer[Any, Any], payload: Any) -> bytes:
        """The request body of one attempt (the payload as the job stores it)."""
        ctx = performer.ctx
        spec = self.specs[ctx.binding]
        data = spec.payload_adapter.dump_json(payload)
        head = json.dumps({"job_id": ctx.job_id, "attempt": ctx.attempt, "binding": ctx.binding})
        return (head[:-1].encode() + b', "payload": ' + data + b', "deadline": '
                + json.dumps(ctx.deadline).encode() + b"}")

    async def post(self, performer: HttpPerformer[Any, Any], payload: Any) -> Any:
        """Send one attempt; return the result, or raise what the answer means (see the module)."""
        import httpx

        ctx = performer.ctx
        spec = self.specs[ctx.binding]
        body = self.body(performer, payload)
        key = f"{ctx.job_id}:{ctx.attempt}"
        secret = self.secret if performer.signing_secret is None else secret_bytes(performer.signing_secret)
        headers = {**performer.headers, "Content-Type": "application/json", "Idempotency-Key": key,
                   SIGNATURE_HEADER: signature_header(secret, body, idempotency_key=key)}
        timeout = None if spec.timeout is None else spec.timeout + NETWORK_MARGIN
        request = self.client.build_request("POST", performer.url, content=body, headers=headers, timeout=timeout)
        try:
            response = await self.client.send(request, stream=True)
            try:
                ok = 200 <= response.status_code < 300
                data = await _read(response, MAX_RESULT_BYTES + 1 if ok else EXCERPT_BYTES)
            finally:
                await response.aclose()
        except httpx.TimeoutException as exc:
            raise PushFailed(f"POST {safe_url(performer.url)} timed out ({type(exc).__name__})") from None
        except httpx.HTTPError as exc:
            said = _one_line(str(exc).replace(performer.url, safe_url(performer.url)), EXCERPT_CHARS)
            raise PushFailed(f"POST {safe_url(performer.url)} failed: {type(exc).__name__}: {said}") from None
        return _outcome(spec, response, data, _hidden(performer))


async def _read(response: httpx.Response, limit: int) -> bytes:
    """Up to ``limit`` bytes of the body (the rest is not read)."""
    parts: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        parts.append(chunk)
        size += len(chunk)
        if size >= limit:
            break
    return b"".join(parts)[:limit]


def _status(response: httpx.Response) -> str:
    return _one_line(f"HTTP {response.status_code} {response.reason_phrase}", 100)


def _one_line(text: str, limit: int) -> str:
    """``text`` on one line (runs of whitespace as one space), control characters and bidirectional
    overrides escaped (``\\x1b``), cut to ``limit`` characters (``...`` says so)."""
    text = " ".join(text.split())
    cut = len(text) > limit
    text = text[:limit]
    if not text.isprintable() or any(c in _BIDI for c in text):
        text = "".join(c if c.isprintable() and c not in _BIDI else c.encode("unicode_escape").decode("ascii")
                       for c in text)
    return text + ("..." if cut else "")


def _excerpt(data: bytes, hidden: tuple[str, ...] = ()) -> str:
    """The start of an error response's body, as a failure records it (see the module), with what the
    request carried that must not be recorded (``hidden``) replaced by ``[hidden]``."""
    text = _one_line(_hide(data[:EXCERPT_BYTES].decode("utf-8", errors="replace"), hidden), EXCERPT_CHARS)
    return text or "(empty body)"


MIN_HIDDEN = 6
"""Shorter values of a request are not hidden in what a failure records (they cannot be told from text)."""


def _hidden(performer: HttpPerformer[Any, Any]) -> tuple[str, ...]:
    """What a receiver's answer may echo of the request that a failure must not record: the values of the
    performer's headers, and its URL's user info and query (longest first)."""
    import httpx

    found = [str(v) for v in performer.headers.values()]
    try:
        url = httpx.URL(performer.url)
        found += [url.username, url.password, url.query.decode("ascii", "replace"),
                  *(v for _, v in url.params.multi_items())]
    except (httpx.InvalidURL, TypeError, ValueError):
        pass
    return tuple(sorted({v for v in found if len(v) >= MIN_HIDDEN}, key=len, reverse=True))


def _hide(text: str, hidden: tuple[str, ...]) -> str:
    for value in hidden:
        text = text.replace(value, "[hidden]")
    return text


def safe_url(url: str | None) -> str:
    """``url`` as a failure records it: scheme, host, port and path, cut to :data:`URL_CHARS` characters;
    user info, query and fragment (which may hold credentials) are left out, and ``[...]`` says so."""
    import httpx

    if not url:
        return "(none)"
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError, ValueError):
        return "(unreadable URL)"
    origin = ""
    if parsed.scheme and parsed.host:
        origin = f"{parsed.scheme}://{parsed.host}" + (f":{parsed.port}" if parsed.port is not None else "")
    dropped = bool(parsed.userinfo or parsed.query or parsed.fragment or "#" in url)
    return _one_line(origin + parsed.path, URL_CHARS) + (" [...]" if dropped else "")


def _outcome(spec: PerformerSpec, response: httpx.Response, data: bytes, hidden: tuple[str, ...] = ()) -> Any:
    status = response.status_code
    if 200 <= status < 300:
        if len(data) > MAX_RESULT_BYTES:
            raise Permanent(f"{_status(response)}, but the response body is over {MAX_RESULT_BYTES} bytes "
                            "(the result limit)")
        value = _json_or_text(data)
        try:
            return spec.result_adapter.validate_python(value)
        except pydantic.ValidationError as exc:
            raise Permanent(f"{_status(response)}, but the response body does not match the result type: "
                            f"{_one_line(_hide(describe_validation(exc), hidden), 2 * EXCERPT_CHARS)}") from None
    if status in (429, 503):
        after = retry_after(response.headers.get("Retry-After"))
        when = "after the backoff" if after is None else f"in {after:g} s (Retry-After)"
        raise Retry(after, f"{_status(response)}: retrying {when}: {_excerpt(data, hidden)}")
    if status >= 500:
        raise PushFailed(f"{_status(response)}: {_excerpt(data, hidden)}")
    if 300 <= status < 400:
        where = _hide(safe_url(response.headers.get("Location")), hidden)
        raise Permanent(f"{_status(response)} (redirects are not followed; Location: {where}): "
                        f"{_excerpt(data, hidden)}")
    raise Permanent(f"{_status(response)}: {_excerpt(data, hidden)}")


def _json_or_text(data: bytes) -> Any:
    """The body as JSON; a body that is not JSON as its text; an empty body as None."""
    if not data.strip():
        return None

    def refuse(name: str) -> Any:
        raise ValueError(name)

    try:
        return json.loads(data, parse_constant=refuse)
    except (ValueError, RecursionError):
        return data.decode("utf-8", errors="replace")


def retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header: delay-seconds or an HTTP date; None if absent or unreadable."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return min(float(value), MAX_DELAY)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None or when.tzinfo is None:
        return None
    return min(MAX_DELAY, max(0.0, when.timestamp() - (time.time() if now is None else now)))
