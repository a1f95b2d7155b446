"""What a job's content looks like at rest: the codec that turns stored JSON into stored text and back.

A :class:`Codec` is applied at exactly the points where jobloom writes or reads the *content* of a job:
its payload, its result, its durable steps' results, the data of an event sent to it, a flow run's
input. :class:`Identity` (the default) stores the JSON as it is; :class:`Encrypted` stores it as
AES-GCM ciphertext (from the ``cryptography`` package: ``pip install 'jobloom[encryption]'``).

What jobloom indexes or dispatches on stays plaintext whatever the codec: binding names, unique,
concurrency and debounce keys, tags, meta, errors, schedules' definitions.

Ciphertext is itself a JSON string, ``"jlenc1:<key id>:<base64 of nonce and ciphertext>"``, so that
a column holding it is still JSON for every reader; the key id is the first 8 hex digits of the key's
SHA-256, so decryption picks its key whatever the order of the configured keys.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from collections.abc import Sequence
from typing import Any, Protocol, TypeVar

from jobloom.core.blobref import PREFIX as BLOB_PREFIX
from jobloom.core.errors import InvalidOption, JobloomError
from jobloom.core.extras import needs_extra

PREFIX = '"jlenc1:'
"""How every ciphertext text begins (a JSON string with this tag)."""

ENCRYPTED = '"encrypted"'
"""The JSON that readers without the key see in place of encrypted content (:func:`readable`)."""

KEY_BYTES = 32
NONCE_BYTES = 12


class CodecError(JobloomError):
    """Stored content that the configured codec cannot read (no configured key opens it)."""


class InvalidKey(JobloomError):
    """An encryption key that is not 32 bytes (given as bytes or base64 text)."""

    def __init__(self, index: int, problem: str) -> None:
        self.index = index
        super().__init__(f"Encrypted(keys=...): key {index} {problem}")


def is_encrypted(text: str | None) -> bool:
    """Whether stored ``text`` is ciphertext of :class:`Encrypted` (of any key)."""
    return text is not None and text.startswith(PREFIX)


class Codec(Protocol):
    """Turns the JSON text of a job's content into the text stored, and back."""

    @property
    def encrypts(self) -> bool:
        """Whether :meth:`encode` writes ciphertext."""
        ...

    def encode(self, text: str) -> str:
        """The stored form of JSON ``text``."""
        ...

    def decode(self, text: str, what: str) -> str:
        """The JSON text of stored ``text``; ``what`` (such as ``"payload of job 12"``) names it in errors."""
        ...

    def current(self, text: str) -> bool:
        """Whether stored ``text`` is already as :meth:`encode` writes it now (nothing to re-encrypt)."""
        ...


class Identity:
    """The default codec: content is stored as its JSON. Ciphertext it meets cannot be read."""

    encrypts = False

    def encode(self, text: str) -> str:
        """``text`` itself."""
        return text

    def decode(self, text: str, what: str) -> str:
        """``text`` itself; ciphertext raises :class:`CodecError` (this app has no key)."""
        if text.startswith(PREFIX):
            raise CodecError(f"the {what} is encrypted and this app has no codec with a key "
                             f"(App(codec=jobloom.codecs.Encrypted(keys=[...])))")
        return text

    def current(self, text: str) -> bool:
        """Plaintext is current; ciphertext is not (but this codec cannot read it)."""
        return not text.startswith(PREFIX)


IDENTITY = Identity()


def _key_bytes(index: int, key: Any) -> bytes:
    if isinstance(key, str):
        try:
            key = base64.b64decode(key.strip(), validate=True)
        except (binascii.Error, ValueError):
            raise InvalidKey(index, "is not base64 text") from None
    if not isinstance(key, bytes | bytearray):
        raise InvalidKey(index, f"must be bytes or base64 text, not {type(key).__name__}")
    if len(key) != KEY_BYTES:
        raise InvalidKey(index, f"is {len(key)} bytes; an AES-256 key is {KEY_BYTES} bytes "
                                f"(make one with jobloom.codecs.new_key())")
    return bytes(key)


def key_id(key: bytes) -> str:
    """The id stored with each ciphertext of ``key``: the first 8 hex digits of its SHA-256."""
    return hashlib.sha256(key).hexdigest()[:8]


def new_key() -> str:
    """A new random 32-byte key as base64 text (keep it secret; give it to ``Encrypted(keys=[...])``)."""
    return base64.b64encode(os.urandom(KEY_BYTES)).decode()


