"""The ``jobloom`` command line: one module per command group, ``main`` is the console script."""

from __future__ import annotations

from jobloom.cli.main import cli, main

__all__ = ["cli", "main"]
