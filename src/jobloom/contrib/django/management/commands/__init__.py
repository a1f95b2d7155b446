"""The ``jobloom`` management command."""

from __future__ import annotations
