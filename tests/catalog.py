"""The full catalog of a store's schema as sorted text lines, one object or property a line, so that two
schemas compare line by line whatever SQL (a chain of migrations, or one baseline) built them.

SQLite: the tables (rowid or ``WITHOUT ROWID``, ``AUTOINCREMENT``, ``STRICT``), their columns in order
(declared type, ``NOT NULL``, default, primary key position, hidden or generated), the ``CHECK``,
``COLLATE`` and ``GENERATED`` clauses of their definitions, foreign keys, every index
(its columns with order and collation, unique, origin, and the text of those created by name, which
holds the predicate), triggers and views (their text), the file's ``user_version``, ``application_id``,
``auto_vacuum`` and encoding, and the rows in each table. A declared type is upper-cased: SQLite reads
its affinity from it case-blind. Whitespace and comments in a statement's text are left out.

PostgreSQL: the schema's relations (kind, persistence, options, replica identity, row security,
privileges), their columns in order (type, ``NOT NULL``, default, identity, generation, collation,
storage, statistics target, compression), constraints, indexes, sequences (type, bounds, step, cache,
cycle, and the column owning them), triggers, functions and their text, views, types of its own,
comments, policies, rules, extended statistics, and the rows in each table. The schema's name is left
out, and so are the physical traces of a history (the number of a column once dropped) and the
column options some servers set on every column by themselves (``pg_attver``).

``jobloom_migrations`` is in the catalog (the stores create it) but its rows are not counted: they
record when and how a store was migrated.
"""

from __future__ import annotations

import re
import sqlite3
from typing import Any

IGNORED_ROWS = ("jobloom_migrations",)
"""Tables whose rows are left out of the catalog."""

_COMMENT = re.compile(r"--[^\n]*")


def normalized(sql: str) -> str:
    """A statement's text without comments, with each run of whitespace as one space and none just
    inside parentheses."""
    text = " ".join(_COMMENT.sub("", sql).split())
    return text.replace("( ", "(").replace(" )", ")")


def _clauses(sql: str) -> list[str]:
    """The ``CHECK (...)``, ``COLLATE x`` and ``GENERATED``/``AS (...)`` clauses in a table's definition, in
    order, as written (a parenthesized expression up to its closing parenthesis). Foreign keys are read
    from SQLite's pragma."""
    text = normalized(sql)
    body = text[text.index("(") + 1:]
    found: list[str] = []
    for m in re.finditer(r"\b(CHECK|COLLATE|GENERATED ALWAYS AS|AS)\b\s*", body, re.I):
        keyword, at = m.group(1).upper(), m.end()
        if keyword == "AS" and not body.startswith("(", at):
            continue
        if body.startswith("(", at):
            depth, end = 0, at
            for end in range(at, len(body)):
                depth += {"(": 1, ")": -1}.get(body[end], 0)
                if depth == 0:
                    break
            found.append(f"{keyword} {body[at:end + 1]}")
        else:
            found.append(f"{keyword} {body[at:].split()[0].rstrip(',)')}")
    return found


def sqlite_catalog(path: str) -> list[str]:
    """The catalog of the SQLite file at ``path``."""
    conn = sqlite3.connect(path)
    try:
        return sorted(_sqlite_lines(conn))
    finally:
        conn.close()


def _sqlite_lines(conn: sqlite3.Connection) -> list[str]:
    q = conn.execute
    lines = [f"file {pragma} {q(f'PRAGMA {pragma}').fetchone()[0]}"
             for pragma in ("user_version", "application_id", "auto_vacuum", "encoding")]
    objects = q("SELECT type, name, tbl_name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_autoindex%' "
                "ORDER BY type, name").fetchall()
    listed = {r[1]: r for r in q("PRAGMA table_list").fetchall()}  # schema, name, type, ncol, wr, strict
    for kind, name, table, sql in objects:
        if kind == "table":
            lines += _sqlite_table(conn, name, sql, listed[name])
        elif kind == "index" and sql is not None:
            lines.append(f"index {name} {normalized(sql)}")
        elif kind in ("trigger", "view"):
            lines.append(f"{kind} {name} on {table}: {normalized(sql)}")
    return lines


