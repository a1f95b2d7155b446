"""The optional parts of jobloom and the extra that installs each (``pip install 'jobloom[web]'``).

``pip install jobloom`` brings what the engine, the SQLite store and the command line's worker need
(pydantic, croniter, typer and rich). Everything else is an extra, imported only where it is used; a
part used without its extra raises :class:`MissingExtra`, which names the extra to install::

    with needs_extra("web", "jobloom serve"):
        import uvicorn
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from jobloom.core.errors import JobloomError

#: The top-level modules each extra installs (as ``import`` names, not distribution names).
EXTRAS: dict[str, tuple[str, ...]] = {
    "web": ("fastapi", "fastapi_offline", "starlette", "uvicorn", "httptools", "jinja2", "httpx", "jsonschema"),
    "postgres": ("psycopg", "psycopg_pool", "orjson"),
    "metrics": ("prometheus_client",),
    "otel": ("opentelemetry",),
    "bench": ("psutil",),
    "encryption": ("cryptography",),
}


class MissingExtra(JobloomError):
    """A part of jobloom was used without the optional dependencies it needs."""

    def __init__(self, what: str, extra: str, hint: str = "") -> None:
        self.what = what
        self.extra = extra
        super().__init__(f"{what} needs the {extra} extra: pip install 'jobloom[{extra}]'{hint}")


@contextmanager
def needs_extra(extra: str, what: str, hint: str = "") -> Iterator[None]:
    """Turn a missing module of ``extra`` imported inside the block into :class:`MissingExtra` for ``what``.

    Any other import error (a module of no extra, a broken installation) goes through unchanged.
    """
    try:
        yield
    except ModuleNotFoundError as exc:
        if (exc.name or "").partition(".")[0] not in EXTRAS[extra]:
            raise
        raise MissingExtra(what, extra, hint) from exc
