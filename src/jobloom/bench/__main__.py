"""``python -m jobloom.bench``: the ``jobloom bench`` command on its own."""

from __future__ import annotations

from jobloom.bench.cli import main

main()
