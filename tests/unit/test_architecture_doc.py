"""docs/explanation/architecture.md draws the job state machine; the drawing must be exactly ``jobloom.states``.

The mermaid ``stateDiagram-v2`` block of the document is parsed: one edge per (source, target) pair,
labelled with the statements that make it, and a ``[*] -->`` edge per state a job is inserted in.
A transition added to or removed from ``states.TRANSITIONS`` without the drawing fails here, and the
failure shows the block to paste.
"""

from __future__ import annotations

import re
from pathlib import Path

from jobloom.core.states import ALL_STATES, INITIAL_STATES, TRANSITIONS

DOC = Path(__file__).resolve().parents[2] / "docs" / "explanation" / "architecture.md"
_BLOCK = re.compile(r"```mermaid\n(stateDiagram-v2\n.*?)```", re.S)
_EDGE = re.compile(r"^\s*(\[\*\]|\w+)\s*-->\s*(\w+)\s*(?::\s*(.*?))?\s*$")

Edges = dict[tuple[str, str], frozenset[str]]


def expected_edges() -> Edges:
    """Every (source, target) of the state machine, with the names of the statements that make it."""
    edges: dict[tuple[str, str], set[str]] = {}
    for t in TRANSITIONS:
        for source in t.sources:
            for target in t.targets:
                edges.setdefault((source, target), set()).add(t.name)
    return {pair: frozenset(names) for pair, names in edges.items()}


def render() -> str:
    """The diagram as the document should hold it (states in ``ALL_STATES`` order)."""
    rank = {s: i for i, s in enumerate(ALL_STATES)}
    names_in_order = {t.name: i for i, t in enumerate(TRANSITIONS)}
    lines = ["stateDiagram-v2"] + [f"    [*] --> {s}" for s in ALL_STATES if s in INITIAL_STATES]
    for (source, target), names in sorted(expected_edges().items(), key=lambda e: (rank[e[0][0]], rank[e[0][1]])):
        lines.append(f"    {source} --> {target} : {', '.join(sorted(names, key=names_in_order.__getitem__))}")
    return "\n".join(lines) + "\n"


def problems(text: str) -> list[str]:
    """How the state diagram in ``text`` (a document holding exactly one) differs from ``states.py``."""
    blocks = _BLOCK.findall(text)
    if len(blocks) != 1:
        return [f"expected one mermaid stateDiagram-v2 block, found {len(blocks)}"]
    out: list[str] = []
    edges: Edges = {}
    initial: set[str] = set()
    for line in blocks[0].splitlines()[1:]:
        m = _EDGE.match(line)
        if not line.strip():
            continue
        if m is None:
            out.append(f"a line that is not an edge: {line!r}")
            continue
        source, target, label = m.groups()
        if source == "[*]":
            initial.add(target)
        elif (source, target) in edges:
            out.append(f"the edge {source} --> {target} is drawn twice")
        else:
            edges[(source, target)] = frozenset(n.strip() for n in (label or "").split(",") if n.strip())
    if initial != set(INITIAL_STATES):
        out.append(f"initial states drawn {sorted(initial)}, not {sorted(INITIAL_STATES)}")
    want = expected_edges()
    out += [f"missing edge {s} --> {d}" for s, d in sorted(set(want) - set(edges))]
    out += [f"edge not in states.py: {s} --> {d}" for s, d in sorted(set(edges) - set(want))]
    out += [f"edge {s} --> {d} labelled {sorted(names)}, not {sorted(want[(s, d)])}"
            for (s, d), names in sorted(edges.items()) if (s, d) in want and names != want[(s, d)]]
    return out


def test_the_state_diagram_is_exactly_the_transitions_of_states_py() -> None:
    found = problems(DOC.read_text())
    assert not found, (f"{DOC}: the state diagram is not states.TRANSITIONS:\n" + "\n".join(found)
                       + f"\nwrite this block instead:\n```mermaid\n{render()}```")


def test_the_check_sees_a_diagram_that_drifted() -> None:
    good = f"# doc\n```mermaid\n{render()}```\n"
    assert problems(good) == []
    assert problems(good.replace("    queued --> running : claim, claim_batch, claim_direct\n", "")) == [
        "missing edge queued --> running"]
    assert problems(good.replace("```\n", "    succeeded --> queued : retry_now\n```\n")) == [
        "edge not in states.py: succeeded --> queued"]
    assert problems(good.replace("failed : finish_attempt, fail_attempt", "failed : finish_attempt")) == [
        "edge running --> failed labelled ['finish_attempt'], not ['fail_attempt', 'finish_attempt']"]
    assert problems(good.replace("    [*] --> waiting\n", "")) == [
        "initial states drawn ['queued', 'scheduled'], not ['queued', 'scheduled', 'waiting']"]
    assert problems("no diagram") == ["expected one mermaid stateDiagram-v2 block, found 0"]
