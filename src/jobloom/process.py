"""One worker process: load the app, run start-up hooks (retried with backoff), work until SIGTERM.

Started by the supervisor as ``python -m jobloom.process MODULE:ATTR [options]``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import inspect
import logging
import os
import signal
import sys
from collections.abc import Callable

from jobloom.app.facade import App
from jobloom.app.loading import apply_connection_env, check_connection_env, load_app, sqlite_file_problem
from jobloom.core.errors import JobloomError, StoreError, StoreUnreachable
from jobloom.core.retrying import Delays
from jobloom.engine.logs import configure_logging, keep_jobloom_lines
from jobloom.engine.worker import Worker

log = logging.getLogger("jobloom.worker")
CLOSE_TIMEOUT = 1.0  # seconds a stopping worker process waits for its store to close


async def run_startup_hooks(
    app: App, *, max_delay: float = 30.0, stopping: Callable[[], bool] = lambda: False
) -> bool:
    """Run each start-up hook once, in order, before any job; a failing hook is retried with backoff.

    Returns False if ``stopping()`` became true before every hook succeeded.
    """
    for hook in app.startup_hooks:
        delays = Delays(0.1, max_delay)
        while True:
            if stopping():
                return False
            try:
                value = hook()
                if inspect.isawaitable(value):
                    await value
                break
            except Exception as exc:
                delay = delays.next()
                name = getattr(hook, "__name__", repr(hook))
                log.warning("start-up hook %s failed (%s: %s); retrying in %.1f s",
                            name, type(exc).__name__, exc, delay)
                deadline = asyncio.get_running_loop().time() + delay
                while not stopping() and asyncio.get_running_loop().time() < deadline:
                    await asyncio.sleep(min(0.1, delay))
    return True


class StopSignals:
    """A worker process's SIGINT and SIGTERM: the first stops the worker gracefully and says at once what
    happens; a second of the same kind (Ctrl-C twice, or SIGTERM twice) stops it at once
    (:meth:`~jobloom.engine.worker.Worker.stop_now`). A signal of the other kind after the first is
    not a second one: Ctrl-C under ``jobloom worker --processes N`` reaches each process both from the
    terminal (SIGINT) and from the supervisor (SIGTERM)."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.seen: set[int] = set()

    def received(self, sig: int) -> None:
        """Handle one stop signal (on the event loop)."""
        w = self.worker
        again = "press Ctrl-C again" if sig == signal.SIGINT else "send SIGTERM again"
        name = signal.Signals(sig).name
        if sig in self.seen:
            if w.stop_now_requested:
                return
            threads = sum(1 for r in w.running.values() if r.sync is not None and not r.sync.stoppable)
            log.warning("worker_stopping_now worker=%s signal=%s running=%d: interrupting them now (each reported "
                        "lost: retried, or stalled if at most once)%s", w.name, name, len(w.running),
                        f"; {threads} sync job(s) in threads cannot be interrupted and are left to their leases"
                        if threads else "",
                        extra={"event": "worker_stopping_now", "worker": w.name, "signal": name,
                               "running": len(w.running)})
            w.stop_now()
            return
        first = not self.seen
        self.seen.add(sig)
        if not first:
            return
        n = len(w.running)
        what = (f"finishing {n} running job{'s' if n != 1 else ''}, up to {w.grace:g} s; {again} to stop now"
                if n else "no running jobs; stopping")
        log.warning("worker_stopping worker=%s signal=%s running=%d grace=%g: %s", w.name, name, n, w.grace, what,
                    extra={"event": "worker_stopping", "worker": w.name, "signal": name, "running": n,
                           "grace": w.grace})
        w.stop()


async def serve_process(app: App, *, concurrency: int | None, bindings: list[str] | None, grace: float,
                        on_ready: Callable[[], None] = lambda: None, sync_concurrency: int | None = None) -> None:
    """Run one worker in this process until SIGTERM or SIGINT, then drain gracefully.

    ``on_ready()`` is called once the start-up hooks are done, the store is open and the worker started.
    ``None`` concurrencies take the worker's defaults (see :class:`~jobloom.engine.worker.Worker`).
    """
    worker = Worker(app, concurrency=concurrency, sync_concurrency=sync_concurrency, bindings=bindings, grace=grace)
    loop = asyncio.get_running_loop()
    signals = StopSignals(worker)
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, signals.received, sig)
    if not await run_startup_hooks(app, stopping=lambda: worker.stopping):
        log.info("worker_stopped_before_start worker=%s", worker.name,
                 extra={"event": "worker_stopped_before_start", "worker": worker.name})
        await app.close()
        return
    log.info("worker_started worker=%s bindings=%s concurrency=%d sync_concurrency=%d", worker.name,
             ",".join(worker.bindings), worker.concurrency, worker.sync_concurrency,
             extra={"event": "worker_started", "worker": worker.name, "bindings": worker.bindings,
                    "concurrency": worker.concurrency, "sync_concurrency": worker.sync_concurrency,
                    "pid": os.getpid()})
    try:
        await app.store()  # with --pool-max: every connection taken now, or a StoreError naming the budget
        running = asyncio.create_task(worker.run())
        on_ready()
        await running
    finally:
        done = worker.stopped
        log.info("worker_stopped worker=%s attempts=%d interrupted=%d released=%d left_running=%d unreported=%d",
                 worker.name, worker.attempts_run, done.interrupted, done.released, done.left_running,
                 done.unreported,
                 extra={"event": "worker_stopped", "worker": worker.name, "attempts": worker.attempts_run,
                        "pid": os.getpid(), "interrupted": done.interrupted, "released": done.released,
                        "left_running": done.left_running, "unreported": done.unreported})
        try:  # a store that does not answer must not hold the exit beyond the grace period
            await asyncio.wait_for(app.close(), CLOSE_TIMEOUT)
        except (TimeoutError, Exception) as exc:
            log.warning("the store did not close cleanly (%s: %s)", type(exc).__name__, exc)


