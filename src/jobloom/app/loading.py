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


LISTEN_URL_ENV = "JOBLOOM_LISTEN_URL"
"""Carries ``jobloom worker --listen-url`` to the worker processes (through the supervisor)."""
POOL_MAX_ENV = "JOBLOOM_POOL_MAX"
"""Carries ``jobloom worker --pool-max`` to the worker processes."""


def connection_options(app: App, listen_url: str | None, pool_max: int | None) -> None:
    """Put the worker command's connection options in the environment its worker processes inherit (each
    applies them: :func:`apply_connection_env`); options of PostgreSQL given for another store are
    refused (``InvalidOption``)."""
    from jobloom.core.errors import InvalidOption

    for name, value, env in (("listen_url", listen_url, LISTEN_URL_ENV), ("pool_max", pool_max, POOL_MAX_ENV)):
        if value is None:
            continue
        if not app.url.startswith(("postgresql:", "postgres:")):
            raise InvalidOption(name, value, "an option of a PostgreSQL store (the app's store is not one)")
        os.environ[env] = str(value)
    if listen_url is not None:  # the command's own look at the store too (the pool is the processes' to take)
        app.store_options["listen_url"] = listen_url


def apply_connection_env(app: App) -> None:
    """In a worker process: take ``--listen-url`` and ``--pool-max`` from the environment (see
    :func:`connection_options`) into the app's store options."""
    if url := os.environ.get(LISTEN_URL_ENV):
        app.store_options["listen_url"] = url
    if size := os.environ.get(POOL_MAX_ENV):
        app.store_options["pool_max"] = app.store_options["pool_min"] = int(size)
        app.store_options["reserve"] = True  # the server's budget checked, and every connection taken, at start
