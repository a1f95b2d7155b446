"""Running sync performers (a plain ``def perform``): in a thread of their own, or in a child process.

A sync job's slot is held until its work has really stopped. A thread cannot be stopped: a thread
job that is stopped (timeout, cancel, lost lease, shutdown) runs on, and its outcome is known only
when ``perform`` returns. A process-isolated job (``isolation = "process"``) runs in a child
process that is killed with SIGKILL when the job is stopped; its outcome is known once the child is
reaped.

Every job gets a thread that is free at once: threads are reused only after their previous job
returned, so a job is never queued behind a hung one.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import inspect
import logging
import os
import pickle
import queue
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from typing import Any

from jobloom.core import lifecycle
from jobloom.core.errors import JobloomError
from jobloom.core.signals import Permanent, Retry, Snooze
from jobloom.core.types import AttemptControl, JobContext
from jobloom.engine.offload import MAX_OFFLOADED_BYTES
from jobloom.engine.performer import Performer, PerformerSpec, inspect_performer, resolve_class
from jobloom.engine.progress import progress_json
from jobloom.engine.steps import Suspended

log = logging.getLogger("jobloom.worker")
_Work = Callable[[], Any]
_Done = Callable[[Any, BaseException | None], None]


class JobError(Exception):
    """An attempt's outcome prepared off the event loop: its kind, error text and traceback."""

    def __init__(self, kind: str, error: str, tb: str | None) -> None:
        self.kind = kind
        self.error = error
        self.tb = tb
        super().__init__(error)


class Stopped(asyncio.CancelledError):
    """A sync job was stopped and its work has now really ended; ``detail`` says how it ended."""

    def __init__(self, detail: str, tb: str | None = None) -> None:
        self.detail = detail
        self.tb = tb
        super().__init__(detail)


class _Thread:
    """One reusable thread; it serves the next job only after its previous one returned."""

    def __init__(self, pool: _Threads) -> None:
        self.pool = pool
        self.inbox: queue.SimpleQueue[tuple[Callable[[], None], _Work, _Done] | None] = queue.SimpleQueue()
        threading.Thread(target=self._loop, name="jobloom-sync", daemon=True).start()

    def _loop(self) -> None:
        while (item := self.inbox.get()) is not None:
            started, work, done = item
            started()
            value: Any = None
            error: BaseException | None = None
            try:
                value = work()
            except BaseException as exc:  # SystemExit and KeyboardInterrupt from user code too
                error = exc
            self.pool.idle(self)  # free again before anyone can learn that the job ended
            try:
                done(value, error)
            except Exception:  # pragma: no cover - done callbacks do not raise; the thread must live on
                log.exception("reporting the end of a sync job failed")
            del item, value, error, work, done, started


class _Threads:
    """Threads for sync jobs: an idle one if there is one, else a new one; never a queue."""

    def __init__(self) -> None:
        self._idle: list[_Thread] = []
        self._lock = threading.Lock()
        self.closed = False

    def submit(self, started: Callable[[], None], work: _Work, done: _Done) -> None:
        with self._lock:
            thread = self._idle.pop() if self._idle else None
        (thread or _Thread(self)).inbox.put((started, work, done))

    def idle(self, thread: _Thread) -> None:
        with self._lock:
            if not self.closed:
                self._idle.append(thread)
                return
        thread.inbox.put(None)

    def close(self) -> None:
        with self._lock:
            self.closed = True
            idle, self._idle = self._idle, []
        for thread in idle:
            thread.inbox.put(None)


class SyncRun:
    """One sync ``perform`` under way; :meth:`stop` kills a child process and cannot stop a thread."""

    def __init__(self, runner: SyncRunner, started: Callable[[], None], *, stoppable: bool) -> None:
        self._runner = runner
        self._loop = asyncio.get_running_loop()
        self._done: asyncio.Future[tuple[Any, BaseException | None]] = self._loop.create_future()
        self._started_cb = started
        self.stoppable = stoppable
        self.stopped_at: float | None = None

    @property
    def finished(self) -> bool:
        """Whether the work has really ended (the thread returned, or the child was reaped)."""
        return self._done.done()

    def stop(self) -> None:
        """Ask the work to end; only the first call counts (called on the event loop)."""
        if self.stopped_at is None:
            self.stopped_at = time.monotonic()

    async def result(self) -> Any:
        """Wait until the work has ended; return its value, raise its error, or raise :class:`Stopped`."""
        while True:
            try:
                value, error = await asyncio.shield(self._done)
                break
            except asyncio.CancelledError:
                if self._done.done() or self._runner.closed:
                    raise  # the worker is exiting: the work is abandoned, its outcome is not reported
                self.stop()
        if self.stopped_at is not None:
            raise self._stopped(value, error)
        if isinstance(error, Suspended):  # a durable sleep or wait in a sync perform
            raise error
        if error is not None and not isinstance(error, Exception):  # SystemExit, KeyboardInterrupt...
            raise JobError(lifecycle.FAILED, f"{type(error).__name__}: {error}",
                           "".join(traceback.format_exception(error)))
        if error is not None:
            raise error
        return value

    def _stopped(self, value: Any, error: BaseException | None) -> Stopped:
        assert self.stopped_at is not None
        ran_on = time.monotonic() - self.stopped_at
        if error is None:
            return Stopped(f"the thread ran on for {ran_on:.2f} s, then returned (result discarded)")
        text = error.error if isinstance(error, JobError) else f"{type(error).__name__}: {error}"
        tb = error.tb if isinstance(error, JobError) else "".join(traceback.format_exception(error))
        return Stopped(f"the thread ran on for {ran_on:.2f} s, then raised {text}", tb)

    # -- called from the job's thread ---------------------------------------------------------------

    def _started(self) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: the worker has exited
            self._loop.call_soon_threadsafe(self._started_cb)

    def _finish(self, value: Any, error: BaseException | None) -> None:
        def settle() -> None:
            if not self._done.done():
                self._done.set_result((value, error))

        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(settle)


