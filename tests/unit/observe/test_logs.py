"""The JSON log format: one object per record, the record's own fields as keys."""

from __future__ import annotations

import json
import logging

import pytest

from jobloom.observe.logs import JsonFormatter, check_format


def record(msg: str, *args: object, exc: bool = False, **extra: object) -> logging.LogRecord:
    logger = logging.getLogger("jobloom.worker")
    exc_info = None
    if exc:
        try:
            raise ValueError("bad")
        except ValueError:
            import sys

            exc_info = sys.exc_info()
    return logger.makeRecord("jobloom.worker", logging.INFO, __file__, 1, msg, args, exc_info, extra=extra)


def test_a_record_is_one_json_object_with_its_fields() -> None:
    line = JsonFormatter().format(record("job_outcome job_id=%d", 7, event="job_outcome", job_id=7, binding="B",
                                         attempt=1, outcome="succeeded", duration=0.5, worker="w"))
    assert "\n" not in line
    got = json.loads(line)
    assert got["message"] == "job_outcome job_id=7" and got["level"] == "info" and got["logger"] == "jobloom.worker"
    assert {k: got[k] for k in ("event", "job_id", "binding", "attempt", "outcome", "duration", "worker")} == {
        "event": "job_outcome", "job_id": 7, "binding": "B", "attempt": 1, "outcome": "succeeded", "duration": 0.5,
        "worker": "w"}
    assert got["time"].endswith("+00:00")
    assert not {"args", "msg", "levelno", "pathname", "created"} & set(got)


def test_an_exception_and_values_json_cannot_hold_are_written_as_text() -> None:
    got = json.loads(JsonFormatter().format(record("failed", exc=True, thing=object(), text="é\n")))
    assert "ValueError: bad" in got["exception"]
    assert got["thing"].startswith("<object") and got["text"] == "é\n"


def test_only_text_and_json_are_formats() -> None:
    assert check_format("json") == "json"
    with pytest.raises(ValueError, match="text, json"):
        check_format("xml")
