"""An app's blob store: ``App(blobs=jobloom.blobs.Directory(path), offload_over=64 * 1024)``.

Checks the options, lifts the performers' payload and result limits to ``MAX_OFFLOADED_BYTES``,
adds the sweeper of unreferenced blobs to the housekeepers, and gives retention the blob store.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from jobloom.core import options as opt
from jobloom.core.codecs import Codec
from jobloom.core.errors import InvalidOption
from jobloom.engine.offload import DEFAULT_GRACE, MAX_OFFLOADED_BYTES, Offload
from jobloom.housekeeping.blobs import BlobSweeper
from jobloom.housekeeping.retention import RetentionKeeper
from jobloom.store.blobs import BlobStore

if TYPE_CHECKING:
    from jobloom.engine.housekeeper import Housekeeper
    from jobloom.engine.performer import PerformerSpec

DEFAULT_OFFLOAD_OVER = 64 * 1024
"""Stored texts over this many bytes go to the blob store (when the app has one)."""


def configure(blobs: Any, over: Any, grace: Any, *, now: Callable[[], float], codec: Codec) -> Offload | None:
    """The app's :class:`Offload` (None without a blob store), its options checked; ``now``: the app's clock."""
    if blobs is None:
        return None
    if not isinstance(blobs, BlobStore):
        raise InvalidOption("blobs", blobs, "a jobloom.blobs.BlobStore (put, get, delete, written_before), "
                            "such as jobloom.blobs.Directory(path)")
    if isinstance(over, bool) or not isinstance(over, int) or not 1024 <= over <= MAX_OFFLOADED_BYTES:
        raise InvalidOption("offload_over", over, f"a number of bytes from 1024 to {MAX_OFFLOADED_BYTES}")
    grace_s = opt.finite("blob_grace", grace, minimum=60.0)
    return Offload(blobs, over, now, grace=grace_s, codec=codec)


def attach(offload: Offload | None, specs: dict[str, PerformerSpec], housekeepers: list[Housekeeper]) -> None:
    """Set an app's performers and housekeepers up for its blob store (nothing to do without one): the
    payload and result limits lifted, retention told of it, and the sweeper of unreferenced blobs added."""
    if offload is None:
        return
    for binding, spec in list(specs.items()):
        specs[binding] = dataclasses.replace(spec, max_bytes=MAX_OFFLOADED_BYTES)
    for keeper in housekeepers:
        if isinstance(keeper, RetentionKeeper):
            keeper.offload = offload
    housekeepers.append(BlobSweeper(offload))


__all__ = ["DEFAULT_GRACE", "DEFAULT_OFFLOAD_OVER", "attach", "configure"]
