"""The reference a job row keeps in place of a payload or result offloaded to a blob store.

A stored payload, result or step result is JSON text (or a codec's encoding of it). One larger than the
app's ``offload_over`` is written to the blob store, and the row keeps this instead::

    jobloom-blob:1:<id>:<size>

``1`` is the format's version, ``<id>`` the blob's name (32 lowercase hex digits, random, chosen by
jobloom, never from user data) and ``<size>`` the stored text's length in bytes (UTF-8). No JSON text
starts with ``j`` other than nothing, so a reference never reads as a payload by mistake: ``json.loads``
of it fails rather than returning something else.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PREFIX = "jobloom-blob:"
"""How every reference starts (what SQL looks for: ``substr(col, 1, 13) = 'jobloom-blob:'``)."""

_REF = re.compile(r"jobloom-blob:1:([0-9a-f]{32}):([0-9]{1,12})")
BLOB_ID = re.compile(r"[0-9a-f]{32}")
"""A blob's id: 32 lowercase hex digits (128 random bits)."""


@dataclass(frozen=True, slots=True)
class BlobRef:
    """A parsed reference: the blob's id and the size of the text it holds."""

    id: str
    size: int

    def text(self) -> str:
        """The reference as a row stores it."""
        return f"{PREFIX}1:{self.id}:{self.size}"


def parse_ref(text: str | None) -> BlobRef | None:
    """The reference ``text`` is, or None when it is stored content (or None)."""
    if text is None or not text.startswith(PREFIX):
        return None
    m = _REF.fullmatch(text)
    if m is None:
        return None
    return BlobRef(m.group(1), int(m.group(2)))


def is_ref(text: str | None) -> bool:
    """Whether ``text`` is a blob reference rather than stored content."""
    return parse_ref(text) is not None


__all__ = ["BLOB_ID", "PREFIX", "BlobRef", "is_ref", "parse_ref"]
