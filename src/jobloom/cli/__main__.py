"""``python -m jobloom.cli``: the ``jobloom`` command."""

from __future__ import annotations

from jobloom.cli.main import main

main()
