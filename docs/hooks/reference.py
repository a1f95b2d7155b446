"""mkdocs hooks: the command-line and REST API reference, generated from jobloom itself at build time.

A page that holds ``<!-- generated: cli -->`` gets the help of every ``jobloom`` command there, as the
command prints it (``jobloom COMMAND --help``); one that holds ``<!-- generated: openapi -->`` gets every
operation and schema of the OpenAPI document that ``jobloom serve`` serves. The document itself is
published beside the page as ``reference/openapi.json``. Nothing is written into ``docs/``.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

CLI_MARK = "<!-- generated: cli -->"
API_MARK = "<!-- generated: openapi -->"
HELP_WIDTH = "100"


def on_files(files: Any, config: Any) -> Any:
    """Publish the OpenAPI document as ``reference/openapi.json``."""
    from mkdocs.structure.files import File

    files.append(File.generated(config, "reference/openapi.json", content=json.dumps(openapi(), indent=2)))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Put the generated reference where a page asks for it."""
    if CLI_MARK in markdown:
        markdown = markdown.replace(CLI_MARK, cli_reference())
    if API_MARK in markdown:
        markdown = markdown.replace(API_MARK, api_reference())
    return markdown


# -- the command line ------------------------------------------------------------------------------


def _help(command: Any, args: list[str]) -> str:
    from click.testing import CliRunner

    env = {"COLUMNS": HELP_WIDTH, "TERMINAL_WIDTH": HELP_WIDTH, "NO_COLOR": "1", "TERM": "dumb"}
    result = CliRunner().invoke(command, [*args, "--help"], prog_name="jobloom", env=env)
    if result.exit_code != 0:
        raise RuntimeError(f"jobloom {' '.join(args)} --help failed: {result.output}")
    return "\n".join(line.rstrip() for line in result.output.strip("\n").splitlines())


@cache
def cli_reference() -> str:
    """Markdown: the help of ``jobloom`` and of each of its commands."""
    import typer.main

    from jobloom.cli.main import cli
    from jobloom.cli.usage import plain_flags, visible_commands

    command = plain_flags(typer.main.get_command(cli))
    parts = ["### jobloom", "", "```text", _help(command, []), "```", ""]
    for path in visible_commands(command):
        parts += [f"### jobloom {' '.join(path)}", "", "```text", _help(command, path), "```", ""]
    return "\n".join(parts)


# -- the REST API ----------------------------------------------------------------------------------


@cache
def openapi() -> dict[str, Any]:
    """The OpenAPI document of ``jobloom serve`` (an app on an empty store: the routes do not depend on it)."""
    import jobloom
    from jobloom.http.factory import create_fastapi

    with tempfile.TemporaryDirectory() as folder:
        app = jobloom.App(f"sqlite:///{Path(folder) / 'openapi.db'}")
        return dict(create_fastapi(app).openapi())


def _text(value: str) -> str:
    """Docstring text as Markdown: rst's double backquotes become single ones, lines joined."""
    return re.sub(r"``(.+?)``", r"`\1`", " ".join(value.split()))


def _type(schema: dict[str, Any]) -> str:
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{name.lower()})"
    if "anyOf" in schema:
        return " or ".join(_type(s) for s in schema["anyOf"])
    kind = schema.get("type")
    if kind == "array":
        return f"array of {_type(schema.get('items', {}))}"
    if kind == "object" and "additionalProperties" in schema:
        extra = schema["additionalProperties"]
        return f"object of {_type(extra)}" if isinstance(extra, dict) and extra else "object"
    if "enum" in schema:
        return " \\| ".join(f"`{v}`" for v in schema["enum"])
    if "const" in schema:
        return f"`{schema['const']}`"
    return str(kind or "any")


def _cell(value: str) -> str:
    return value.replace("|", "\\|").replace("\n", " ")


def _operation(method: str, path: str, op: dict[str, Any]) -> list[str]:
    lines = [f"### {method.upper()} `{path}`", "", f"**{op.get('summary', '')}**. {_text(op.get('description', ''))}"]
    scope = op.get("x-jobloom-scope")
    lines += ["", f"Scope: `{scope}`." if scope else "No token needed.", ""]
    params = op.get("parameters", [])
    if params:
        lines += ["| parameter | in | type | required | meaning |", "|---|---|---|---|---|"]
        for p in params:
            lines.append(f"| `{p['name']}` | {p['in']} | {_cell(_type(p.get('schema', {})))} | "
                         f"{'yes' if p.get('required') else 'no'} | {_cell(_text(p.get('description', '')))} |")
        lines.append("")
    body = op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
    if body:
        lines += [f"Body (JSON): {_type(body)}", ""]
    lines += ["| status | meaning | body |", "|---|---|---|"]
    for status, answer in sorted(op.get("responses", {}).items()):
        schema = answer.get("content", {}).get("application/json", {}).get("schema")
        shape = _cell(_type(schema)) if schema else ""
        lines.append(f"| {status} | {_cell(answer.get('description', ''))} | {shape} |")
    return [*lines, ""]


def _schema(name: str, schema: dict[str, Any]) -> list[str]:
    lines = [f"### {name}", ""]
    if schema.get("description"):
        lines += [_text(schema["description"]), ""]
    props = schema.get("properties", {})
    if not props:
        return [*lines, f"Type: {_type(schema)}", ""]
    required = set(schema.get("required", []))
    lines += ["| field | type | required | meaning |", "|---|---|---|---|"]
    for field, sub in props.items():
        lines.append(f"| `{field}` | {_cell(_type(sub))} | {'yes' if field in required else 'no'} | "
                     f"{_cell(_text(sub.get('description', '')))} |")
    return [*lines, ""]


@cache
def api_reference() -> str:
    """Markdown: every operation of the API, grouped by tag, then every schema."""
    doc = openapi()
    by_tag: dict[str, list[str]] = {}
    for path, item in doc["paths"].items():
        for method, op in item.items():
            tag = (op.get("tags") or ["other"])[0]
            by_tag.setdefault(tag, []).extend(_operation(method, path, op))
    parts = [f"OpenAPI {doc['openapi']}, API version {doc['info']['version']}: [openapi.json](openapi.json).", ""]
    for tag, lines in by_tag.items():
        parts += [f"## {tag.capitalize()}", "", *lines]
    parts += ["## Schemas", ""]
    for name, schema in sorted(doc.get("components", {}).get("schemas", {}).items()):
        parts += _schema(name, schema)
    return "\n".join(parts)


if os.environ.get("JOBLOOM_DOCS_DEBUG"):  # `JOBLOOM_DOCS_DEBUG=1 python docs/hooks/reference.py`: print both
    print(cli_reference())
    print(api_reference())