def _sqlite_table(conn: sqlite3.Connection, name: str, sql: str, listed: tuple[Any, ...]) -> list[str]:
    q = conn.execute
    if name.startswith("sqlite_"):  # sqlite_sequence, sqlite_stat1: made by SQLite, listed by their rows
        return [f"table {name}"] + [f"row {name} {row!r}" for row in q(f'SELECT * FROM "{name}" ORDER BY 1')]
    shape = ["without rowid" if listed[4] else "rowid"]
    shape += ["strict"] if listed[5] else []
    shape += ["autoincrement"] if re.search(r"\bAUTOINCREMENT\b", normalized(sql), re.I) else []
    lines = [f"table {name} {' '.join(shape)}"]
    for cid, column, type_, notnull, default, pk, hidden in q(f'PRAGMA table_xinfo("{name}")'):
        lines.append(f"column {name} {cid:02d} {column} {type_.upper() or '(no type)'}"
                     + (" NOT NULL" if notnull else "") + (f" DEFAULT {default}" if default is not None else "")
                     + (f" PRIMARY KEY {pk}" if pk else "") + (f" HIDDEN {hidden}" if hidden else ""))
    lines += [f"clause {name} {i:02d} {clause}" for i, clause in enumerate(_clauses(sql))]
    lines += [f"foreign key {name} {row[1:]!r}" for row in q(f'PRAGMA foreign_key_list("{name}")')]
    for _, index, unique, origin, partial in q(f'PRAGMA index_list("{name}")'):
        keys = [f"{col if col is not None else ('<rowid>' if cid == -1 else '<expression>')}"
                f"{' DESC' if desc else ''} COLLATE {coll}{'' if key else ' (not a key)'}"
                for _, cid, col, desc, coll, key in q(f'PRAGMA index_xinfo("{index}")')]
        shown = index if origin == "c" else f"({origin} of {name})"  # SQLite numbers its own indexes
        lines.append(f"index {shown} on {name} unique={unique} origin={origin} partial={partial}: "
                     + ", ".join(keys))
    if name not in IGNORED_ROWS:
        count = q(f'SELECT count(*) FROM "{name}"').fetchone()[0]
        lines.append(f"rows {name} {count}")
    return lines


# -- PostgreSQL ---------------------------------------------------------------------------------------

