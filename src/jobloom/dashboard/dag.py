"""A run's DAG drawn as inline SVG: a layered layout computed here, pure and without dependencies.

:func:`render_dag_svg` places nodes in layers by longest path (every edge points to a later layer),
orders each layer by the barycentre of its neighbours in sweeps down and up (keeping the order with
the fewest crossings), routes an edge that spans several layers through a point in each layer it
crosses, and returns one ``<svg>`` element with a ``viewBox``: each node a rounded rect with its label
(class ``dag-node state-<state>``), a link when it has an ``href``, and edges as paths with arrowheads.
Every text is escaped. :func:`flow_dag` builds the nodes and edges of a :class:`~jobloom.core.types.Run`,
one node per flow node, its fan-out and spawned children summarised on it.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape
from itertools import pairwise

from jobloom.core.errors import InvalidOption
from jobloom.core.types import Run

MIN_W = 150.0
MAX_W = 300.0
"""A graph's boxes share one width: enough for its longest text, within these bounds."""
LABEL_PX = 7.6
SMALL_PX = 6.4
"""About how wide a character of a label (13 px) and of a state or summary (11 px) is drawn."""
NODE_H = 40.0
SUMMARY_H = 16.0
LAYER_GAP = 72.0
ROW_GAP = 18.0
PAD = 12.0
LANE_H = 6.0
"""The height a long edge takes in each layer it crosses."""
SWEEPS = 8
_STATE = re.compile(r"[^a-z0-9_-]")


@dataclass(frozen=True, slots=True)
class DagNode:
    """One node to draw: a unique ``key``, the ``label`` shown, its ``state`` (the CSS class
    ``state-<state>`` colours it), a link (``href``) or None, and an optional second line
    (``summary``, e.g. a fan-out's children by state)."""

    key: str
    label: str
    state: str
    href: str | None
    summary: str | None = None


@dataclass(frozen=True, slots=True)
class Placed:
    """Where :func:`layout` put a node: its layer, its row in the layer, and its box's top-left corner."""

    key: str
    layer: int
    row: int
    x: float
    y: float
    w: float
    h: float


@dataclass(frozen=True, slots=True)
class Layout:
    """The layout of a DAG: node boxes by key, each edge's points (first at its source's right side,
    last at its target's left side, one per layer crossed between), and the drawing's size."""

    nodes: dict[str, Placed]
    edges: list[tuple[str, str, list[tuple[float, float]]]]
    width: float
    height: float


