"""How jobs' content is stored: ``App(codec=jobloom.codecs.Encrypted(keys=[...]))`` encrypts payloads,
results, durable steps' results and event data with AES-256-GCM (``pip install 'jobloom[encryption]'``).

See :mod:`jobloom.core.codecs` and the how-to page "Encrypt payloads".
"""

from __future__ import annotations

from jobloom.app.reencrypt import ReencryptReport, reencrypt
from jobloom.core.codecs import (
    ENCRYPTED,
    IDENTITY,
    Codec,
    CodecError,
    Encrypted,
    Identity,
    InvalidKey,
    is_encrypted,
    key_id,
    new_key,
)

__all__ = ["ENCRYPTED", "IDENTITY", "Codec", "CodecError", "Encrypted", "Identity", "InvalidKey", "ReencryptReport",
           "is_encrypted", "key_id", "new_key", "reencrypt"]