_PG_LINES = r"""
WITH ns AS (SELECT oid FROM pg_namespace WHERE nspname = current_schema()),
rels AS (SELECT c.* FROM pg_class c, ns WHERE c.relnamespace = ns.oid)
SELECT concat_ws(' ', 'relation', relname, 'kind=' || relkind::text, 'persistence=' || relpersistence::text,
                 'replica_identity=' || relreplident::text, CASE WHEN relrowsecurity THEN 'ROW SECURITY' END,
                 CASE WHEN relforcerowsecurity THEN 'FORCE ROW SECURITY' END,
                 CASE WHEN relispartition THEN 'PARTITION' END, 'options=' || reloptions::text,
                 'acl=' || relacl::text)
  FROM rels WHERE relkind NOT IN ('i', 'I', 'S')
UNION ALL
SELECT concat_ws(' ', 'column', r.relname,
                 lpad((row_number() OVER (PARTITION BY r.oid ORDER BY a.attnum))::text, 2, '0'),
                 a.attname, format_type(a.atttypid, a.atttypmod), CASE WHEN a.attnotnull THEN 'NOT NULL' END,
                 'DEFAULT ' || pg_get_expr(d.adbin, d.adrelid),
                 CASE a.attidentity WHEN 'a' THEN 'GENERATED ALWAYS AS IDENTITY'
                                    WHEN 'd' THEN 'GENERATED BY DEFAULT AS IDENTITY' END,
                 CASE WHEN a.attgenerated <> '' THEN 'GENERATED ' || a.attgenerated::text END,
                 CASE WHEN a.attcollation <> t.typcollation THEN 'COLLATE ' || co.collname END,
                 CASE WHEN a.attstorage <> t.typstorage THEN 'STORAGE ' || a.attstorage::text END,
                 CASE WHEN a.attstattarget <> -1 THEN 'STATISTICS ' || a.attstattarget END,
                 CASE WHEN a.attcompression <> '' THEN 'COMPRESSION ' || a.attcompression::text END,
                 'OPTIONS ' || (SELECT array_agg(o ORDER BY o)::text FROM unnest(a.attoptions) o
                                WHERE o NOT LIKE 'pg\_attver=%'),  -- set by some servers on every column
                 'ACL ' || a.attacl::text)
  FROM rels r JOIN pg_attribute a ON a.attrelid = r.oid AND a.attnum > 0 AND NOT a.attisdropped
  JOIN pg_type t ON t.oid = a.atttypid
  LEFT JOIN pg_collation co ON co.oid = a.attcollation
  LEFT JOIN pg_attrdef d ON d.adrelid = r.oid AND d.adnum = a.attnum
  WHERE r.relkind IN ('r', 'p', 'v', 'm', 'f')
UNION ALL
SELECT concat_ws(' ', 'constraint', c.conrelid::regclass::text, c.conname, pg_get_constraintdef(c.oid),
                 CASE WHEN NOT c.convalidated THEN 'NOT VALID' END)
  FROM pg_constraint c, ns WHERE c.connamespace = ns.oid
UNION ALL
SELECT concat_ws(' ', 'index', pg_get_indexdef(i.indexrelid), 'OPTIONS ' || ic.reloptions::text,
                 CASE WHEN i.indisclustered THEN 'CLUSTERED' END, CASE WHEN i.indisreplident THEN 'REPLICA' END,
                 CASE WHEN NOT i.indisvalid THEN 'INVALID' END)
  FROM pg_index i JOIN rels r ON r.oid = i.indrelid JOIN pg_class ic ON ic.oid = i.indexrelid
UNION ALL
SELECT concat_ws(' ', 'sequence', c.relname, format_type(s.seqtypid, NULL), 'START', s.seqstart, 'INCREMENT',
                 s.seqincrement, 'MIN', s.seqmin, 'MAX', s.seqmax, 'CACHE', s.seqcache,
                 CASE WHEN s.seqcycle THEN 'CYCLE' END,
                 (SELECT 'OWNED BY ' || d.refobjid::regclass::text || '.' || a.attname || ' (' || d.deptype::text || ')'
                    FROM pg_depend d JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
                   WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype IN ('a', 'i')))
  FROM rels c JOIN pg_sequence s ON s.seqrelid = c.oid
UNION ALL
SELECT concat_ws(' ', 'trigger', pg_get_triggerdef(t.oid), CASE WHEN t.tgenabled <> 'O' THEN t.tgenabled::text END)
  FROM pg_trigger t JOIN rels r ON r.oid = t.tgrelid WHERE NOT t.tgisinternal
UNION ALL
SELECT concat_ws(' ', 'function', p.oid::regprocedure::text, 'kind=' || p.prokind::text,
                 CASE WHEN p.prokind IN ('f', 'p', 'w') THEN pg_get_functiondef(p.oid) END)
  FROM pg_proc p, ns WHERE p.pronamespace = ns.oid
UNION ALL
SELECT concat_ws(' ', 'view', r.relname, pg_get_viewdef(r.oid)) FROM rels r WHERE r.relkind IN ('v', 'm')
UNION ALL
SELECT concat_ws(' ', 'type', t.typname, t.typtype, t.typcategory, format_type(t.typbasetype, t.typtypmod),
                 t.typnotnull, t.typdefault,
                 (SELECT string_agg(e.enumlabel, ',' ORDER BY e.enumsortorder) FROM pg_enum e
                   WHERE e.enumtypid = t.oid))
  FROM pg_type t, ns WHERE t.typnamespace = ns.oid AND t.typrelid = 0 AND t.typelem = 0
UNION ALL
SELECT concat_ws(' ', 'comment', d.classoid::regclass::text, r.relname, d.objsubid, d.description)
  FROM pg_description d JOIN rels r ON r.oid = d.objoid
UNION ALL
SELECT concat_ws(' ', 'policy', r.relname, p.polname, p.polcmd, p.polpermissive, pg_get_expr(p.polqual, p.polrelid),
                 pg_get_expr(p.polwithcheck, p.polrelid))
  FROM pg_policy p JOIN rels r ON r.oid = p.polrelid
UNION ALL
SELECT concat_ws(' ', 'rule', r.relname, rw.rulename, pg_get_ruledef(rw.oid))
  FROM pg_rewrite rw JOIN rels r ON r.oid = rw.ev_class WHERE rw.rulename <> '_RETURN'
UNION ALL
SELECT concat_ws(' ', 'statistics', e.stxname, pg_get_statisticsobjdef(e.oid))
  FROM pg_statistic_ext e, ns WHERE e.stxnamespace = ns.oid
"""
"""One line per object and property of the current schema's catalog."""


def postgres_catalog(url: str) -> list[str]:
    """The catalog of the schema that ``url``'s connections use (its search path's first)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        schema = conn.execute("SELECT current_schema()").fetchone()[0]  # type: ignore[index]
        lines = [" ".join(str(row[0]).split()) for row in conn.execute(_PG_LINES)]
        tables = conn.execute(
            "SELECT c.relname FROM pg_class c WHERE c.relnamespace = current_schema()::regnamespace "
            "AND c.relkind IN ('r', 'p') ORDER BY 1").fetchall()
        for (table,) in tables:
            if table not in IGNORED_ROWS:
                count = conn.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0]  # type: ignore[index]
                lines.append(f"rows {table} {count}")
    quoted = re.escape(f'"{schema}".'), re.escape(f"{schema}.")
    return sorted(re.sub("|".join(quoted), "", line) for line in lines)