YOUNG_COLLECTION_THRESHOLD = 10_000
"""Container objects made (and not yet freed) before the collector walks the young ones. Python's
700 is crossed by every worker cycle of 100 jobs (their tasks, coroutines and records are alive
together), so it collected once per cycle and found nothing: what a worker makes is freed by its
reference counts. At 10,000 a full cycle stays under it; cyclic garbage is still collected, later."""


def settle_heap() -> None:
    """Collect what start-up left behind, then freeze the objects that remain (modules, classes, the
    app, its performers: alive until the process exits) out of the collector's sight: a full
    collection during the drain then walks only what the worker made since (``gc.freeze``). The
    young generation's threshold is raised to :data:`YOUNG_COLLECTION_THRESHOLD`."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_COLLECTION_THRESHOLD, *gc.get_threshold()[1:])


def check_before_start(app_ref: str, bindings: list[str] | None, wait: float) -> App:
    """``jobloom worker``'s checks, made before any job (by a worker process alone, which has taken the
    command's place without its memory; else by the command, before it starts the processes): the app
    loads, its SQLite folder exists, the connection options fit its store, the bindings are its own and it
    has some, and its store answers (a PostgreSQL server that refuses connections is given up on after
    ``wait`` seconds). A problem raises :class:`~jobloom.core.errors.JobloomError`."""
    app = load_app(app_ref)
    if problem := sqlite_file_problem(app.url, must_exist=False):
        raise JobloomError(problem)
    check_connection_env(app)
    for name in bindings or ():
        app.spec(name)
    if not app.specs:
        raise JobloomError(f"{app_ref} has no performers: nothing to work on")
    postgres = app.url.startswith(("postgresql:", "postgres:"))
    if postgres:
        app.store_options["connect_wait"] = wait

    async def connect() -> None:
        try:
            await app.store()
        finally:
            await app.close()

    asyncio.run(connect())
    if postgres:
        del app.store_options["connect_wait"]  # the worker's own retries, longer, from here on
    return app


def report_problem(exc: BaseException) -> None:
    """``error: ...`` on stderr, as the ``jobloom`` command reports a problem."""
    from rich.console import Console
    from rich.markup import escape

    from jobloom.core.text import literal

    if isinstance(exc, StoreUnreachable):
        message = f"{exc}; --wait SECONDS waits longer"
    elif isinstance(exc, JobloomError):
        message = str(exc)
    else:
        message = f"{type(exc).__name__}: {exc}"
    console = Console(stderr=True, soft_wrap=True, markup=False, emoji=False, highlight=False)
    console.print(f"[bold red]error:[/bold red] {escape(literal(message))}", markup=True)


def main(argv: list[str] | None = None) -> int:
    """Entry point of a worker process."""
    parser = argparse.ArgumentParser(prog="python -m jobloom.process")
    parser.add_argument("app")
    parser.add_argument("--concurrency", type=int, default=None)
    parser.add_argument("--sync-concurrency", type=int, default=None)
    parser.add_argument("--bindings", default="")
    parser.add_argument("--grace", type=float, default=25.0)
    parser.add_argument("--log-level", default="info")
    parser.add_argument("--log-format", choices=["text", "json"], default="text")
    parser.add_argument("--metrics", action="store_true",
                        help="keep Prometheus metrics (in PROMETHEUS_MULTIPROC_DIR, for the supervisor's endpoint)")
    parser.add_argument("--ready-fd", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--check-wait", type=float, default=None, help=argparse.SUPPRESS)  # jobloom worker's
    args = parser.parse_args(argv)
    ready_fd: int | None = args.ready_fd
    if ready_fd is not None:
        os.set_inheritable(ready_fd, False)  # before any app code: job code's subprocesses never get it

    def on_ready() -> None:
        nonlocal ready_fd
        if ready_fd is not None:
            fd, ready_fd = ready_fd, None
            try:
                os.write(fd, b"R")  # tell the supervisor this process is ready
            except OSError:
                pass  # the supervisor is gone; nothing to tell
            finally:
                os.close(fd)

    configure_logging(args.log_level, log_format=args.log_format)
    bindings = [b for b in args.bindings.split(",") if b] or None
    if args.check_wait is None:
        app = load_app(args.app)
    else:
        try:
            app = check_before_start(args.app, bindings, args.check_wait)
        except (JobloomError, OSError, RecursionError, OverflowError) as exc:
            report_problem(exc)
            return 1
    keep_jobloom_lines()  # an app that configured logging as it loaded (Django's LOGGING) keeps jobloom's lines
    apply_connection_env(app)  # jobloom worker --listen-url, --pool-max
    if args.metrics:
        from jobloom.observe.metrics import enable_metrics

        enable_metrics(app.telemetry)
    settle_heap()
    try:
        asyncio.run(serve_process(app, concurrency=args.concurrency, bindings=bindings, grace=args.grace,
                                  on_ready=on_ready, sync_concurrency=args.sync_concurrency))
    except StoreError as exc:  # the store refused the worker at start (the connection budget, a bad URL)
        log.error("worker_not_started error=%s", exc, extra={"event": "worker_not_started", "error": str(exc)})
        logging.shutdown()
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
