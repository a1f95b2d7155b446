"""Named SQL: each dialect keeps its queries in ``store/<dialect>/sql/queries*.sql`` and migrations beside them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources

_NAME = re.compile(r"^--\s*name:\s*(\w+)\s*$", re.M)


@dataclass(frozen=True, slots=True)
class Migration:
    """One schema change: ``version`` orders them, ``name`` is the file's stem."""

    version: int
    name: str
    sql: str


def load_queries(dialect: str) -> dict[str, str]:
    """Parse the ``-- name: x`` sections of the dialect's ``queries*.sql`` files (one per concept)."""
    folder = resources.files(f"{__package__}.{dialect}").joinpath("sql")
    queries: dict[str, str] = {}
    files = sorted(e.name for e in folder.iterdir() if e.name.startswith("queries") and e.name.endswith(".sql"))
    for filename in files:
        parts = _NAME.split(folder.joinpath(filename).read_text())
        for i in range(1, len(parts), 2):
            name, body = parts[i], parts[i + 1].strip().rstrip(";").strip()
            if name in queries:
                raise ValueError(f"duplicate query name {name!r} in {dialect}/{filename}")
            queries[name] = body
    return queries


def load_migrations(dialect: str) -> list[Migration]:
    """The dialect's migrations (``NNNN_name.sql``), in version order."""
    folder = resources.files(f"{__package__}.{dialect}").joinpath("sql")
    found = []
    for entry in folder.iterdir():
        m = re.match(r"^(\d{4})_(\w+)\.sql$", entry.name)
        if m:
            found.append(Migration(int(m.group(1)), entry.name[:-4], entry.read_text()))
    return sorted(found, key=lambda mig: mig.version)
