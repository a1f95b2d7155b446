"""Each example's README says what to install: a ``pip install`` line naming jobloom (with the extras the
example needs) and every other package its code imports."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
READMES = sorted(EXAMPLES.glob("*/README.md"))
CORE = {"pydantic", "typer", "rich", "croniter"}
"""What ``pip install jobloom`` brings."""
WEB = {"fastapi", "uvicorn", "starlette", "httpx", "jinja2"}
"""What ``jobloom[web]`` brings."""
PACKAGES = {"django": "django", "flask": "flask"}
"""Import names of other packages the examples use, and what ``pip install`` calls them."""


def _imports(folder: Path) -> set[str]:
    found: set[str] = set()
    for path in folder.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module.split(".")[0])
    local = {p.stem for p in folder.glob("*.py")} | {p.name for p in folder.iterdir() if p.is_dir()}
    return {m for m in found if m not in sys.stdlib_module_names and m not in local and m != "__future__"}


def _install_lines(readme: Path) -> list[str]:
    blocks = re.findall(r"```(?:bash|sh|shell)\n(.*?)```", readme.read_text(), re.S)
    return [line.split("#")[0] for block in blocks for line in block.splitlines()
            if line.strip().startswith("pip install")]


def test_every_example_has_a_readme() -> None:
    folders = {p for p in EXAMPLES.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))}
    assert folders == {r.parent for r in READMES}


@pytest.mark.parametrize("readme", READMES, ids=lambda p: p.parent.name)
def test_the_readme_names_its_install_command(readme: Path) -> None:
    lines = _install_lines(readme)
    assert lines, f"{readme} has no `pip install` line in a shell block"
    words = {w.strip("'\"") for line in lines for w in line.split()[2:]}
    assert any(w == "jobloom" or w.startswith("jobloom[") for w in words), (readme, lines)
    imports = _imports(readme.parent) - {"jobloom"} - CORE
    if imports & WEB or (readme.parent / "package.json").exists():  # a remote worker talks to jobloom serve
        assert any(w.startswith("jobloom[") and "web" in w for w in words), (readme, lines)
    for module in sorted(imports - WEB):
        assert module in PACKAGES, f"{readme.parent.name} imports {module}: add it to PACKAGES and its README"
        assert PACKAGES[module] in words, (readme, module, lines)
