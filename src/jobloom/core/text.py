"""What text jobloom stores, and how: names and keys are checked, JSON is checked, free text is made storable.

Every store keeps these values as text, and neither may ever refuse one: a value that a store (or
its index) would reject is refused here first, with the field and the limit named, or (for text that
user code produces and nobody can correct, such as an error or a traceback) made storable.

* Names and keys (:func:`name_problem`, :func:`check_name`): non-empty, no control characters
  (``\\x00``-``\\x1f``, ``\\x7f``-``\\x9f``), no lone surrogates (UTF-8 cannot hold them), and at
  most a number of UTF-8 bytes.
* JSON values (:func:`json_problem`, :func:`dumped_problem`, :func:`plain_json`): stored losslessly
  as JSON text; ``NaN`` and infinities, lone surrogates and nesting deeper than
  :data:`MAX_JSON_DEPTH` are refused. Checks of text that a serializer produced are cheap; the
  exact walk of the value runs only when the text looks suspicious.
* Tags and metadata (:func:`check_tags`, :func:`check_meta`): at most :data:`MAX_TAGS` tags, each a
  name of at most :data:`MAX_TAG_CHARS` characters; metadata is a JSON object of at most
  :data:`MAX_META_BYTES` bytes as JSON text.
* Free text (:func:`storable_text`): NUL becomes ``\\x00``, a lone surrogate ``\\udc80`` (its escape),
  and text over the limit is cut in the middle, with a marker saying how much was left out.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from collections.abc import Callable
from typing import Any

from jobloom.core.errors import InvalidOption, JobNotFound

MAX_NAME_BYTES = 128
"""Binding, flow, node, step and event names: UTF-8 bytes at most."""
MAX_KEY_BYTES = 512
"""``unique_key``, ``concurrency_key`` and flow run ids: UTF-8 bytes at most."""
MAX_JSON_DEPTH = 64
"""Nesting of arrays and objects in a stored JSON value (payload, result, step result, event data, input)."""
MAX_ERROR_BYTES = 16 * 1024
"""An attempt's (or a job's) error text is cut beyond this many UTF-8 bytes."""
MAX_TRACEBACK_BYTES = 64 * 1024
"""An attempt's traceback is cut beyond this many UTF-8 bytes."""

MAX_TAGS = 16
"""Tags of one job, at most."""
MAX_TAG_CHARS = 64
"""Characters of one tag, at most."""
MAX_META_BYTES = 8 * 1024
"""A job's metadata (``meta``) as JSON text: UTF-8 bytes at most."""

_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
_ESCAPE = re.compile(rb"\\.", re.DOTALL)
_NOT_STRUCTURE = bytes(b for b in range(256) if b not in b'[]{}"')
_STRING = re.compile(rb'"[^"]*"')
_PAIR = re.compile(rb"\[\]|\{\}")
_REPLACEMENT = "\ufffd".encode()


def name_problem(value: object, limit: int) -> str | None:
    """Why ``value`` cannot be a stored name or key, or ``None`` when it can."""
    if not isinstance(value, str):
        return "a string"
    if not value:
        return "a non-empty string"
    control = _CONTROL.search(value)
    if control:
        return f"a string without control characters (found {control.group()!r} at {control.start()})"
    try:
        size = len(value.encode())
    except UnicodeEncodeError as exc:
        return f"a string without lone surrogates (found {value[exc.start]!r} at {exc.start})"
    if size > limit:
        return f"at most {limit} UTF-8 bytes (it has {size})"
    return None


def check_name(field: str, value: object, limit: int = MAX_KEY_BYTES, binding: str | None = None) -> str:
    """``value`` if it can be stored as the name or key ``field``; otherwise :class:`InvalidOption`."""
    problem = name_problem(value, limit)
    if problem is not None:
        raise InvalidOption(field, value, problem, binding)
    return value  # type: ignore[return-value]


