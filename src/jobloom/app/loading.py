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


def connection_env(listen_url: str | None, pool_max: int | None) -> None:
    """Put the worker command's connection options in the environment, unchecked (a worker process that
    checks its app first checks them: :func:`check_connection_env`)."""
    for value, env in ((listen_url, LISTEN_URL_ENV), (pool_max, POOL_MAX_ENV)):
        if value is not None:
            os.environ[env] = str(value)


def check_connection_env(app: App) -> None:
    """Refuse the connection options of the environment (``InvalidOption``) if ``app``'s store is not
    PostgreSQL; else give ``--listen-url`` to ``app`` for the command's own look at the store (the
    pool's size is the worker processes' to take: :func:`apply_connection_env`)."""
    from jobloom.core.errors import InvalidOption

    for name, env in (("listen_url", LISTEN_URL_ENV), ("pool_max", POOL_MAX_ENV)):
        value = os.environ.get(env)
        if value is not None and not app.url.startswith(("postgresql:", "postgres:")):
            raise InvalidOption(name, int(value) if name == "pool_max" else value,
                                "an option of a PostgreSQL store (the app's store is not one)")
    if url := os.environ.get(LISTEN_URL_ENV):
        app.store_options["listen_url"] = url


def sqlite_file_problem(url: str, *, must_exist: bool) -> str | None:
    """What is wrong with a SQLite store's path that a command would otherwise create by accident: a
    folder that is not there, or (``must_exist``) a file that is not there; ``None`` if nothing is."""
    if not url.startswith("sqlite:"):
        return None
    from jobloom.store.sqlite.store import sqlite_path

    path = sqlite_path(url)
    folder = os.path.dirname(path)
    if folder and not os.path.isdir(folder):
        return f"no folder {folder} for the SQLite store {path}: check the path, or create the folder"
    if must_exist and not os.path.exists(path):
        return f"no SQLite store at {path}: check the path, or create it with `jobloom migrate --url {url}`"
    return None


def apply_connection_env(app: App) -> None:
    """In a worker process: take ``--listen-url`` and ``--pool-max`` from the environment (see
    :func:`connection_env`) into the app's store options."""
    if url := os.environ.get(LISTEN_URL_ENV):
        app.store_options["listen_url"] = url
    if size := os.environ.get(POOL_MAX_ENV):
        app.store_options["pool_max"] = app.store_options["pool_min"] = int(size)
        app.store_options["reserve"] = True  # the server's budget checked, and every connection taken, at start