class ChildRun(SyncRun):
    """``perform`` in a child process, killed with SIGKILL when stopped; its thread waits for the child."""

    def __init__(self, runner: SyncRunner, started: Callable[[], None], spec: PerformerSpec, process: Any,
                 conn: Any) -> None:
        super().__init__(runner, started, stoppable=True)
        self._spec = spec
        self._process = process
        self._conn = conn
        self._lock = threading.Lock()
        self._launched = False
        self._exitcode: int | None = None
        self.control: AttemptControl | None = None  # the attempt's, to relay the child's progress

    def stop(self) -> None:
        """Kill the child (SIGKILL); a child not launched yet never is."""
        super().stop()
        self.kill()

    def kill(self) -> None:
        """SIGKILL the child if it is launched and not reaped yet (any thread)."""
        with self._lock:
            if self._launched and self._exitcode is None:
                self._process.kill()

    def _stopped(self, value: Any, error: BaseException | None) -> Stopped:
        if not self._launched:
            return Stopped("stopped before its child process started")
        code = self._exitcode
        how = "was killed (SIGKILL)" if code == -signal.SIGKILL else f"ended (exit code {code})"
        return Stopped(f"its child process {how}")

    def _started(self) -> None:  # the thread is running: supervise() launches the child
        pass

    def supervise(self) -> tuple[Any, BaseException | None]:
        """In the job's thread: launch the child, relay its messages, reap it; its outcome as (value, error)."""
        parent_end, child_end = self._conn
        with self._lock:
            if self.stopped_at is not None:
                child_end.close()
                parent_end.close()
                return None, None
            self._process.start()
            self._launched = True
        child_end.close()
        super()._started()  # the timeout counts from here, and again from the child's "started"
        last: Any = None
        try:
            while True:
                try:
                    message = parent_end.recv()
                except (EOFError, OSError):
                    break
                if message[0] == "started":
                    super()._started()
                elif message[0] == "progress":
                    if self.control is not None:
                        with contextlib.suppress(Exception):
                            self.control.progress(message[1], message[2])
                else:
                    last = message
        finally:
            self._process.join()
            with self._lock:
                self._exitcode = self._process.exitcode
            parent_end.close()
            self._process.close()
        return self._decode(last)

    def _decode(self, message: Any) -> tuple[Any, BaseException | None]:
        if message is None:
            return None, JobError(lifecycle.FAILED, f"the child process ended (exit code {self._exitcode}) "
                                                    "without a result", None)
        if message[0] == "ok":
            try:
                return (None if message[1] is None else self._spec.result_adapter.validate_json(message[1])), None
            except Exception as exc:
                return None, exc
        if message[0] == "retry":
            return None, Retry(after=message[1], reason=message[2])
        if message[0] == "snooze":
            return None, Snooze(after=message[1])
        return None, JobError(message[1], message[2], message[3])

    def relay(self, outcome: Any, error: BaseException | None) -> None:
        """The done callback of the job's thread."""
        self._runner.forget(self)
        self._finish(*(outcome if error is None else (None, error)))