def layout(nodes: Sequence[DagNode], edges: Sequence[tuple[str, str]]) -> Layout:
    """Place ``nodes`` in layers from left to right (see the module's docstring).

    ``edges`` are ``(upstream key, downstream key)`` pairs naming given nodes (``InvalidOption`` if
    not); a node key given twice is refused too. Edges that would close a cycle are drawn but do not
    decide the layers."""
    keys = [n.key for n in nodes]
    if len(set(keys)) != len(keys):
        dup = next(k for k, c in Counter(keys).items() if c > 1)
        raise InvalidOption("nodes", dup, "unique node keys")
    index = {k: i for i, k in enumerate(keys)}
    for edge in edges:
        if edge[0] not in index or edge[1] not in index:
            raise InvalidOption("edges", edge, "pairs of keys of the given nodes")
    forward = _acyclic([(index[a], index[b]) for a, b in edges], len(keys))
    layer = _layers(forward, len(keys))
    # long edges pass through a virtual node in each layer they cross
    width_of = len(keys)
    chains: dict[tuple[int, int], list[int]] = {}
    links: list[tuple[int, int]] = []
    vlayer: list[int] = list(layer)
    for up, down in forward:
        chain = [up]
        for step in range(layer[up] + 1, layer[down]):
            vlayer.append(step)
            chain.append(width_of)
            width_of += 1
        chain.append(down)
        chains[(up, down)] = chain
        links += list(pairwise(chain))
    rows = _order(vlayer, links, max(vlayer, default=-1) + 1)
    w = box_width(nodes)
    h = [(NODE_H + (SUMMARY_H if nodes[i].summary else 0.0)) if i < len(nodes) else LANE_H for i in range(width_of)]
    tallest = max((sum(h[v] + ROW_GAP for v in row) - ROW_GAP for row in rows), default=0.0)
    pos: dict[int, tuple[float, float]] = {}
    placed: dict[str, Placed] = {}
    for li, row in enumerate(rows):
        total = sum(h[v] + ROW_GAP for v in row) - ROW_GAP
        y = PAD + (tallest - total) / 2
        x = PAD + li * (w + LAYER_GAP)
        for ri, v in enumerate(row):
            pos[v] = (x, y)
            if v < len(nodes):
                placed[keys[v]] = Placed(keys[v], li, ri, x, y, w, h[v])
            y += h[v] + ROW_GAP
    drawn: list[tuple[str, str, list[tuple[float, float]]]] = []
    for a, b in edges:
        ia, ib = index[a], index[b]
        chain = chains.get((ia, ib), [ia, ib])
        points = [(pos[ia][0] + w, pos[ia][1] + h[ia] / 2)]
        for v in chain[1:-1]:  # straight across each layer it crosses, in its own lane
            points += [(pos[v][0], pos[v][1] + h[v] / 2), (pos[v][0] + w, pos[v][1] + h[v] / 2)]
        points.append((pos[ib][0], pos[ib][1] + h[ib] / 2))
        drawn.append((a, b, points))
    width = PAD * 2 + len(rows) * (w + LAYER_GAP) - (LAYER_GAP if rows else 0.0)
    return Layout(placed, drawn, max(width, PAD * 2), tallest + PAD * 2)


def box_width(nodes: Sequence[DagNode]) -> float:
    """The width of every box of a graph: its longest label, state or summary, within bounds."""
    need = max((max(len(n.label) * LABEL_PX, len(n.state) * SMALL_PX, len(n.summary or "") * SMALL_PX)
                for n in nodes), default=0.0)
    return min(MAX_W, max(MIN_W, need + 20))


def _acyclic(edges: list[tuple[int, int]], n: int) -> list[tuple[int, int]]:
    """The edges without self-loops, duplicates and those that close a cycle (found by a depth-first
    search in the nodes' order), so that longest-path layering is defined."""
    out_edges: list[list[int]] = [[] for _ in range(n)]
    for a, b in dict.fromkeys(edges):
        if a != b:
            out_edges[a].append(b)
    colour = [0] * n  # 0 new, 1 on the stack, 2 done
    kept: list[tuple[int, int]] = []
    for root in range(n):
        if colour[root]:
            continue
        stack = [(root, 0)]
        colour[root] = 1
        while stack:
            v, i = stack.pop()
            if i < len(out_edges[v]):
                stack.append((v, i + 1))
                w = out_edges[v][i]
                if colour[w] == 1:
                    continue  # a back edge: it would close a cycle
                kept.append((v, w))
                if colour[w] == 0:
                    colour[w] = 1
                    stack.append((w, 0))
            else:
                colour[v] = 2
    return kept


def _layers(edges: list[tuple[int, int]], n: int) -> list[int]:
    """Longest-path layering: a node with no upstream is in layer 0, any other one layer after its
    furthest upstream node (Kahn's order, so each node is settled once)."""
    ups = [0] * n
    down: list[list[int]] = [[] for _ in range(n)]
    for a, b in edges:
        ups[b] += 1
        down[a].append(b)
    layer = [0] * n
    ready = [v for v in range(n) if ups[v] == 0]
    while ready:
        v = ready.pop()
        for w in down[v]:
            layer[w] = max(layer[w], layer[v] + 1)
            ups[w] -= 1
            if ups[w] == 0:
                ready.append(w)
    return layer


