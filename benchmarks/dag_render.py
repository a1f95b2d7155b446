"""Time to draw a flow run's graph (``render_dag_svg``) for graphs of 50 to 500 nodes, in-process.

    .venv/bin/python benchmarks/dag_render.py [--repeat 20]

The graphs are random DAGs like the unit tests' (node i has an edge to each of the next 11 nodes with
probability 0.25, shuffled), seeded, so every run draws the same graphs. Each size is drawn once to warm
up, then ``--repeat`` times; the median and the slowest of the process CPU time per draw are printed (CPU
time, so other load on the machine moves it less than wall time). Target (the run page's budget): a
200-node graph under 250 ms.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from jobloom.dashboard.dag import DagNode, render_dag_svg

SIZES = (50, 100, 200, 500)
TARGET_MS = 250.0


def random_dag(rng: random.Random, n: int, p: float) -> tuple[list[DagNode], list[tuple[str, str]]]:
    """``n`` nodes; an edge from node i to each of the next 11 with probability ``p``; shuffled."""
    keys = [f"n{i}" for i in range(n)]
    edges = [(keys[i], keys[j]) for i in range(n) for j in range(i + 1, min(n, i + 12)) if rng.random() < p]
    rng.shuffle(edges)
    states = ["succeeded", "running", "queued", "waiting"]
    return [DagNode(k, k, rng.choice(states), f"/jobs/{i}") for i, k in enumerate(keys)], edges


def main() -> None:
    """Draw each size, print the times."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    print(f"{'nodes':>6} {'edges':>6} {'median ms':>10} {'max ms':>8}")
    for n in SIZES:
        nodes, edges = random_dag(random.Random(3), n, 0.25)
        render_dag_svg(nodes, edges)
        times = []
        for _ in range(args.repeat):
            started = time.process_time()
            render_dag_svg(nodes, edges)
            times.append((time.process_time() - started) * 1000)
        mark = ""
        if n == 200:
            mark = "  (target < 250 ms: " + ("met)" if max(times) < TARGET_MS else "MISSED)")
        print(f"{n:>6} {len(edges):>6} {statistics.median(times):>10.1f} {max(times):>8.1f}{mark}")


if __name__ == "__main__":
    main()
