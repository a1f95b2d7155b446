"""The log lines of ``jobloom worker`` processes: plain ``key=value`` lines on stderr, cheap enough for
one line per job.

At the default level a worker writes a line per job outcome, so at thousands of jobs a second the
logging path is part of the cost of a job. :func:`configure_logging` sets it up so that a line costs a
few microseconds: lines written on the event loop's thread go to stderr through a buffer that is
flushed at once for a warning or an error, and otherwise :data:`FLUSH_EVERY` seconds after the first
line that waits (a timer on the loop), or earlier when the worker has nothing to do (it calls
:func:`flush`); lines from other threads (sync jobs) are written at once. The time in each line is
formatted once per second of the clock, not once per line. A process killed with SIGKILL may lose
the lines of its last :data:`FLUSH_EVERY` seconds. The supervisor, which logs a few lines, writes
each at once (``buffered=False``).
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import os
import sys
import threading
import time
from datetime import UTC, datetime
from typing import Any, TextIO

FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"
LOG_FORMATS = ("text", "json")
_RESERVED = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {
    "message", "asctime", "taskName", "color_message"}  # uvicorn's copy of the message with terminal colours


class JsonFormatter(logging.Formatter):
    """One JSON object per record: ``time`` (UTC, ISO 8601), ``level``, ``logger``, ``message``, the
    record's own fields (``extra=``), and ``exception`` (the formatted traceback) when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line of JSON."""
        out: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _RESERVED and not key.startswith("_") and key not in out:
                out[key] = value
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            out["exception"] = record.exc_text
        if record.stack_info:
            out["stack"] = self.formatStack(record.stack_info)
        return json.dumps(out, default=str, ensure_ascii=False)


def check_format(log_format: str) -> str:
    """``log_format`` if it is one of :data:`LOG_FORMATS`; ``ValueError`` naming them otherwise."""
    if log_format not in LOG_FORMATS:
        raise ValueError(f"log format {log_format!r}: expected one of {', '.join(LOG_FORMATS)}")
    return log_format

FLUSH_EVERY = 0.05  # seconds: the longest an info line waits in the buffer while lines keep coming
_BUFFER = 1 << 16


class SecondFormatter(logging.Formatter):
    """``logging.Formatter`` with the date and time of a second formatted once for all its lines."""

    def __init__(self, fmt: str = FORMAT) -> None:
        super().__init__(fmt)
        self._second = -1
        self._text = ""
        self._zone = ""

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        """``YYYY-MM-DD HH:MM:SS,mmm +HHMM``: local time as the standard formatter writes it, and its UTC
        offset, so no line leaves its zone to be guessed."""
        return self.stamp(record.created)

    def stamp(self, created: float) -> str:
        """The time ``created`` (epoch seconds) as :meth:`formatTime` writes a record made then."""
        second = int(created)
        if second != self._second:
            self._second = second
            moment = self.converter(created)
            self._text = time.strftime(self.default_time_format, moment)
            self._zone = time.strftime("%z", moment)
        # the record's msecs as logging computes them, in the standard default_msec_format ("%s,%03d")
        return f"{self._text},{int((created - second) * 1000):03d} {self._zone}"


