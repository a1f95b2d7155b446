"""The bench's worker and producer processes forked from a Python that has imported jobloom and the bench
(``tests/zygote.py``), instead of a new Python each: a smoke run of a workload starts up to four, and each
new one imports jobloom twice (``jobloom worker`` before it execs ``jobloom.process``), about a second.

:func:`fork_launcher` is a :class:`jobloom.bench.processes.Launcher`. It forks what a command ends up
running: the producer as it is; ``jobloom worker APP ...`` with one process as the ``jobloom.process``
the command execs (``command_line`` makes it as the CLI does, from the options as the CLI's own parser
reads them). Anything else is started as a new Python (``popen``): a supervisor (``--processes 2``: the
real command, then real worker processes), a command with options this does not mirror, or an
environment a fork cannot take (``forkable`` in ``tests/zygote.py``).
"""

from __future__ import annotations

import functools
import os
from typing import IO, Any

from jobloom.bench.processes import Child, popen
from tests.zygote import WORKER_PRELOAD, Zygote, forkable

PRODUCER = "jobloom.bench.producer"
ZYGOTES = {module: Zygote(module, (*WORKER_PRELOAD, "jobloom.bench", PRODUCER))
           for module in ("jobloom.process", PRODUCER)}
"""This test process's zygotes of bench workers and of producers, each started on first use (the workers'
app module, ``jobloom.bench.performers``, is imported before any fork: it reads its store when called)."""


def fork_launcher(args: list[str], env: dict[str, str], output: IO[bytes]) -> Child:
    """Fork the process ``args`` would be from the bench's zygote, or start it as a new Python."""
    forked = _as_module(args) if forkable(env) else None
    if forked is None:
        return popen(args, env, output)
    module, argv = forked
    # the child opens the very file ``output`` is (an unlinked temporary file) through this process's fds
    where = f"/proc/{os.getpid()}/fd/{output.fileno()}"
    return ZYGOTES[module].start(argv, env, os.getcwd(), stdout=where, stderr=where)


def _as_module(args: list[str]) -> tuple[str, list[str]] | None:
    """(the module whose ``main`` the process runs, its arguments), or None if a fork cannot be it."""
    if args[1:3] == ["-m", PRODUCER]:
        return PRODUCER, args[3:]
    if args[1:4] != ["-m", "jobloom.cli", "worker"]:
        return None
    options = _worker_options(args[4:])
    if (options["processes"] != 1 or options["supervise"] or options["metrics_port"] is not None
            or options["listen_url"] is not None or options["pool_max"] is not None):
        return None  # a supervisor, or a command that stays, or that sets its processes' environment
    from jobloom.engine.supervisor import command_line

    names = [b.strip() for b in (options["bindings"] or "").split(",") if b.strip()] or None
    cmd = command_line(options["app_ref"], processes=1, concurrency=options["concurrency"],
                       sync_concurrency=options["sync_concurrency"], bindings=names, grace=options["grace"],
                       log_level=options["log_level"].value, log_format=options["log_format"].value)
    cmd += ["--check-wait", repr(options["wait"])]  # as `jobloom worker` adds it for one process alone
    assert cmd[1:3] == ["-m", "jobloom.process"], cmd
    return "jobloom.process", cmd[3:]


def _worker_options(argv: list[str]) -> dict[str, Any]:
    """``jobloom worker``'s options for ``argv``, as its own parser reads them (an unknown one fails)."""
    with _worker_command().make_context("worker", list(argv)) as ctx:
        return dict(ctx.params)


@functools.cache
def _worker_command() -> Any:
    """The click command of ``jobloom worker`` (typer builds it once)."""
    import typer.main

    from jobloom.cli.main import cli

    return typer.main.get_command(cli).commands["worker"]  # type: ignore[attr-defined]