class Encrypted:
    """AES-256-GCM: the first key encrypts, every key decrypts (rotation); plaintext still reads.

    ``keys``: 32-byte keys, as bytes or base64 text (:func:`new_key`). Each ciphertext carries its
    key's id, so a key may move to second place when a new one comes first; ``jobloom reencrypt``
    then rewrites old rows with the first key, after which the old key may go.
    """

    encrypts = True

    def __init__(self, keys: Sequence[bytes | str]) -> None:
        if isinstance(keys, str | bytes) or not keys:
            raise InvalidKey(0, "missing: keys is a non-empty list of keys")
        raw = [_key_bytes(i, k) for i, k in enumerate(keys)]
        with needs_extra("encryption", "jobloom.codecs.Encrypted"):
            from cryptography.hazmat.primitives.ciphers.aead import AESGCM
        self._ciphers = {key_id(k): AESGCM(k) for k in reversed(raw)}
        self._first = key_id(raw[0])
        self._tag = f"{PREFIX}{self._first}:"
        self._encrypt = self._ciphers[self._first].encrypt

    @property
    def key_ids(self) -> list[str]:
        """The ids of the configured keys (the first one encrypts)."""
        return [self._first, *(k for k in self._ciphers if k != self._first)]

    def encode(self, text: str) -> str:
        """``text`` encrypted with the first key, as a JSON string carrying the key id."""
        nonce = os.urandom(NONCE_BYTES)
        sealed = binascii.b2a_base64(nonce + self._encrypt(nonce, text.encode("utf-8", "surrogatepass"), None),
                                     newline=False)
        return f'{self._tag}{sealed.decode()}"'

    def decode(self, text: str, what: str) -> str:
        """The plaintext JSON of ciphertext (by whichever key its id names); plaintext goes through."""
        if not text.startswith(PREFIX):
            return text
        kid, _, body = text[len(PREFIX):-1].partition(":")
        cipher = self._ciphers.get(kid)
        if cipher is None:
            raise CodecError(f"the {what} was encrypted with key {kid}, which is not among the configured "
                             f"keys ({', '.join(self.key_ids)})")
        try:
            raw = binascii.a2b_base64(body, strict_mode=True)
            return cipher.decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], None).decode("utf-8", "surrogatepass")
        except Exception:  # a bad tag (InvalidTag), bad base64, a truncated text: all mean the same
            raise CodecError(f"the {what} cannot be decrypted with key {kid}: the ciphertext is damaged") from None

    def current(self, text: str) -> bool:
        """Whether ``text`` is ciphertext of the first key."""
        return text.startswith(self._tag)


def checked_codec(codec: object) -> Codec:
    """``App(codec=...)``: None (the identity), or an object with the :class:`Codec` methods."""
    if codec is None:
        return IDENTITY
    if not all(callable(getattr(codec, m, None)) for m in ("encode", "decode", "current")) or not hasattr(
            codec, "encrypts"):
        raise InvalidOption("codec", codec, "a jobloom.codecs.Codec (encode, decode, current, encrypts), such "
                                            "as jobloom.codecs.Encrypted(keys=[...])")
    return codec  # type: ignore[return-value]


def readable(codec: Codec, text: str | None, what: str) -> str | None:
    """``text`` decoded for display: content this codec cannot read reads as :data:`ENCRYPTED`."""
    if text is None or not text.startswith(PREFIX):
        return text
    try:
        return codec.decode(text, what)
    except CodecError:
        return ENCRYPTED


def encode_opt(codec: Codec, text: str | None) -> str | None:
    """:meth:`Codec.encode` of optional ``text`` (None, the empty text and a blob reference stay as they
    are: a reference names a blob that holds the encoded content, and must stay readable to SQL)."""
    return text if not text or text.startswith(BLOB_PREFIX) else codec.encode(text)


def decode_opt(codec: Codec, text: str | None, what: str) -> str | None:
    """:meth:`Codec.decode` of optional ``text`` (None and the empty text stay as they are)."""
    return text if not text else codec.decode(text, what)


RowT = TypeVar("RowT")


def decoded(codec: Codec, row: RowT, column: str, what: str, *, soft: bool = False) -> RowT:
    """``row`` (a record, a named tuple) with its ``column`` decoded; ``soft``: for display
    (:func:`readable`), else content that no key opens raises :class:`CodecError` naming ``what``."""
    text = getattr(row, column)
    if not text or not text.startswith(PREFIX):
        return row
    plain = readable(codec, text, what) if soft else codec.decode(text, what)
    return row._replace(**{column: plain})  # type: ignore[attr-defined,no-any-return]
