"""Logs of long-running commands (``jobloom worker``, ``jobloom serve``): stdlib :mod:`logging` on
stderr, as text lines or as one JSON object per line (``--log-format json``).

jobloom logs under ``jobloom.*`` (``jobloom.worker``: job outcomes and worker events;
``jobloom.supervisor``: worker processes). A record of an event carries its fields as attributes
(``event``, ``job_id``, ``binding``, ``attempt``, ``outcome``, ``duration``, ``worker``, ...), which
:class:`JsonFormatter` writes as keys of the object, so users' own handlers and formatters see them too.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any

LOG_FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"
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


def configure_logging(level: str, log_format: str = "text") -> None:
    """Log records of ``level`` and above to stderr, as text lines or JSON lines (the root logger's only
    handler: records of the app's own loggers come out the same way)."""
    handler = logging.StreamHandler(sys.stderr)
    if check_format(log_format) == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter(TEXT_FORMAT))
    logging.basicConfig(level=getattr(logging, level.upper(), logging.INFO), handlers=[handler], force=True)
