"""The worker's buffered log lines: info lines wait a little, warnings and lines from threads do not."""

from __future__ import annotations

import asyncio
import io
import logging
import threading
import time
from pathlib import Path

import pytest

from jobloom.engine.jobs import Claimed, Outcome
from jobloom.engine.logs import FLUSH_EVERY, BufferedLines, JsonFormatter, SecondFormatter, direct_handler, flush
from jobloom.engine.telemetry import OutcomeLog, log


def _handler(path: Path) -> tuple[BufferedLines, logging.Logger]:
    stream = open(path, "w", buffering=1 << 16)  # noqa: SIM115 - closed by the handler's owner below
    handler = BufferedLines(stream)
    handler.setFormatter(SecondFormatter())
    logger = logging.getLogger(f"jobloom.test.{path.name}")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    return handler, logger


def test_a_warning_is_written_at_once_even_with_nothing_waiting(tmp_path: Path) -> None:
    path = tmp_path / "w.log"
    handler, logger = _handler(path)
    try:
        logger.warning("store_lost worker=w1")  # the first line of the process, and a warning
        assert "store_lost worker=w1" in path.read_text()
    finally:
        handler.close()


def test_a_line_from_a_thread_without_a_loop_is_written_at_once(tmp_path: Path) -> None:
    path = tmp_path / "t.log"
    handler, logger = _handler(path)
    try:
        t = threading.Thread(target=lambda: logger.info("from a sync job's thread"))
        t.start()
        t.join()
        assert "from a sync job's thread" in path.read_text()
    finally:
        handler.close()


def test_info_lines_on_the_loop_wait_at_most_flush_every(tmp_path: Path) -> None:
    path = tmp_path / "i.log"
    handler, logger = _handler(path)

    async def main() -> tuple[str, str]:
        logger.info("job_outcome job_id=1")
        before = path.read_text()
        await asyncio.sleep(FLUSH_EVERY * 4)  # the loop's timer writes them out
        return before, path.read_text()

    try:
        before, after = asyncio.run(main())
        assert "job_id=1" not in before and "job_id=1" in after
        logger.info("job_outcome job_id=2")  # no loop in this thread any more: at once
        flush()
        assert "job_id=2" in path.read_text()
    finally:
        handler.close()


def test_an_outcome_line_written_directly_is_the_line_its_record_gives(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker's per-job line skips making a record only where that changes nothing: the same text,
    byte for byte, as the record through the same handler."""
    path = tmp_path / "o.log"
    handler = BufferedLines(open(path, "w"))  # noqa: SIM115 - closed below
    handler.setFormatter(SecondFormatter())
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    # the worker's configure_logging, without pytest's; setLevel, not an assignment: it also clears the
    # loggers' cached isEnabledFor answers, which an earlier test at WARNING may have left
    root.handlers = [handler]
    root.setLevel(logging.INFO)
    monkeypatch.setattr(time, "time", lambda: 1764633600.987654)  # the record and the direct line read it
    claimed = Claimed(7, "Mail'er", "{}", 2, 3, None, "at_least_once", 1764633600.5, run_id="r1", node="n")
    outcomes = [Outcome(7, 2, "succeeded", "w1", 1764633600.5, 1764633600.5123),
                Outcome(7, 2, "failed", "w1", 1764633600.5, 1764633601.25, error="ValueError: 'bad'\nline two")]
    try:
        assert direct_handler(log, logging.INFO) is handler
        for outcome in outcomes:
            OutcomeLog().attempt_ended(claimed, outcome, None)
        handler.addFilter(lambda record: True)  # an app's filter: every record is made again
        assert direct_handler(log, logging.INFO) is None
        for outcome in outcomes:
            OutcomeLog().attempt_ended(claimed, outcome, None)
        handler.flush(force=True)
        text = path.read_text()
        direct, made = text[: len(text) // 2], text[len(text) // 2:]
        assert direct == made
        assert direct.startswith(time.strftime("%Y-%m-%d %H:%M:%S,987 %z INFO ", time.localtime(1764633600)) +
                                 "jobloom.worker job_outcome job_id=7 binding=Mail'er attempt=2 outcome=succeeded "
                                 "duration_ms=12.3\n")
        assert """error="ValueError: 'bad'\\nline two"\n""" in direct  # one line, as the record's
    finally:
        root.handlers = saved[0]
        root.setLevel(saved[1])
        handler.close()


def test_records_are_made_for_any_other_handler_filter_or_format() -> None:
    root = logging.getLogger()
    saved = root.handlers[:]
    ours = BufferedLines(io.StringIO())
    ours.setFormatter(SecondFormatter())
    try:
        root.handlers = [ours]
        assert direct_handler(log, logging.INFO) is ours
        assert direct_handler(log, logging.DEBUG) is ours  # the handler has no level of its own
        ours.setLevel(logging.WARNING)
        assert direct_handler(log, logging.INFO) is None
        ours.setLevel(logging.NOTSET)
        ours.setFormatter(JsonFormatter())  # --log-format json: the record's fields are wanted
        assert direct_handler(log, logging.INFO) is None
        ours.setFormatter(SecondFormatter("%(levelname)s %(message)s"))
        assert direct_handler(log, logging.INFO) is None
        ours.setFormatter(SecondFormatter())
        app_handler = logging.StreamHandler(io.StringIO())
        logging.getLogger("jobloom").addHandler(app_handler)  # an app's own handler on the way up
        assert direct_handler(log, logging.INFO) is None
        logging.getLogger("jobloom").removeHandler(app_handler)
        log.disabled = True
        assert direct_handler(log, logging.INFO) is None
        log.disabled = False
        root.handlers = []  # no handler at all: logging's last resort, not ours
        assert direct_handler(log, logging.INFO) is None
    finally:
        log.disabled = False
        root.handlers = saved
