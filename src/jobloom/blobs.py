"""Blob stores for large payloads and results: ``App(blobs=jobloom.blobs.Directory(path), offload_over=64 * 1024)``.

A payload, result or step result whose stored form is over ``offload_over`` bytes is written to the
blob store, and its row keeps a reference, ``jobloom-blob:1:<id>:<size>``. See
docs/how-to/large-payloads.md.
"""

from __future__ import annotations

from jobloom.core.blobref import BlobRef, parse_ref
from jobloom.engine.offload import DEFAULT_GRACE, MAX_OFFLOADED_BYTES
from jobloom.store.blobs import BlobMissing, BlobStore, Directory, check_blob_id

__all__ = [
    "DEFAULT_GRACE", "MAX_OFFLOADED_BYTES", "BlobMissing", "BlobRef", "BlobStore", "Directory", "check_blob_id",
    "parse_ref",
]