class SyncRunner:
    """Starts a worker's sync jobs: each in a free thread, or in a child process for ``isolation="process"``."""

    def __init__(self, specs: Mapping[str, PerformerSpec]) -> None:
        self._threads = _Threads()
        self._modules = sorted({s.cls.__module__ for s in specs.values() if s.isolation == "process"})
        self._mp: Any = None
        self._children: set[ChildRun] = set()
        self._lock = threading.Lock()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called: runs still waiting are abandoned at the next cancel."""
        return self._threads.closed

    def start(self, spec: PerformerSpec, performer: Performer[Any, Any], payload: Any, raw_payload: str,
              started: Callable[[], None]) -> SyncRun:
        """Start ``performer.perform(payload)``; ``started`` runs on the loop when the work starts."""
        if spec.isolation != "process":
            run = SyncRun(self, started, stoppable=False)
            context = contextvars.copy_context()  # the attempt's (a trace span, the user's own variables)
            self._threads.submit(run._started, lambda: context.run(performer.perform, payload), run._finish)
            return run
        ctx = performer.ctx
        fields = {"job_id": ctx.job_id, "binding": ctx.binding, "attempt": ctx.attempt, "deadline": ctx.deadline,
                  "worker": ctx.worker, "max_attempts": ctx.max_attempts, "run_id": ctx.run_id, "node": ctx.node}
        mp = self._context()
        conn = mp.Pipe(duplex=True)
        process = mp.Process(
            target=child_main, name=f"jobloom-job-{ctx.job_id}", daemon=False,
            args=(conn[1], spec.cls.__module__, spec.cls.__qualname__, raw_payload, fields, *_env_blob(performer)),
        )
        child = ChildRun(self, started, spec, process, conn)
        child.control = ctx.control
        with self._lock:
            self._children.add(child)
        self._threads.submit(child._started, child.supervise, child.relay)
        return child

    def _context(self) -> Any:
        if self._mp is None:
            import multiprocessing  # process isolation only

            method = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
            self._mp = multiprocessing.get_context(method)
            if method == "forkserver":  # the fork server imports these once; each child is a fork of it
                self._mp.set_forkserver_preload(
                    ["jobloom", "jobloom.engine.runners", *self._modules, "jobloom.engine.childwarm"])
        return self._mp

    def forget(self, child: ChildRun) -> None:
        """``child`` is reaped (called from its thread)."""
        with self._lock:
            self._children.discard(child)

    def close(self) -> None:
        """Let idle threads end and kill any child still alive; runs still waiting are abandoned."""
        self._threads.close()
        with self._lock:
            children = list(self._children)
        for child in children:
            child.kill()


def _env_blob(performer: Performer[Any, Any]) -> tuple[bytes | None, str | None]:
    env = getattr(performer, "env", None)
    try:
        return pickle.dumps(env), None
    except Exception as exc:
        return None, f"the app's env ({type(env).__name__}) cannot be pickled: {type(exc).__name__}: {exc}"


class _Unavailable:
    """Stands for ``self.env`` in a child process when the app's env cannot be pickled."""

    def __init__(self, why: str) -> None:
        self._why = why

    def __getattr__(self, name: str) -> Any:
        raise JobloomError(f"self.env is not available in a process-isolated job: {self._why}")

    def __getitem__(self, key: Any) -> Any:
        return self.__getattr__("__getitem__")


class _ChildControl:
    """``self.ctx``'s control in a child process: progress goes to the worker over the pipe."""

    sync = True
    stop_reason = None  # a child is killed, never asked

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    def progress(self, fraction: float, message: str | None) -> None:
        progress_json(fraction, message, 0.0, 0)  # refused here, in the job, if bad
        self._conn.send(("progress", fraction, message))

    def call(self, work: Any) -> Any:
        if inspect.iscoroutine(work):
            work.close()
        raise JobloomError("durable steps and spawn are not available in a process-isolated job")


def _watch_parent(conn: Any) -> None:
    """End the child at once if the worker process dies (its end of the pipe closes)."""
    with contextlib.suppress(Exception):
        conn.recv_bytes()
    os._exit(70)


def child_main(conn: Any, module: str, qualname: str, raw_payload: str, fields: dict[str, Any],
               env_blob: bytes | None, env_why: str | None) -> None:
    """The child process of a process-isolated job: run ``perform`` once and send the outcome back."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the worker decides when its jobs stop
    threading.Thread(target=_watch_parent, args=(conn,), daemon=True).start()
    try:
        cls = resolve_class(module, qualname)
        if cls is None:
            raise JobloomError(f"cannot import {module}.{qualname} in the child process")
        # the worker checks the result against the app's own limit when it stores it
        spec = dataclasses.replace(inspect_performer(cls), max_bytes=MAX_OFFLOADED_BYTES)
        payload = spec.load_payload(raw_payload)
        performer = cls()
        performer.ctx = JobContext(**fields, control=_ChildControl(conn))
        performer.env = pickle.loads(env_blob) if env_blob is not None else _Unavailable(env_why or "")
        conn.send(("started",))
        value = performer.perform(payload)
        message: tuple[Any, ...] = ("ok", spec.dump_result(value))
    except Retry as exc:
        message = ("retry", exc.after, exc.reason)
    except Snooze as exc:
        message = ("snooze", exc.after)
    except Permanent as exc:
        message = ("error", lifecycle.PERMANENT, f"Permanent: {exc}", traceback.format_exc())
    except BaseException as exc:
        message = ("error", lifecycle.FAILED, f"{type(exc).__name__}: {exc}", traceback.format_exc())
    conn.send(message)
    conn.close()
    sys.stdout.flush()