def check_tags(value: object, binding: str | None = None, field: str = "tags") -> tuple[str, ...] | None:
    """Tags as stored: ``None`` for none; otherwise a list (or tuple, or set) of at most :data:`MAX_TAGS`
    names of at most :data:`MAX_TAG_CHARS` characters, duplicates dropped (first one kept), in order.
    Anything else is :class:`InvalidOption` naming the bad tag."""
    if value is None:
        return None
    if isinstance(value, str | bytes) or not isinstance(value, list | tuple | set | frozenset):
        raise InvalidOption(field, value, f"a list of at most {MAX_TAGS} strings (not a single string)", binding)
    for tag in value:
        problem = name_problem(tag, 4 * MAX_TAG_CHARS)
        if problem is None and len(tag) > MAX_TAG_CHARS:
            problem = f"at most {MAX_TAG_CHARS} characters (it has {len(tag)})"
        if problem is not None:
            raise InvalidOption(field, tag, f"each tag {problem}", binding)
    tags = tuple(dict.fromkeys(value))
    if len(tags) > MAX_TAGS:
        raise InvalidOption(field, value, f"at most {MAX_TAGS} tags (it has {len(tags)})", binding)
    return tags or None


def check_meta(value: object, binding: str | None = None) -> str | None:
    """Metadata as stored (JSON text), or ``None`` for none: a JSON object (string keys) of at most
    :data:`MAX_META_BYTES` bytes once encoded; anything else is :class:`InvalidOption`."""
    if value is None:
        return None
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise InvalidOption("meta", value, "a dict of JSON data with string keys", binding)
    try:
        text = plain_json(value)
    except ValueError as exc:
        raise InvalidOption("meta", value, f"JSON data: {exc}", binding) from None
    size = len(text.encode())
    if size > MAX_META_BYTES:
        raise InvalidOption("meta", value, f"at most {MAX_META_BYTES} bytes as JSON (it has {size})", binding)
    return None if not value else text


def storable_text(text: str | None, limit: int) -> str | None:
    """``text`` made storable by any store: NUL and lone surrogates escaped, cut to ``limit`` UTF-8 bytes.

    A cut keeps the beginning and the end (where a traceback names the error) and says, between
    them, how many bytes were left out.
    """
    if text is None:
        return None
    if "\x00" in text:
        text = text.replace("\x00", "\\x00")
    try:
        data = text.encode()
    except UnicodeEncodeError:
        data = text.encode("utf-8", "backslashreplace")
        text = data.decode()
    if len(data) <= limit:
        return text
    room = max(0, limit - 64)
    head, tail = room // 2, room - room // 2
    cut = len(data) - head - tail
    marker = f"\n[... {cut} bytes cut: the limit is {limit} bytes ...]\n"
    return (data[:head].decode(errors="ignore") + marker
            + data[len(data) - tail:].decode(errors="ignore"))