class BufferedLines(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes each line into a buffer; flushes for a warning or worse, for a line from a thread without
    an event loop, :data:`FLUSH_EVERY` seconds after the oldest line still unflushed (a timer on the
    loop), or when :meth:`flush` is called with ``force``."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__(stream)
        self._pending_since: float | None = None

    def emit(self, record: logging.LogRecord) -> None:
        """Format and buffer the line; flush when it is due."""
        try:
            self._write(self.format(record), record.levelno)
        except RecursionError:
            raise
        except Exception:
            self.handleError(record)

    def write_line(self, created: float, level: int, name: str, message: str) -> None:
        """Buffer the line a record of logger ``name`` at ``level`` with ``message`` (no arguments, no
        exception) made at ``created`` would give, without making the record: for a handler that
        :func:`direct_handler` returned."""
        formatter = self.formatter
        assert isinstance(formatter, SecondFormatter)
        self.acquire()
        try:
            self._write(f"{formatter.stamp(created)} {logging.getLevelName(level)} {name} {message}", level)
        except RecursionError:
            raise
        except Exception:
            self.handleError(logging.makeLogRecord({"name": name, "levelno": level, "msg": message}))
        finally:
            self.release()

    def _write(self, line: str, level: int) -> None:
        self.stream.write(line + "\n")
        if level >= logging.WARNING:
            self.flush(force=True)
            return
        if self._pending_since is None:
            loop = _loop_here()
            if loop is None:  # no event loop in this thread to flush later: now
                self.flush(force=True)
                return
            self._pending_since = time.monotonic()
            loop.call_later(FLUSH_EVERY, self.flush, True)

    def flush(self, force: bool = False) -> None:
        """Write out what is buffered (``logging`` calls this without ``force`` after every line: no-op
        then, unless lines have waited :data:`FLUSH_EVERY` seconds)."""
        if not force and (self._pending_since is None or time.monotonic() - self._pending_since < FLUSH_EVERY):
            return
        self.acquire()
        try:
            self._pending_since = None
            if self.stream and hasattr(self.stream, "flush"):
                self.stream.flush()
        finally:
            self.release()

    def close(self) -> None:
        """Flush everything, then close as a stream handler does (the stream itself stays open)."""
        self.flush(force=True)
        super().close()


def direct_handler(logger: logging.Logger, level: int) -> BufferedLines | None:
    """The one handler a record of ``logger`` at ``level`` would reach, when writing the line to it
    directly (:meth:`BufferedLines.write_line`) gives exactly what the record would: a
    :class:`BufferedLines` with the text format (:data:`FORMAT`), and no filter, other handler or
    disabled logger on the way. ``None`` otherwise (JSON lines, an app's own handlers or filters):
    make the record then."""
    found: BufferedLines | None = None
    current: logging.Logger | None = logger
    while current is not None:
        if current.filters or current.disabled:
            return None
        for handler in current.handlers:
            if found is not None or type(handler) is not BufferedLines or handler.filters or level < handler.level:
                return None
            formatter = handler.formatter
            if type(formatter) is not SecondFormatter or formatter._fmt != FORMAT:
                return None
            found = handler
        if not current.propagate:
            break
        current = current.parent
    return found


def _loop_here() -> asyncio.AbstractEventLoop | None:
    """The event loop running in this thread, if any."""
    if threading.current_thread() is not threading.main_thread():
        return None
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _stderr_stream() -> TextIO:
    """A buffered text stream on stderr's file descriptor (``sys.stderr`` writes each line at once)."""
    try:
        fd = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # replaced by something without a descriptor
        return sys.stderr
    raw = io.FileIO(os.dup(fd), "w")
    return io.TextIOWrapper(io.BufferedWriter(raw, _BUFFER), encoding=sys.stderr.encoding or "utf-8",
                            errors="backslashreplace", line_buffering=False)


_configured: list[tuple[logging.Handler, int]] = []  # the handler and level configure_logging set, if it ran


def configure_logging(level: str, *, log_format: str = "text", buffered: bool = True) -> None:
    """Log records of ``level`` and above on stderr (the root logger's only handler: the app's own
    loggers come out the same way), as ``key=value`` text lines or one JSON object per line
    (``log_format``), buffered as the module says (or each written at once)."""
    handler = BufferedLines(_stderr_stream()) if buffered else logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if check_format(log_format) == "json" else SecondFormatter())
    levelno = getattr(logging, level.upper(), logging.INFO)
    logging.basicConfig(level=levelno, handlers=[handler], force=True)
    _configured[:] = [(handler, levelno)]


def keep_jobloom_lines() -> None:
    """After the app was loaded: if loading it configured logging of its own (Django applies its
    ``LOGGING`` setting at ``django.setup()``, which may replace the root logger's handlers and, by
    default, disable the loggers that exist already), jobloom's loggers are enabled again and, unless
    that configuration gave the ``jobloom`` logger handlers of its own, write through the handler of
    :func:`configure_logging` still: jobloom's lines keep their format, their level and the zone of
    their time. The app's own loggers follow its configuration."""
    if not _configured:
        return
    handler, levelno = _configured[0]
    for name, logger in list(logging.Logger.manager.loggerDict.items()):
        if isinstance(logger, logging.Logger) and (name == "jobloom" or name.startswith("jobloom.")):
            logger.disabled = False
    root, top = logging.getLogger(), logging.getLogger("jobloom")
    if handler in root.handlers or top.handlers:
        return
    top.addHandler(handler)
    top.setLevel(levelno)
    top.propagate = False


def flush() -> None:
    """Write out the buffered lines of every :class:`BufferedLines` handler (the worker calls this
    when it has nothing to do, and before it exits)."""
    for handler in logging.getLogger().handlers:
        if isinstance(handler, BufferedLines):
            handler.flush(force=True)
