"""``jobloom topics``: the topics the app's performers subscribe to (``triggers``), with their bindings."""

from __future__ import annotations

import typer
from rich.table import Table

from jobloom.app.loading import load_app
from jobloom.cli.common import AppOption, JsonOption, console, print_json, print_table


def topics_command(app_ref: AppOption = None, as_json: JsonOption = False) -> None:
    """List the topics the app's performers subscribe to, each with its subscribed bindings."""
    if app_ref is None:
        raise typer.BadParameter("give the app with --app MODULE:ATTR (or JOBLOOM_APP)", param_hint="--app")
    found = load_app(app_ref).topics()
    if as_json:
        print_json([{"topic": t, "bindings": b} for t, b in found.items()])
        return
    if not found:
        console.print("no topics: no performer of the app has triggers")
        return
    table = Table(header_style="bold")
    table.add_column("topic", no_wrap=True)
    table.add_column("bindings")
    for topic, bindings in found.items():
        table.add_row(topic, ", ".join(bindings))
    print_table(table)


__all__ = ["topics_command"]
