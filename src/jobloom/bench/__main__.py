"""``python -m jobloom.bench``: the ``jobloom bench`` command on its own."""

from __future__ import annotations

from .cli import main

main()