def _order(layer: list[int], links: list[tuple[int, int]], depth: int) -> list[list[int]]:
    """Each layer's order: by barycentre of the neighbours in the layer before (sweeping down) or after
    (sweeping up), ties kept in place; the order with the fewest crossings seen wins. ``links`` join
    adjacent layers only (long edges pass through virtual nodes)."""
    rows: list[list[int]] = [[] for _ in range(depth)]
    pos = [0] * len(layer)  # each node's row in its layer, as the sweeps move it
    for v, li in enumerate(layer):
        pos[v] = len(rows[li])
        rows[li].append(v)
    ups: list[list[int]] = [[] for _ in layer]
    downs: list[list[int]] = [[] for _ in layer]
    for a, b in links:
        downs[a].append(b)
        ups[b].append(a)
    best = [list(r) for r in rows]
    best_crossings = _crossings(rows, downs)
    for sweep in range(SWEEPS):
        down = sweep % 2 == 0
        near = ups if down else downs
        for li in range(1, depth) if down else range(depth - 2, -1, -1):
            keyed = []
            for i, v in enumerate(rows[li]):
                around = near[v]
                keyed.append((sum(pos[u] for u in around) / len(around) if around else float(i), i, v))
            keyed.sort()
            rows[li] = [v for _, _, v in keyed]
            for i, v in enumerate(rows[li]):
                pos[v] = i
        crossings = _crossings(rows, downs)
        if crossings < best_crossings:
            best, best_crossings = [list(r) for r in rows], crossings
        if best_crossings == 0:
            break
    return best


def _crossings(rows: list[list[int]], downs: Sequence[Sequence[int]]) -> int:
    """Edge crossings between adjacent layers: the inversions of the edges' target rows taken in
    (source row, target row) order (a Fenwick tree: E log E per pair of layers)."""
    total = 0
    for li in range(len(rows) - 1):
        below = {v: i for i, v in enumerate(rows[li + 1])}
        ends = sorted((i, below[w]) for i, v in enumerate(rows[li]) for w in downs[v])
        size = len(rows[li + 1])
        tree = [0] * (size + 1)
        for seen, (_, target) in enumerate(ends):
            # edges seen so far whose target is below this one's: they cross it
            k, not_after = target + 1, 0
            while k > 0:
                not_after += tree[k]
                k -= k & -k
            total += seen - not_after
            k = target + 1
            while k <= size:
                tree[k] += 1
                k += k & -k
    return total


def render_dag_svg(nodes: Sequence[DagNode], edges: Sequence[tuple[str, str]]) -> str:
    """The DAG as one inline ``<svg>`` element (see the module's docstring); pure."""
    lay = layout(nodes, edges)
    by_key = {n.key: n for n in nodes}
    out = [
        f'<svg class="dag" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {lay.width:.0f} {lay.height:.0f}" '
        f'width="{lay.width:.0f}" height="{lay.height:.0f}" role="img" aria-label="flow graph, {len(nodes)} nodes">',
        '<defs><marker id="dag-arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" '
        'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="currentColor"/></marker></defs>',
        '<g class="dag-edges" fill="none" stroke="currentColor" stroke-opacity="0.55" stroke-width="1.5">',
    ]
    for a, b, points in lay.edges:
        out.append(f'<path class="dag-edge" data-from="{escape(a)}" data-to="{escape(b)}" '
                   f'd="{_curve(points)}" marker-end="url(#dag-arrow)"/>')
    out.append("</g>")
    for key, p in lay.nodes.items():
        out.append(_node(by_key[key], p))
    out.append("</svg>")
    return "".join(out)


