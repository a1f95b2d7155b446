"""Short SQLite paths for the bench: the store's wake-up sockets live beside the file (AF_UNIX limit)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator

import pytest


@pytest.fixture
def sqlite_url() -> Iterator[str]:
    folder = tempfile.mkdtemp(prefix="jlb")
    try:
        yield f"sqlite:///{folder}/b.db"
    finally:
        shutil.rmtree(folder, ignore_errors=True)
