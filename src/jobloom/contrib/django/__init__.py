"""Django: settings, enqueueing in Django's own transaction, and ``python manage.py jobloom worker|migrate|serve``.

Add ``"jobloom.contrib.django"`` to ``INSTALLED_APPS`` and name your app in the settings::

    JOBLOOM = {
        "app": "orders.jobs:app",        # the jobloom.App (MODULE:ATTR) that workers run and views enqueue on
        # "url": "postgresql://...",     # its store; by default :func:`store_url` makes it from DATABASES
        # "database": "default",         # the DATABASES alias that store_url() and enqueue() use
    }

In ``orders/jobs.py``: ``app = jobloom.App(store_url(), performers=[SendReceipt])``: the jobs live in
Django's own database, so a view enqueues inside its transaction::

    with transaction.atomic():
        order = Order.objects.create(...)
        enqueue(SendReceipt, {"order": order.pk})   # on Django's connection: no order without its job, and
                                                    # no job for an order rolled back

:func:`enqueue_on_commit` enqueues after the commit instead (for a store in another database).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

from jobloom.app.facade import App
from jobloom.app.loading import load_app
from jobloom.core.errors import JobloomError
from jobloom.core.types import Job
from jobloom.engine.enqueue import PerformerRef

DEFAULT_DATABASE = "default"
_loaded: dict[str, App] = {}


class ImproperlyConfigured(JobloomError):
    """The ``JOBLOOM`` setting, or the database it points at, cannot serve jobloom (the message says why)."""


def config() -> dict[str, Any]:
    """The ``JOBLOOM`` setting (a dict), checked: only known keys, ``app`` a ``MODULE:ATTR`` string."""
    from django.conf import settings

    conf = getattr(settings, "JOBLOOM", None)
    if not isinstance(conf, dict):
        raise ImproperlyConfigured("settings.JOBLOOM must be a dict such as {'app': 'orders.jobs:app'}, "
                                   f"not {type(conf).__name__}")
    unknown = sorted(set(conf) - {"app", "url", "database"})
    if unknown:
        raise ImproperlyConfigured(f"settings.JOBLOOM has unknown key {unknown[0]!r}; expected 'app', 'url', "
                                   "'database'")
    return conf


def store_url(using: str | None = None) -> str:
    """The jobloom store URL: ``JOBLOOM["url"]`` if set, else Django's database (``using``, default
    ``JOBLOOM["database"]`` or ``"default"``) as a jobloom URL: its SQLite file, or its PostgreSQL server
    with the same user, password, host, port, name and ``options`` (a ``search_path`` carries over)."""
    from django.conf import settings

    conf = config()
    if using is None and conf.get("url"):
        return str(conf["url"])
    alias = using or conf.get("database") or DEFAULT_DATABASE
    db = settings.DATABASES.get(alias)
    if db is None:
        raise ImproperlyConfigured(f"settings.DATABASES has no {alias!r} database (JOBLOOM['database'])")
    engine = str(db.get("ENGINE", ""))
    if engine.endswith("sqlite3"):
        name = str(db.get("NAME", ""))
        if not name or name == ":memory:" or "mode=memory" in name:
            raise ImproperlyConfigured(f"DATABASES[{alias!r}] is an in-memory SQLite database, which workers in "
                                       "other processes cannot share: give it a file, or set JOBLOOM['url']")
        return f"sqlite:///{Path(name).resolve()}"
    if "postgresql" in engine:
        user = quote(str(db.get("USER") or ""), safe="")
        password = quote(str(db.get("PASSWORD") or ""), safe="")
        auth = f"{user}:{password}@" if password else f"{user}@" if user else ""
        host = str(db.get("HOST") or "")
        host = f"[{host}]" if ":" in host else quote(host, safe="")
        port = f":{db['PORT']}" if db.get("PORT") else ""
        url = f"postgresql://{auth}{host}{port}/{quote(str(db.get('NAME') or ''), safe='')}"
        options = (db.get("OPTIONS") or {}).get("options")
        return f"{url}?options={quote(str(options), safe='')}" if options else url
    raise ImproperlyConfigured(f"DATABASES[{alias!r}] uses {engine or 'no ENGINE'}: jobloom's store is SQLite or "
                               "PostgreSQL; set JOBLOOM['url'] to a store of its own")


def get_app() -> App:
    """The jobloom app that ``JOBLOOM["app"]`` names (imported once; ``MODULE:ATTR``, or a callable)."""
    ref = config().get("app")
    if not isinstance(ref, str) or ":" not in ref:
        raise ImproperlyConfigured(f"settings.JOBLOOM['app'] must be 'module:attr' naming your jobloom.App "
                                   f"(e.g. 'orders.jobs:app'), not {ref!r}")
    app = _loaded.get(ref)
    if app is None:
        app = _loaded[ref] = load_app(ref)
    return app


def same_database(jobloom_url: str, django_url: str) -> bool:
    """Whether two store URLs name one database (the same SQLite file, or host, port and name)."""
    if jobloom_url.startswith("sqlite:") and django_url.startswith("sqlite:"):
        from jobloom.store.sqlite.store import sqlite_path

        return Path(sqlite_path(jobloom_url)).resolve() == Path(sqlite_path(django_url)).resolve()
    if jobloom_url.startswith(("postgresql:", "postgres:")) and django_url.startswith(("postgresql:", "postgres:")):
        a, b = urlsplit(jobloom_url), urlsplit(django_url)
        return ((a.hostname or "localhost"), a.port or 5432, a.path) == ((b.hostname or "localhost"), b.port or 5432,
                                                                          b.path)
    return False


def enqueue(performer: PerformerRef, payload: Any, *, using: str | None = None, **options: Any) -> Job:
    """Enqueue a job; inside ``transaction.atomic()`` it is inserted on Django's own connection, in its
    transaction, and exists if and only if that transaction commits.

    ``using``: the database alias (default ``JOBLOOM["database"]`` or ``"default"``); it must be the
    app's store (:func:`store_url` makes it so), else use :func:`enqueue_on_commit`. Outside an atomic
    block the job is enqueued at once (``App.enqueue_sync``). ``options``: those of ``App.enqueue``."""
    from django.db import connections

    app = get_app()
    alias = using or config().get("database") or DEFAULT_DATABASE
    conn = connections[alias]
    if not conn.in_atomic_block:
        return app.enqueue_sync(performer, payload, **options)
    if not same_database(app.url, store_url(alias)):
        raise ImproperlyConfigured(
            f"cannot enqueue in the transaction of database {alias!r}: the jobloom app's store is another "
            "database; use enqueue_on_commit(), or make the store Django's (App(store_url(), ...))")
    conn.ensure_connection()
    raw = conn.connection
    if type(raw).__module__.startswith("psycopg2"):
        raise ImproperlyConfigured(
            f"database {alias!r} is on psycopg2, and jobloom enqueues in a transaction on psycopg 3: "
            "pip install 'psycopg[binary]' (Django uses it when it is installed), or use enqueue_on_commit()")
    return app.enqueue_sync(performer, payload, connection=raw, **options)


def enqueue_on_commit(performer: PerformerRef, payload: Any, *, using: str | None = None, **options: Any) -> None:
    """Enqueue a job once the current transaction of ``using`` commits (at once outside a transaction);
    nothing is enqueued if it rolls back. The job is checked when enqueued, after the commit: a bad
    payload raises there (``transaction.on_commit`` then propagates it), not here."""
    from django.db import transaction

    app = get_app()
    alias = using or config().get("database") or DEFAULT_DATABASE
    transaction.on_commit(lambda: app.enqueue_sync(performer, payload, **options), using=alias)


__all__ = ["ImproperlyConfigured", "config", "enqueue", "enqueue_on_commit", "get_app", "same_database",
           "store_url"]