def _curve(points: list[tuple[float, float]]) -> str:
    """A smooth path through ``points``: a horizontal-tangent cubic between each pair."""
    (x0, y0), rest = points[0], points[1:]
    d = [f"M{x0:.1f},{y0:.1f}"]
    for x1, y1 in rest:
        mid = (x0 + x1) / 2
        d.append(f"C{mid:.1f},{y0:.1f} {mid:.1f},{y1:.1f} {x1:.1f},{y1:.1f}")
        x0, y0 = x1, y1
    return " ".join(d)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _node(n: DagNode, p: Placed) -> str:
    label_chars, small_chars = int((p.w - 20) / LABEL_PX), int((p.w - 20) / SMALL_PX)
    state = _STATE.sub("", n.state.lower()) or "unknown"
    tip = f"{n.label} ({n.state})" + (f": {n.summary}" if n.summary else "")
    parts = [
        f'<g class="dag-node state-{state}" data-key="{escape(n.key)}" data-state="{escape(n.state)}">',
        f"<title>{escape(tip)}</title>",
        f'<rect x="{p.x:.1f}" y="{p.y:.1f}" width="{p.w:.1f}" height="{p.h:.1f}" rx="6" ry="6" '
        'fill="Canvas" stroke="currentColor" stroke-width="1.5"/>',
        f'<text class="dag-label" x="{p.x + 10:.1f}" y="{p.y + 17:.1f}" fill="currentColor" '
        f'font-size="13">{escape(_cut(n.label, label_chars))}</text>',
        f'<text class="dag-state" x="{p.x + 10:.1f}" y="{p.y + 32:.1f}" fill="currentColor" fill-opacity="0.7" '
        f'font-size="11">{escape(_cut(n.state, small_chars))}</text>',
    ]
    if n.summary:
        parts.append(f'<text class="dag-summary" x="{p.x + 10:.1f}" y="{p.y + 48:.1f}" fill="currentColor" '
                     f'fill-opacity="0.7" font-size="11">{escape(_cut(n.summary, small_chars))}</text>')
    parts.append("</g>")
    body = "".join(parts)
    if n.href is None:
        return body
    return f'<a href="{escape(n.href)}" class="dag-link" aria-label="{escape(tip)}">{body}</a>'


def _summary(what: str, states: Counter[str]) -> str:
    total = sum(states.values())
    by_state = ", ".join(f"{n} {s}" for s, n in sorted(states.items(), key=lambda kv: (-kv[1], kv[0])))
    return f"{total} {what}: {by_state}"


def flow_dag(run: Run, *, job_href: Callable[[int], str] | None = None,
             counted: dict[str, Counter[str]] | None = None) -> tuple[list[DagNode], list[tuple[str, str]]]:
    """The nodes and edges of ``run``'s DAG: one node per flow node (its job's state, a link to its job:
    ``job_href(job_id)``, by default ``/jobs/<id>``), a fan-out's children and what a node spawned
    summarised on their node by state ("120 children: 100 succeeded, 20 running"), and an edge from each
    upstream node to its downstream node. ``counted``: each node's children per state, read apart (then
    ``run.nodes`` may hold the flow's own nodes only)."""
    link = job_href or (lambda job_id: f"/jobs/{job_id}")
    children: dict[str, Counter[str]] = dict(counted or {})
    spawned: dict[str, Counter[str]] = {}
    tops: dict[str, int | None] = {name: None for name in run.graph}
    for name, node in run.nodes.items():
        cut = min((i for i in (name.find(":"), name.find("/")) if i >= 0), default=-1)
        if cut < 0:
            tops[name] = node.job_id
            continue
        top = name[:cut]
        tops.setdefault(top, None)
        if counted is not None:
            continue
        (children if name[cut] == ":" else spawned).setdefault(top, Counter())[node.state] += 1
    for top in children:
        tops.setdefault(top, None)
    nodes: list[DagNode] = []
    for name, job_id in tops.items():
        state = run.nodes[name].state if name in run.nodes else "pending"
        notes = [_summary("children", children[name])] if name in children else []
        notes += [_summary("spawned", spawned[name])] if name in spawned else []
        nodes.append(DagNode(name, name, state, None if job_id is None else link(job_id),
                             "; ".join(notes) or None))
    edges = [(up, name) for name, ups in run.graph.items() for up in ups if up in tops]
    return nodes, edges
