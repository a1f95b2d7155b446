"""Named SQL: one text per query, for both dialects where one serves, and migrations per dialect.

Queries live in ``queries*.sql`` files, in ``store/shared/sql`` when one text serves both dialects and in
``store/<dialect>/sql`` (both dialects, each its own text) when the SQL really differs; a name is in one
place or the other, never both. Each query starts with ``-- name: x``. A shared query is written in
PostgreSQL's syntax; SQLite reads it translated by :data:`SQLITE_RULES` (casts dropped, ``= ANY`` of an
array as ``IN`` over ``json_each``, row locks dropped...). In any file:

- ``{sqlite: text}`` / ``{postgres: text}`` is ``text`` in that dialect only, nothing in the other;
- ``{fragment}`` is the SQL of the ``-- fragment: fragment`` section (a shared one, or the dialect's
  own), and ``{fragment j}`` the same column list with each column prefixed ``j.``. A fragment may hold
  markers; it is pasted before a shared query is translated for SQLite.

A ``-- row:`` section (comments only) declares a record and a ``-- returns:`` line says which record a query
returns: :mod:`jobloom.store.codegen` generates the records and handles from them (``./dev gen``).

Migrations (``NNNN_name.sql``) stay per dialect: a schema is not translated.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

_SECTION = re.compile(r"^--\s*(name|fragment|row):\s*(\w+)\s*$", re.M)
_DIALECTS = ("sqlite", "postgres")
SHARED = "shared"
"""The folder (``store/shared/sql``) of the queries both dialects run."""

# a string literal or a comment (left as they are); everything else is SQL the rules apply to
_LITERAL = re.compile(r"'(?:[^']|'')*'|--[^\n]*")
_MARKER = re.compile(r"\{(sqlite|postgres):\s?([^{}]*)\}")
_FRAGMENT = re.compile(r"\{(\w+)(?:\s+(\w+))?\}")

SQLITE_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    # a list passed as an array: PostgreSQL compares with ANY / ALL, SQLite reads the JSON text of the list
    (re.compile(r"=\s*ANY\(\s*(:\w+)(?:::[\w ]+\[\])?\s*\)"), r"IN (SELECT value FROM json_each(\1))"),
    (re.compile(r"<>\s*ALL\(\s*(:\w+)::[\w ]+\[\]\s*\)"), r"NOT IN (SELECT value FROM json_each(\1))"),
    # SQLite's write transaction is the lock: no row locks, and binary comparison is its default collation
    (re.compile(r"\s*\bFOR UPDATE(?: SKIP LOCKED| NOWAIT)?\b"), ""),
    (re.compile(r'\s*\bCOLLATE "C"'), ""),
    # casts: SQLite's values carry their own type
    (re.compile(r"::(?:double precision|\w+)(?:\[\])?"), ""),
    (re.compile(r"\bstrpos\("), "instr("),
    (re.compile(r"\btrue\b"), "1"),
    (re.compile(r"\bfalse\b"), "0"),
)
"""How SQLite reads a shared query written for PostgreSQL: (pattern, replacement), in order, applied
outside string literals and comments."""


@dataclass(frozen=True, slots=True)
class Migration:
    """One schema change: ``version`` orders them, ``name`` is the file's stem."""

    version: int
    name: str
    sql: str


@dataclass(frozen=True, slots=True)
class Section:
    """A ``-- name:`` (query) or ``-- fragment:`` section of a ``queries*.sql`` file, as written."""

    kind: str
    name: str
    text: str
    folder: str
    filename: str


def _folder(where: str) -> Path:
    # beside this file, read without importing a package (./dev gen runs before the generated modules import)
    return Path(__file__).resolve().parent / where / "sql"


def read_sections(where: str) -> list[Section]:
    """The sections of the ``queries*.sql`` files of ``store/<where>/sql`` (a dialect or ``shared``), in
    file and then text order."""
    folder = _folder(where)
    out: list[Section] = []
    files = sorted(e.name for e in folder.iterdir() if e.name.startswith("queries") and e.name.endswith(".sql"))
    for filename in files:
        parts = _SECTION.split(folder.joinpath(filename).read_text())
        for i in range(1, len(parts), 3):
            body = parts[i + 2].strip().rstrip(";").strip()
            out.append(Section(parts[i], parts[i + 1], body, where, filename))
    return out


def _outside_literals(sql: str, change: Callable[[str], str], *, strings: bool = True) -> str:
    """``sql`` with ``change`` applied to what is not a comment (nor, with ``strings``, a string literal)."""
    out, at = [], 0
    for m in _LITERAL.finditer(sql):
        if not strings and not m.group(0).startswith("--"):
            continue
        out += [change(sql[at:m.start()]), m.group(0)]
        at = m.end()
    out.append(change(sql[at:]))
    return "".join(out)


def to_sqlite(sql: str) -> str:
    """A query written for PostgreSQL as SQLite reads it (:data:`SQLITE_RULES`)."""

    def apply(code: str) -> str:
        for pattern, replacement in SQLITE_RULES:
            code = pattern.sub(replacement, code)
        return code

    return _outside_literals(sql, apply)


def render(sql: str, dialect: str, fragments: dict[str, str]) -> str:
    """``sql`` with its ``{dialect: text}`` markers and ``{fragment}`` references resolved for ``dialect``."""

    def marker(m: re.Match[str]) -> str:
        return m.group(2) if m.group(1) == dialect else ""

    def fragment(m: re.Match[str]) -> str:
        name, alias = m.group(1), m.group(2)
        if name not in fragments:
            raise ValueError(f"unknown SQL fragment {{{name}}} (a -- fragment: section defines one)")
        text = _MARKER.sub(marker, fragments[name])
        if alias is None:
            return text
        return ", ".join(f"{alias}.{column.strip()}" for column in text.split(","))

    return _outside_literals(sql, lambda code: _FRAGMENT.sub(fragment, _MARKER.sub(marker, code)), strings=False)


def _sources(dialect: str) -> list[Section]:
    """The sections that make ``dialect``'s queries: the shared ones, then the dialect's own."""
    if dialect not in _DIALECTS:
        raise ValueError(f"unknown SQL dialect {dialect!r} (one of {', '.join(_DIALECTS)})")
    return read_sections(SHARED) + read_sections(dialect)


def load_queries(dialect: str) -> dict[str, str]:
    """Every named query of ``dialect``: the shared ones (translated for SQLite) and the dialect's own."""
    sections = _sources(dialect)
    fragments: dict[str, str] = {}
    queries: dict[str, str] = {}
    for s in sections:
        if s.kind == "fragment":
            fragments[s.name] = " ".join(line.split("--")[0].strip() for line in s.text.splitlines()).strip()
    for s in sections:
        if s.kind != "name":
            continue
        if s.name in queries:
            raise ValueError(f"duplicate query name {s.name!r} in {s.folder}/{s.filename} (a query is either "
                             f"in shared/sql or in the dialects' files, once)")
        text = render(s.text, dialect, fragments)
        queries[s.name] = to_sqlite(text) if dialect == "sqlite" and s.folder == SHARED else text
    return queries


def load_migrations(dialect: str) -> list[Migration]:
    """The dialect's migrations (``NNNN_name.sql``), in version order."""
    folder = _folder(dialect)
    found = []
    for entry in folder.iterdir():
        m = re.match(r"^(\d{4})_(\w+)\.sql$", entry.name)
        if m:
            found.append(Migration(int(m.group(1)), entry.name[:-4], entry.read_text()))
    return sorted(found, key=lambda mig: mig.version)
