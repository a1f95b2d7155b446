"""Logs of long-running commands (``jobloom worker``, ``jobloom serve``): stdlib :mod:`logging` on
stderr, as text lines or as one JSON object per line (``--log-format json``).

jobloom logs under ``jobloom.*`` (``jobloom.worker``: job outcomes and worker events;
``jobloom.supervisor``: worker processes). A record of an event carries its fields as attributes
(``event``, ``job_id``, ``binding``, ``attempt``, ``outcome``, ``duration``, ``worker``, ...), which
:class:`JsonFormatter` writes as keys of the object, so users' own handlers and formatters see them too.
"""

from __future__ import annotations

from jobloom.engine.logs import FORMAT as TEXT_FORMAT
from jobloom.engine.logs import LOG_FORMATS, JsonFormatter, check_format
from jobloom.engine.logs import configure_logging as _configure


def configure_logging(level: str, log_format: str = "text") -> None:
    """Log records of ``level`` and above to stderr, as text lines or JSON lines, each written at once
    (the worker process buffers its lines: :func:`jobloom.engine.logs.configure_logging`)."""
    _configure(level, log_format=log_format, buffered=False)


__all__ = ["LOG_FORMATS", "TEXT_FORMAT", "JsonFormatter", "check_format", "configure_logging"]
