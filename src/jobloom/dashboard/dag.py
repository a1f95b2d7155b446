"""A run's DAG as inline SVG (placeholder, replaced by dash-logic)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape


@dataclass(frozen=True, slots=True)
class DagNode:
    """One node to draw."""

    key: str
    label: str
    state: str
    href: str | None
    summary: str | None = None


def render_dag_svg(nodes: Sequence[DagNode], edges: Sequence[tuple[str, str]]) -> str:
    """The nodes in one row (placeholder)."""
    parts = []
    for i, n in enumerate(nodes):
        box = (f'<g class="dag-node state-{escape(n.state)}"><rect x="{i * 160}" y="0" width="150" height="40"/>'
               f'<text x="{i * 160 + 8}" y="24">{escape(n.label)} ({escape(n.state)})</text></g>')
        parts.append(f'<a href="{escape(n.href)}">{box}</a>' if n.href else box)
    return f'<svg xmlns="http://www.w3.org/2000/svg" width="{160 * len(nodes)}" height="44">{"".join(parts)}</svg>'
