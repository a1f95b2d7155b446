"""``jobloom init``: a new project whose tests pass at once (a jobs module, tests, README, pyproject)."""

from __future__ import annotations

import keyword
import re
from dataclasses import dataclass
from pathlib import Path

from jobloom.core.errors import InvalidOption, JobloomError
from jobloom.scaffold.render import render


class ProjectExists(JobloomError):
    """The folder given to ``jobloom init`` is not empty (and ``force`` was not given)."""

    def __init__(self, folder: Path, entries: list[str]) -> None:
        self.folder = folder
        shown = ", ".join(entries[:5]) + (f" and {len(entries) - 5} more" if len(entries) > 5 else "")
        super().__init__(f"{folder} is not empty ({shown}); choose an empty or new folder, "
                         "or --force to write the project's files there anyway (files of the same name are replaced)")


@dataclass(frozen=True)
class NewProject:
    """What :func:`init_project` wrote: the folder, the project and package names, and each file."""

    folder: Path
    project: str
    package: str
    files: list[Path]


def package_name(text: str) -> str:
    """A Python package name made from a folder name: lower case, ``_`` for anything else, not a keyword.

    ``"My Shop-2"`` gives ``"my_shop_2"``. A name that is still no identifier (``"2shop"``) is refused by
    :func:`check_package`, which says what to give instead."""
    name = re.sub(r"\W+", "_", text.strip().lower()).strip("_")
    return name or "jobs_app"


def check_package(name: str) -> str:
    """``name`` if it can be the project's package: a lower-case identifier that is no keyword, nor ``jobloom``."""
    if not re.fullmatch(r"[a-z_][a-z0-9_]*", name) or keyword.iskeyword(name) or name in ("jobloom", "tests"):
        raise InvalidOption("package", name, "a lower-case Python identifier (letters, digits and _, not starting "
                                             "with a digit), not a keyword, nor 'jobloom' or 'tests'; pass --package")
    return name


def project_name(folder: Path) -> str:
    """The distribution name of the project in ``folder`` (its folder's name, in the form pip prints)."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", folder.name).strip("-._").lower()
    return name or "jobs-app"


def init_project(folder: Path, *, package: str | None = None, force: bool = False,
                 jobloom_version: str = "0.2.0") -> NewProject:
    """Write a new project into ``folder`` (made if missing) and return what was written.

    ``folder`` must be empty unless ``force``; ``package`` defaults to a name made from the folder's.
    The files: ``pyproject.toml`` (depending on jobloom), ``README.md`` (the commands to run it),
    ``.gitignore``, ``<package>/__init__.py``, ``<package>/jobs.py`` (performers, a schedule, a flow and
    the app) and ``tests/test_jobs.py`` (using :mod:`jobloom.testing`)."""
    folder = folder.resolve()
    if folder.exists() and not folder.is_dir():
        raise JobloomError(f"{folder} is a file, not a folder: give a folder for the new project")
    if folder.is_dir() and not force:
        entries = sorted(p.name for p in folder.iterdir())
        if entries:
            raise ProjectExists(folder, entries)
    pkg = check_package(package if package is not None else package_name(folder.name))
    project = project_name(folder)
    fields = {"project": project, "package": pkg, "jobloom_version": jobloom_version}
    plan = {
        Path("pyproject.toml"): render("pyproject.toml", **fields),
        Path("README.md"): render("README.md", **fields),
        Path(".gitignore"): render("gitignore", **fields),
        Path(pkg, "__init__.py"): render("package_init.py", **fields),
        Path(pkg, "jobs.py"): render("jobs.py", **fields),
        Path("tests", "test_jobs.py"): render("test_jobs.py", **fields),
    }
    written = []
    for relative, text in plan.items():
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return NewProject(folder, project, pkg, written)
