"""``jobloom init [DIR]`` and ``jobloom add performer NAME``: start a project, and grow it.

The file work is :mod:`jobloom.scaffold`'s; this module parses the arguments and says what was done
and what to run next.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from jobloom import __version__
from jobloom.cli.common import console
from jobloom.scaffold.performer import add_performer
from jobloom.scaffold.project import init_project

add_cli = typer.Typer(name="add", help="Add to a project made by `jobloom init`.", no_args_is_help=True)


def init(
    folder: Annotated[
        Path, typer.Argument(metavar="DIR", help="The folder of the new project (made if missing).")
    ] = Path("."),
    package: Annotated[
        str | None, typer.Option(help="The Python package of the project (default: made from the folder's name).")
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Write into a folder that is not empty (same-named files are replaced).")
    ] = False,
) -> None:
    """Make a project that works at once: a jobs module (performers, a schedule, a flow), tests, README."""
    made = init_project(folder, package=package, force=force, jobloom_version=__version__)
    for path in made.files:
        console.print(f"wrote [bold]{escape(str(path.relative_to(made.folder)))}[/bold]", markup=True)
    where = os.path.relpath(made.folder)
    console.print(f"\nproject {made.project} in {made.folder}. Next:\n", highlight=False)
    steps = ([f"cd {where}"] if where != "." else []) + [
        "pip install -e '.[dev]'",
        "python -m pytest",
        f"jobloom worker {made.package}.jobs:app",
        f"jobloom enqueue Welcome '{{\"email\": \"ada@example.com\"}}' --app {made.package}.jobs:app",
    ]
    for step in steps:
        console.print(f"  {step}", highlight=False, markup=False)


@add_cli.command("performer")
def performer(
    name: Annotated[str, typer.Argument(metavar="NAME", help="The performer's class name, e.g. ResizeImage.")],
    module: Annotated[
        Path | None,
        typer.Option(help="The jobs module to add it to (default: the one of [tool.jobloom] app in pyproject.toml)."),
    ] = None,
    sync: Annotated[
        bool, typer.Option("--sync", help="A plain `def perform` (run in a thread) rather than `async def`.")
    ] = False,
) -> None:
    """Add a documented performer skeleton (and a payload dataclass) to the project's jobs module."""
    added = add_performer(name, module=module, sync=sync)
    console.print(f"added [bold]{escape(name)}[/bold] and {escape(name)}Payload to {escape(str(added.module))}",
                  markup=True)
    if not added.registered:
        console.print(f"note: no App(performers=[...]) list found in {added.module}: add {name} to your "
                      "app's performers yourself", highlight=False)
    if added.test is not None:
        console.print(f"wrote a test: {added.test}", highlight=False)
