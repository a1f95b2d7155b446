"""The DAG drawing: every node and edge drawn, no two boxes overlapping, edges pointing to later layers,
hostile labels escaped, crossings reduced, a run's nodes summarised, and a 200-node graph drawn fast."""

from __future__ import annotations

import random
import xml.etree.ElementTree as ET
from datetime import UTC, datetime

import pytest

from jobloom.core.errors import InvalidOption
from jobloom.core.types import NodeState, Run
from jobloom.dashboard.dag import DagNode, _crossings, flow_dag, layout, render_dag_svg

SVG = "{http://www.w3.org/2000/svg}"


def _nodes(*keys: str, state: str = "queued") -> list[DagNode]:
    return [DagNode(k, k, state, f"/jobs/{i}") for i, k in enumerate(keys)]


def _parse(svg: str) -> ET.Element:
    return ET.fromstring(svg)  # the drawing is well-formed XML: nothing unescaped got through


def _boxes(root: ET.Element) -> dict[str, tuple[float, float, float, float]]:
    out = {}
    for g in root.iter(f"{SVG}g"):
        if "dag-node" in (g.get("class") or ""):
            rect = g.find(f"{SVG}rect")
            assert rect is not None
            out[g.get("data-key") or ""] = (float(rect.get("x") or 0), float(rect.get("y") or 0),
                                            float(rect.get("width") or 0), float(rect.get("height") or 0))
    return out


def _random_dag(rng: random.Random, n: int, p: float) -> tuple[list[DagNode], list[tuple[str, str]]]:
    keys = [f"n{i}" for i in range(n)]
    edges = [(keys[i], keys[j]) for i in range(n) for j in range(i + 1, min(n, i + 12)) if rng.random() < p]
    rng.shuffle(edges)
    return [DagNode(k, k, rng.choice(["succeeded", "running", "queued", "waiting"]), None) for k in keys], edges


def test_every_node_and_edge_is_drawn_with_its_state_and_link() -> None:
    nodes = [DagNode("a", "analyze", "succeeded", "/jobs/1"), DagNode("b", "thumbnail", "running", "/jobs/2"),
             DagNode("c", "publish", "waiting", None, summary="3 children: 2 succeeded, 1 running")]
    svg = render_dag_svg(nodes, [("a", "b"), ("b", "c"), ("a", "c")])
    root = _parse(svg)
    assert root.tag == f"{SVG}svg" and root.get("viewBox", "").startswith("0 0 ")
    assert set(_boxes(root)) == {"a", "b", "c"}
    classes = {g.get("data-key"): g.get("class") for g in root.iter(f"{SVG}g") if g.get("data-key")}
    assert classes == {"a": "dag-node state-succeeded", "b": "dag-node state-running", "c": "dag-node state-waiting"}
    paths = {(p.get("data-from"), p.get("data-to")) for p in root.iter(f"{SVG}path") if p.get("data-from")}
    assert paths == {("a", "b"), ("b", "c"), ("a", "c")}
    assert all(p.get("marker-end") == "url(#dag-arrow)" for p in root.iter(f"{SVG}path") if p.get("data-from"))
    links = {a.get("href") for a in root.iter(f"{SVG}a")}
    assert links == {"/jobs/1", "/jobs/2"}  # c has no link
    assert "3 children: 2 succeeded, 1 running" in svg


def test_no_two_boxes_overlap_and_layers_follow_the_edges() -> None:
    rng = random.Random(7)
    for _ in range(20):
        nodes, edges = _random_dag(rng, rng.randint(1, 40), rng.random() * 0.5)
        lay = layout(nodes, edges)
        boxes = list(lay.nodes.values())
        assert len(boxes) == len(nodes)
        for i, a in enumerate(boxes):
            assert a.x >= 0 and a.x + a.w <= lay.width and a.y >= 0 and a.y + a.h <= lay.height
            for b in boxes[i + 1:]:
                apart = a.x + a.w <= b.x or b.x + b.w <= a.x or a.y + a.h <= b.y or b.y + b.h <= a.y
                assert apart, (a, b)
        for up, down in edges:
            assert lay.nodes[up].layer < lay.nodes[down].layer
            assert lay.nodes[up].x + lay.nodes[up].w < lay.nodes[down].x
        # longest-path layering: a node is one layer after its furthest upstream node, roots in layer 0
        for n in nodes:
            ups = [lay.nodes[a].layer for a, b in edges if b == n.key]
            assert lay.nodes[n.key].layer == (max(ups) + 1 if ups else 0)


def test_a_long_edge_bends_through_the_layers_it_crosses() -> None:
    lay = layout(_nodes("a", "b", "c", "d"), [("a", "b"), ("b", "c"), ("c", "d"), ("a", "d")])
    long = next(points for a, b, points in lay.edges if (a, b) == ("a", "d"))
    assert len(long) == 6  # its ends, and straight across each of the two layers between (in and out)


