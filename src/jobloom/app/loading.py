"""Finding the user's app from a ``MODULE:ATTR`` reference (as given on the command line)."""

from __future__ import annotations

import importlib
import os
import sys
from typing import TYPE_CHECKING

from jobloom.core.errors import JobloomError

if TYPE_CHECKING:
    from jobloom.app.facade import App


def load_app(ref: str) -> App:
    """Import ``module.path:attribute`` and return the :class:`App` it names."""
    from jobloom.app.facade import App

    module_name, sep, attr = ref.partition(":")
    if not sep or not module_name or not attr:
        raise JobloomError(f"app reference {ref!r} must look like MODULE:ATTR, e.g. myapp.jobs:app")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise JobloomError(f"cannot import {module_name!r} (from {ref!r}): {exc}") from exc
    obj = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise JobloomError(f"{module_name!r} has no attribute {attr!r}") from None
    if callable(obj) and not isinstance(obj, App):
        obj = obj()
    if not isinstance(obj, App):
        raise JobloomError(f"{ref!r} is a {type(obj).__name__}, not a jobloom.App")
    return obj
