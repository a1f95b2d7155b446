"""The worker's buffered log lines: info lines wait a little, warnings and lines from threads do not."""

from __future__ import annotations

import asyncio
import logging
import threading
from pathlib import Path

from jobloom.engine.logs import FLUSH_EVERY, BufferedLines, SecondFormatter, flush


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
