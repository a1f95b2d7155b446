"""Settings of the example shop. The database is ``SHOP_DATABASE`` (a URL), by default ``db.sqlite3`` here.

``sqlite:////abs/path.db`` or ``postgresql://user:password@host:port/name[?options=-csearch_path%3Dx]``:
jobloom's tables live in the same database (``store_url()`` in ``orders/jobs.py``), so a view's
transaction holds its order and the order's job together.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

BASE_DIR = Path(__file__).resolve().parent.parent
SECRET_KEY = os.environ.get("SHOP_SECRET_KEY", "example-only-not-secret")
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]
ROOT_URLCONF = "shop.urls"
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "jobloom.contrib.django",     # brings `python manage.py jobloom worker|migrate|serve`
    "orders",
]


def database(url: str) -> dict[str, object]:
    """A DATABASES entry from a URL."""
    parts = urlsplit(url)
    if parts.scheme == "sqlite":
        # IMMEDIATE: a view's transaction takes the write lock at BEGIN, so it waits its turn behind a
        # worker's transaction instead of failing with "database is locked" when it first writes
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": url.removeprefix("sqlite:///"),
                "OPTIONS": {"transaction_mode": "IMMEDIATE", "timeout": 20}}
    options = {k: v[0] for k, v in parse_qs(parts.query).items()}
    return {"ENGINE": "django.db.backends.postgresql", "NAME": unquote(parts.path.lstrip("/")),
            "USER": unquote(parts.username or ""), "PASSWORD": unquote(parts.password or ""),
            "HOST": parts.hostname or "", "PORT": parts.port or "", "OPTIONS": options}


DATABASES = {"default": database(os.environ.get("SHOP_DATABASE", f"sqlite:///{BASE_DIR / 'db.sqlite3'}"))}

JOBLOOM = {"app": "orders.jobs:app"}   # the jobloom.App that workers run and views enqueue on
