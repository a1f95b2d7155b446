"""The peers harness (``./dev bench peers``) is consistent without installing any peer: no network, no Node.

Running the peers themselves is the bench's job, not the suite's: their virtualenv and ``node_modules`` are
made by ``benchmarks/peers/run.py`` on first use, never here.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import re
from pathlib import Path
from types import ModuleType

PEERS = Path(__file__).resolve().parents[2] / "benchmarks" / "peers"


def _run_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("peers_run", PEERS / "run.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _protocol_choices() -> list[str]:
    """The ``system`` choices of ``protocol.py``'s parser, read from its source (it imports the peers' packages)."""
    tree = ast.parse((PEERS / "protocol.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and node.args[0].value == "system":
            choices = next(k.value for k in node.keywords if k.arg == "choices")
            return list(ast.literal_eval(choices))
    raise AssertionError("protocol.py has no `system` argument")


def test_every_system_has_a_label_and_an_adapter() -> None:
    run = _run_module()
    assert set(run.SYSTEMS) == set(run.LABELS)
    assert set(run.SYSTEMS) == set(_protocol_choices())
    assert {"bullmq", "graphile-worker"} <= run.NODE_SYSTEMS <= set(run.SYSTEMS)


def test_the_node_peers_are_pinned_exactly_and_locked() -> None:
    package = json.loads((PEERS / "node" / "package.json").read_text())
    lock = json.loads((PEERS / "node" / "package-lock.json").read_text())
    assert {"bullmq", "graphile-worker"} <= set(package["dependencies"])
    for name, version in package["dependencies"].items():
        assert re.fullmatch(r"\d+\.\d+\.\d+", version), f"{name} {version}: pin an exact version"
        assert lock["packages"][f"node_modules/{name}"]["version"] == version, f"{name}: package-lock.json differs"
    assert lock["packages"][""]["dependencies"] == package["dependencies"], "package-lock.json is stale: npm install"


def test_node_modules_is_not_committed() -> None:
    ignored = (PEERS.parents[1] / ".gitignore").read_text().splitlines()
    assert "benchmarks/peers/node/node_modules/" in ignored