def test_barycentre_ordering_removes_the_crossings_of_a_crossed_input() -> None:
    # two chains given in crossed order: a1 -> b2, a2 -> b1 ... untangled by the sweeps
    nodes = _nodes("a1", "a2", "a3", "b3", "b1", "b2", "c2", "c3", "c1")
    edges = [("a1", "b1"), ("a2", "b2"), ("a3", "b3"), ("b1", "c1"), ("b2", "c2"), ("b3", "c3")]
    lay = layout(nodes, edges)
    for a, b in edges:
        assert lay.nodes[a].row == lay.nodes[b].row  # straight lines: no crossing left


def test_crossings_are_counted_exactly() -> None:
    downs = [[3], [2], [], []]
    assert _crossings([[0, 1], [2, 3]], downs) == 1
    assert _crossings([[0, 1], [3, 2]], downs) == 0
    assert _crossings([[0, 1], [2, 3]], [[2, 3], [2, 3], [], []]) == 1
    assert _crossings([[0, 1], [2]], [[2], [2], []]) == 0  # edges sharing an end do not cross


def test_hostile_labels_and_links_are_escaped() -> None:
    evil = '<script>alert("x")</script>&'
    nodes = [DagNode('k"><script>', evil, 'running" onload="x', 'javascript:"><img src=x>', summary=evil)]
    svg = render_dag_svg(nodes, [])
    assert "<script>" not in svg and "<img" not in svg and 'onload="x' not in svg
    root = _parse(svg)
    g = next(g for g in root.iter(f"{SVG}g") if g.get("data-key"))
    assert g.get("data-key") == 'k"><script>'
    assert g.get("class") == "dag-node state-runningonloadx"  # only [a-z0-9_-] reach the class
    texts = [t.text for t in root.iter(f"{SVG}text")]
    assert texts[0] is not None and texts[0].startswith("<script>")  # shown as text (cut to fit)
    title = root.find(f".//{SVG}title")
    assert title is not None and title.text is not None and evil in title.text


def test_bad_input_is_refused_naming_it() -> None:
    with pytest.raises(InvalidOption, match="edges"):
        render_dag_svg(_nodes("a"), [("a", "missing")])
    with pytest.raises(InvalidOption, match="nodes"):
        render_dag_svg(_nodes("a", "a"), [])


def test_a_cycle_and_an_empty_graph_still_draw() -> None:
    root = _parse(render_dag_svg(_nodes("a", "b"), [("a", "b"), ("b", "a")]))
    assert len(_boxes(root)) == 2
    assert _parse(render_dag_svg([], [])).tag == f"{SVG}svg"


def test_a_200_node_graph_draws_every_node_and_edge() -> None:
    # its time is measured in benchmarks/dag_render.py (RESULTS.md), not here
    nodes, edges = _random_dag(random.Random(3), 200, 0.25)
    root = _parse(render_dag_svg(nodes, edges))
    assert len(_boxes(root)) == 200
    paths = {(p.get("data-from"), p.get("data-to")) for p in root.iter(f"{SVG}path") if p.get("data-from")}
    assert paths == set(edges)


def _run(nodes: dict[str, tuple[int, str]], graph: dict[str, list[str]]) -> Run:
    return Run(id="r1", flow="fan-out", state="running", input={}, deadline=None, parent_job_id=None, error=None,
               created_at=datetime.now(UTC), finished_at=None,
               nodes={k: NodeState(k, i, s, 1, None, None) for k, (i, s) in nodes.items()}, graph=graph)


def test_flow_dag_draws_a_run_with_its_fan_out_summarised() -> None:
    nodes = {"analyze": (1, "succeeded"), "resize": (2, "waiting"), "collect": (3, "waiting"),
             "notify": (9, "succeeded"), "notify/mail": (10, "running")}
    nodes |= {f"resize:{i}": (100 + i, "succeeded" if i < 100 else "running") for i in range(120)}
    run = _run(nodes, {"analyze": [], "resize": ["analyze"], "collect": ["resize"], "notify": ["analyze"]})
    dag_nodes, edges = flow_dag(run, job_href=lambda i: f"/dash/jobs/{i}")
    by_key = {n.key: n for n in dag_nodes}
    assert set(by_key) == {"analyze", "resize", "collect", "notify"}
    assert by_key["resize"].summary == "120 children: 100 succeeded, 20 running"
    assert by_key["resize"].state == "waiting" and by_key["resize"].href == "/dash/jobs/2"
    assert by_key["notify"].summary == "1 spawned: 1 running"
    assert sorted(edges) == [("analyze", "notify"), ("analyze", "resize"), ("resize", "collect")]
    svg = render_dag_svg(dag_nodes, edges)
    assert len(_boxes(_parse(svg))) == 4
    assert flow_dag(run)[0][0].href == "/jobs/1"
