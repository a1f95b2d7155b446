"""``jobloom add performer NAME``: a documented performer skeleton added to a project's jobs module.

The module is edited as text at places found with :mod:`ast`: the new payload dataclass and performer
class go just before the statement that builds the ``jobloom.App`` (so the flows and schedules above it
keep their place), and the name is appended to that ``App``'s ``performers=[...]`` list. The result is
parsed again before it is written: a module is never left broken.
"""

from __future__ import annotations

import ast
import keyword
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from jobloom.core.errors import InvalidOption, JobloomError
from jobloom.scaffold.render import render


@dataclass(frozen=True)
class AddedPerformer:
    """What :func:`add_performer` did: the module edited, whether the app's list got the performer, the test."""

    module: Path
    registered: bool
    test: Path | None


def check_class_name(name: str) -> str:
    """``name`` if it can name a performer class: an identifier starting with an upper-case letter."""
    if not name.isidentifier() or keyword.iskeyword(name) or not ("A" <= name[:1] <= "Z"):
        raise InvalidOption("NAME", name, "a Python class name: letters, digits and _, starting with an "
                                          "upper-case letter A-Z (e.g. ResizeImage)")
    return name


def find_project(start: Path) -> tuple[Path, str]:
    """The project folder (``start`` or the nearest parent with a ``pyproject.toml`` that has
    ``[tool.jobloom] app``) and that app reference (``MODULE:ATTR``)."""
    start = start.resolve()
    for folder in (start, *start.parents):
        pyproject = folder / "pyproject.toml"
        if not pyproject.is_file():
            continue
        try:
            config = tomllib.loads(pyproject.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise JobloomError(f"{pyproject} is not valid TOML: {exc}") from None
        ref = config.get("tool", {}).get("jobloom", {}).get("app")
        if isinstance(ref, str) and ":" in ref:
            return folder, ref
        raise JobloomError(f"{pyproject} has no [tool.jobloom] app = \"MODULE:ATTR\": add it (as `jobloom init` "
                           "writes it), or give the jobs module with --module PATH")
    raise JobloomError(f"no pyproject.toml in {start} or above it: run this in a project made by `jobloom init`, "
                       "or give the jobs module with --module PATH")


def module_path(folder: Path, ref: str) -> Path:
    """The file of the module that the app reference ``ref`` names, under the project ``folder``."""
    dotted = ref.partition(":")[0]
    base = folder.joinpath(*dotted.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py", folder / "src" / base.relative_to(folder)
                      .with_suffix(".py")):
        if candidate.is_file():
            return candidate
    raise JobloomError(f"the app {ref!r} of {folder / 'pyproject.toml'} names module {dotted!r}, "
                       f"but {base.with_suffix('.py')} does not exist: fix [tool.jobloom] app, or give --module PATH")


def add_performer(name: str, *, project: Path | None = None, module: Path | None = None,
                  sync: bool = False) -> AddedPerformer:
    """Add performer ``name`` (with a payload dataclass ``<name>Payload``) to the project's jobs module.

    ``sync``: a plain ``def perform`` (run in a thread: for blocking libraries) rather than ``async def``.

    The module is ``module`` if given, else the one of ``[tool.jobloom] app`` in the ``pyproject.toml`` of
    ``project`` (default: the current folder) or a parent. When the module defines ``make_app`` and the
    project has a ``tests`` folder, a test for the new performer is written too (never over a file)."""
    check_class_name(name)
    folder: Path | None = None
    dotted = None
    if module is None:
        folder, ref = find_project(project or Path.cwd())
        module = module_path(folder, ref)
        dotted = ref.partition(":")[0]
    if not module.is_file():
        raise JobloomError(f"the jobs module {module} does not exist: give an existing file with --module PATH")
    source = module.read_text(encoding="utf-8")
    try:
        tree = ast.parse(source, filename=str(module))
    except SyntaxError as exc:
        raise JobloomError(f"{module} does not parse ({exc.msg}, line {exc.lineno}): fix it first") from None
    defined = _top_level_names(tree)
    for taken in (name, f"{name}Payload"):
        if taken in defined:
            raise JobloomError(f"{module} already defines {taken!r} (line {defined[taken]}): "
                               "choose another name for the new performer")
    new_source, registered = _insert(source, tree, name, defined, sync)
    try:
        ast.parse(new_source, filename=str(module))
    except SyntaxError as exc:  # never write a broken module
        raise JobloomError(f"adding {name} to {module} would not parse ({exc.msg}, line {exc.lineno}); "
                           "nothing was changed: add it by hand") from None
    test: tuple[Path, str] | None = None
    if folder is not None and dotted is not None and "make_app" in defined and (folder / "tests").is_dir():
        snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()
        path = folder / "tests" / f"test_{snake}.py"
        if not path.exists():
            test = path, render("test_performer.py", name=name, snake=snake, module=dotted)
    module.write_text(new_source, encoding="utf-8")
    if test is not None:
        test[0].write_text(test[1], encoding="utf-8")
    return AddedPerformer(module, registered, None if test is None else test[0])


def _top_level_names(tree: ast.Module) -> dict[str, int]:
    """Every name the module binds at its top level, with the line that binds it."""
    names: dict[str, int] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            names.setdefault(stmt.name, stmt.lineno)
        elif isinstance(stmt, ast.Import | ast.ImportFrom):
            for alias in stmt.names:
                names.setdefault((alias.asname or alias.name).split(".")[0], stmt.lineno)
        elif isinstance(stmt, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for target in targets:
                for node in ast.walk(target):
                    if isinstance(node, ast.Name):
                        names.setdefault(node.id, stmt.lineno)
    return names


def _app_call(tree: ast.Module) -> tuple[ast.stmt, ast.List | None] | None:
    """The top-level statement that builds the ``App`` and the literal list of its performers, if any."""
    for stmt in tree.body:
        for node in ast.walk(stmt):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            if not ((isinstance(func, ast.Attribute) and func.attr == "App")
                    or (isinstance(func, ast.Name) and func.id == "App")):
                continue
            given = [k.value for k in node.keywords if k.arg == "performers"] + node.args[1:2]
            return stmt, next((v for v in given if isinstance(v, ast.List)), None)
    return None


def _insert(source: str, tree: ast.Module, name: str, defined: dict[str, int], sync: bool) -> tuple[str, bool]:
    """``source`` with the skeleton of ``name`` added (and listed in the app's performers when it can be)."""
    lines = source.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    skeleton = render("performer.py", name=name, define="def" if sync else "async def",
                      runs_in="; a plain def runs in a thread of its own" if sync else "")
    imports = [line for line, wanted in (("from dataclasses import dataclass\n", "dataclass"),
                                         ("import jobloom\n", "jobloom")) if wanted not in defined]
    found = _app_call(tree)
    registered = False
    if found is None:
        lines += ["\n", "\n", skeleton]
    else:
        stmt, listed = found
        if listed is not None:
            registered = True
            if listed.elts:
                last = listed.elts[-1]
                row, col, text = last.end_lineno or last.lineno, last.end_col_offset or 0, f", {name}"
            else:
                row, col, text = listed.end_lineno or listed.lineno, (listed.end_col_offset or 1) - 1, name
            raw = lines[row - 1].encode("utf-8")  # ast columns count UTF-8 bytes
            lines[row - 1] = (raw[:col] + text.encode("utf-8") + raw[col:]).decode("utf-8")
        start = min([stmt.lineno] + [d.lineno for d in getattr(stmt, "decorator_list", [])]) - 1
        while start > 0 and lines[start - 1].lstrip().startswith("#"):  # its comments stay with it
            start -= 1
        lines[start:start] = [skeleton, "\n", "\n"]
    if imports:
        after = max((s.end_lineno or s.lineno for s in tree.body if isinstance(s, ast.Import | ast.ImportFrom)),
                    default=_docstring_end(tree))
        lines[after:after] = imports
    return "".join(lines), registered


def _docstring_end(tree: ast.Module) -> int:
    """The line after the module's docstring (0 without one)."""
    first = tree.body[0] if tree.body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        return first.end_lineno or first.lineno
    return 0