def too_deep(data: bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether JSON text ``data`` nests arrays and objects deeper than ``limit``; never recurses.

    Escapes are dropped, then everything but brackets and quotes, then strings: what is left are
    the brackets, whose innermost pairs are peeled one level at a time.
    """
    if data.count(b"[") + data.count(b"{") <= limit:
        return False
    if b"\\" in data:
        data = _ESCAPE.sub(b"", data)
    rest = data.translate(None, _NOT_STRUCTURE)
    rest = rest.replace(b'""', b"")  # most strings hold no bracket
    if b'"' in rest:
        rest = _STRING.sub(b"", rest)
    for _ in range(limit):
        peeled = _PAIR.sub(b"", rest)  # only the pairs there before this pass: one level
        if len(peeled) == len(rest):
            return False
        rest = peeled
    return bool(rest)


def json_problem(value: Any, limit: int = MAX_JSON_DEPTH) -> str | None:
    """Why the plain value ``value`` cannot be stored losslessly as JSON, or ``None``; walks it without recursion.

    Refused: NaN and infinities, strings (and keys) with lone surrogates, nesting deeper than ``limit``.
    """
    todo: list[tuple[Any, int]] = [(value, 0)]
    while todo:
        item, depth = todo.pop()
        if isinstance(item, str):
            if not _encodable(item):
                return f"a string with a lone surrogate ({_surrogate(item)!r}), which UTF-8 cannot hold"
        elif isinstance(item, float):
            if not math.isfinite(item):
                return f"{item!r}, which JSON cannot hold (NaN and infinities are refused)"
        elif isinstance(item, dict | list | tuple):
            if depth >= limit:
                return f"arrays and objects nested deeper than {limit}"
            if isinstance(item, dict):
                todo.extend((k, depth + 1) for k in item)
                todo.extend((v, depth + 1) for v in item.values())
            else:
                todo.extend((v, depth + 1) for v in item)
    return None


def dumped_problem(data: bytes, value: Callable[[], Any], *, nulls_may_hide_nan: bool = False) -> str | None:
    """Why JSON ``data`` dumped by pydantic (NaN as constants) does not hold its value losslessly, or ``None``.

    Cheap: the exact walk of ``value()`` (the value as plain Python) runs only when ``data`` contains
    ``NaN``, ``Infinity``, U+FFFD (pydantic's stand-in for a lone surrogate in a key) or, when
    ``nulls_may_hide_nan`` (a type whose own config writes NaN as null), ``null``.
    """
    if too_deep(data):
        return f"arrays and objects nested deeper than {MAX_JSON_DEPTH}"
    if (b"NaN" in data or b"Infinity" in data or _REPLACEMENT in data
            or (nulls_may_hide_nan and b"null" in data)):
        return json_problem(value())
    return None


def plain_json(value: Any) -> str:
    """``value`` (plain JSON data) as JSON text; ``ValueError`` saying why when it cannot be stored losslessly."""
    problem = json_problem(value)
    if problem is not None:
        raise ValueError(problem)
    try:
        return json.dumps(value, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise ValueError(str(exc)) from None


def load_json_text(text: str) -> Any:
    """JSON text given by a person (the command line) as a value; ``ValueError`` saying why it is refused.

    The nesting is checked before parsing (a parser recurses), and NaN and infinities are refused.
    """
    if too_deep(text.encode(errors="surrogatepass")):
        raise ValueError(f"arrays and objects nested deeper than {MAX_JSON_DEPTH}")

    def constant(name: str) -> Any:
        raise ValueError(f"{name} is not JSON (NaN and infinities are refused)")

    return json.loads(text, parse_constant=constant)


def _encodable(text: str) -> bool:
    if text.isascii():
        return True
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def _surrogate(text: str) -> str:
    return next((c for c in text if "\ud800" <= c <= "\udfff"), "")


MAX_ID = 2**63 - 1
"""Job ids are 64-bit integers."""


def checked_id(job_id: object, field: str = "job_id", *, clamp: bool = False) -> int:
    """A job id as given by a caller: an integer; one outside the 64-bit range names no job (``JobNotFound``),
    or with ``clamp`` (a bound such as ``before``) is brought into it."""
    if isinstance(job_id, bool) or not isinstance(job_id, int):
        raise InvalidOption(field, job_id, "an integer job id")
    if not -MAX_ID <= job_id <= MAX_ID:
        if clamp:
            return max(-MAX_ID, min(MAX_ID, job_id))
        raise JobNotFound(job_id)
    return job_id


_KEEP = frozenset("\n\t")
_BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")  # can reorder what is shown


def literal(text: str) -> str:
    """``text`` with control characters (and bidirectional overrides) written as escapes (``\\x1b``)."""
    if text.isprintable() or all(c in _KEEP or (c.isprintable() and c not in _BIDI) for c in text):
        return text
    return "".join(c if c in _KEEP or (c not in _BIDI and unicodedata.category(c) != "Cc")
                   else c.encode("unicode_escape").decode("ascii") for c in text)
