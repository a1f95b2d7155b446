"""The named SQL's generated records and handles (``core/rows/``, ``core/queries.py``) are what the
annotated SQL generates now, and the SQL loader's translation and markers do what the docs say."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from jobloom.core.queries import QUERIES, STATEMENTS, Q
from jobloom.store import codegen
from jobloom.store.sql import Section, load_queries, read_sections, render, to_sqlite

SRC = Path(__file__).resolve().parents[3] / "src" / "jobloom"


def test_the_generated_files_are_what_the_sql_generates() -> None:
    stale, left_over = codegen.drift(codegen.generated())
    assert not stale, f"{stale} differ from what the SQL generates: run ./dev gen"
    assert not left_over, f"{left_over}: records modules no SQL file makes: run ./dev gen"


def test_every_query_of_both_dialects_has_a_handle() -> None:
    for dialect in ("sqlite", "postgres"):
        names = {name for name in load_queries(dialect) if "__" not in name}
        assert names == set(QUERIES) | set(STATEMENTS), dialect
    assert Q.get_job.row.__name__ == "JobRow" and Q.release == "release"


def test_a_misspelt_handle_fails_where_it_is_written() -> None:
    with pytest.raises(AttributeError):
        Q.relase  # type: ignore[attr-defined]  # noqa: B018


def test_code_runs_named_sql_by_handle_not_by_bare_name() -> None:
    """A bare string would only fail when the store looked it up; a handle fails where it is written."""
    runners = {"execute", "executemany", "insert_many", "fetch", "fetchone"}
    found = []
    for path in SRC.rglob("*.py"):
        if path.parent.name in ("sqlite", "postgres"):  # the drivers run their own names
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in runners
                    and isinstance(node.func.value, ast.Name) and node.func.value.id in ("tx", "self")
                    and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
                found.append(f"{path.relative_to(SRC)}:{node.lineno} {node.args[0].value}")
    assert not found, "named SQL run by a bare name (use Q.<name>):\n" + "\n".join(found)


def test_sqlite_reads_a_shared_query_translated() -> None:
    sql = ("SELECT id FROM jobloom_jobs WHERE id = ANY(:ids::bigint[]) AND binding <> ALL(:b::text[])"
           " AND strpos(error, :text::text) > 0 AND cancel_requested = true AND node > :lo::text COLLATE \"C\""
           " AND error <> '::x true' -- FOR UPDATE in a comment\nORDER BY id FOR UPDATE SKIP LOCKED")
    assert to_sqlite(sql) == (
        "SELECT id FROM jobloom_jobs WHERE id IN (SELECT value FROM json_each(:ids))"
        " AND binding NOT IN (SELECT value FROM json_each(:b)) AND instr(error, :text) > 0"
        " AND cancel_requested = 1 AND node > :lo AND error <> '::x true' -- FOR UPDATE in a comment\nORDER BY id")


def test_markers_and_fragments_resolve_per_dialect() -> None:
    sql = "SELECT {cols j} FROM t j {sqlite: INDEXED BY x }WHERE {postgres: (state || '')}{sqlite: state} = 'q'"
    fragments = {"cols": "id, binding"}
    assert render(sql, "sqlite", fragments) == "SELECT j.id, j.binding FROM t j INDEXED BY x WHERE state = 'q'"
    assert render(sql, "postgres", fragments) == "SELECT j.id, j.binding FROM t j WHERE (state || '') = 'q'"
    with pytest.raises(ValueError, match="unknown SQL fragment"):
        render("SELECT {nope}", "sqlite", fragments)


def test_a_row_section_declares_a_record() -> None:
    text = "-- Two things.\n--   a: int, b: str | None = None"
    row = codegen.parse_row(Section("row", "PairRow", text, "shared", "queries_pairs.sql"))
    assert row == codegen.Row("PairRow", ["Two things."], [("a", "int", None), ("b", "str | None", "None")],
                              "queries_pairs.sql")
    assert row.module == "pairs"  # core/rows/pairs.py
    assert codegen.parse_row(Section("row", "PairRow", text, "shared", "queries.sql")).module == "jobs"
    with pytest.raises(ValueError, match="not 'name: type"):
        codegen.parse_row(Section("row", "BadRow", "-- Bad.\n--   a int", "shared", "f"))


def test_each_query_is_written_once() -> None:
    shared = {s.name for s in read_sections("shared") if s.kind == "name"}
    for dialect in ("sqlite", "postgres"):
        own = {s.name for s in read_sections(dialect) if s.kind == "name"}
        assert not shared & own, dialect
