"""``python manage.py jobloom worker|migrate|serve [OPTIONS]``: jobloom's commands for this Django project.

Each is ``jobloom worker|migrate|serve`` with the app of ``settings.JOBLOOM["app"]``; the options after
the action are jobloom's (``python manage.py jobloom worker --help`` lists them): ``worker --processes 2
--concurrency 8``, ``serve --port 8080``. Worker processes set Django up before they import the app.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from jobloom.contrib.django.runtime import REF, app

ACTIONS = ("worker", "migrate", "serve")


class Command(BaseCommand):
    """``manage.py jobloom ACTION [OPTIONS]``: run jobloom's ``worker``, ``migrate`` or ``serve`` for the project."""

    help = ("Run jobloom for this project: worker (the job workers), migrate (jobloom's tables), serve (its HTTP "
            "API). Options after the action are jobloom's: `manage.py jobloom worker --help` lists them.")

    def add_arguments(self, parser: CommandParser) -> None:
        """The action, then every other argument, passed on to jobloom's command as given."""
        parser.add_argument("action", choices=ACTIONS, help="worker, migrate or serve")
        parser.add_argument("options", nargs=argparse.REMAINDER, help="jobloom's options for that action")

    def handle(self, *args: Any, **given: Any) -> None:
        """Run ``jobloom ACTION`` with the project's app (``settings.JOBLOOM["app"]``)."""
        from jobloom.cli.main import main

        action: str = given["action"]
        options: list[str] = list(given["options"])
        if "--help" not in options and "-h" not in options:
            app()  # a bad JOBLOOM setting is reported here, before any process starts
        # worker processes are new interpreters: they find the project as manage.py did
        project = sys.path[0] or os.getcwd()
        paths = [project, *(p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)]
        os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
        argv = [action, REF, *options] if action == "worker" else [action, "--app", REF, *options]
        main(argv)
