"""The scaffold's templates: text files shipped in ``jobloom/scaffold/templates`` with ``${name}`` fields."""

from __future__ import annotations

from importlib import resources
from string import Template


def render(template: str, **fields: str) -> str:
    """The template ``template`` (e.g. ``"jobs.py"``) with its ``${field}`` placeholders filled in.

    A placeholder without a value raises ``KeyError``: a template and its caller must agree."""
    text = resources.files("jobloom.scaffold").joinpath("templates", f"{template}.tmpl").read_text(encoding="utf-8")
    return Template(text).substitute(fields)
