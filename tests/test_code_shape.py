"""The shape of the inner packages (core, engine, store, flows): no function over 60 lines, no module over
500 lines. Cyclomatic complexity is ruff's rule C901 (max 15 for the same packages, pyproject.toml).

``ALLOWED`` lists the functions still over the limit, each with its size when it was listed: it only
shrinks. A listed function that grows fails, and so does one that fits the limit now (take it off the
list), so no new offender can appear and none can get worse."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
PACKAGES = ("core", "engine", "store", "flows")
MAX_FUNCTION_LINES = 60
MAX_MODULE_LINES = 500

ALLOWED: dict[str, int] = {
}
"""Functions over the limit, by ``path:qualified name``, with their length in lines when listed."""

ALLOWED_MODULES: dict[str, int] = {}
"""Modules over the limit, with their length in lines when listed."""


def _functions(node: ast.AST, prefix: str) -> list[tuple[str, int]]:
    """Every function under ``node`` (nested ones too) with its length in lines, from ``def`` to its end."""
    out: list[tuple[str, int]] = []
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
            name = prefix + child.name
            out.append((name, (child.end_lineno or child.lineno) - child.lineno + 1))
            out += _functions(child, name + ".")
        elif isinstance(child, ast.ClassDef):
            out += _functions(child, prefix + child.name + ".")
        else:
            out += _functions(child, prefix)
    return out


def _modules() -> list[Path]:
    return [path for package in PACKAGES for path in sorted((SRC / "jobloom" / package).rglob("*.py"))]


def measure() -> tuple[dict[str, int], dict[str, int]]:
    """Every function's length and every module's length in the inner packages, by name."""
    functions: dict[str, int] = {}
    modules: dict[str, int] = {}
    for path in _modules():
        text = path.read_text()
        where = path.relative_to(SRC).as_posix()
        modules[where] = len(text.splitlines())
        for name, length in _functions(ast.parse(text), ""):
            functions[f"{where}:{name}"] = length
    return functions, modules


def _offenders(sizes: dict[str, int], limit: int, allowed: dict[str, int]) -> list[str]:
    problems = []
    for name, size in sorted(sizes.items(), key=lambda item: -item[1]):
        if size > limit and name not in allowed:
            problems.append(f"{name}: {size} lines (limit {limit})")
        elif name in allowed and size > allowed[name]:
            problems.append(f"{name}: {size} lines, grew from {allowed[name]} (limit {limit})")
    for name in allowed:
        if name not in sizes or sizes[name] <= limit:
            problems.append(f"{name}: {sizes.get(name, 0)} lines, within the limit now: take it off the allowlist")
    return problems


def test_no_function_over_the_line_limit() -> None:
    functions, _ = measure()
    assert len(functions) > 500  # the walk found the packages' functions
    problems = _offenders(functions, MAX_FUNCTION_LINES, ALLOWED)
    assert not problems, "functions too long:\n" + "\n".join(problems)


def test_no_module_over_the_line_limit() -> None:
    _, modules = measure()
    problems = _offenders(modules, MAX_MODULE_LINES, ALLOWED_MODULES)
    assert not problems, "modules too long:\n" + "\n".join(problems)


def test_the_checker_catches_a_long_function() -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(61))
    tree = ast.parse(f"class K:\n  def short(self):\n    pass\n  async def long(self):\n{body}\n")
    found = dict(_functions(tree, ""))
    assert found == {"K.short": 2, "K.long": 62}
    assert _offenders(found, MAX_FUNCTION_LINES, {}) == ["K.long: 62 lines (limit 60)"]
    assert _offenders(found, MAX_FUNCTION_LINES, {"K.long": 61}) == ["K.long: 62 lines, grew from 61 (limit 60)"]
    assert _offenders({"K.long": 50}, MAX_FUNCTION_LINES, {"K.long": 62}) == [
        "K.long: 50 lines, within the limit now: take it off the allowlist"
    ]
