"""A real uvicorn server on a loopback port, in a thread of the test process."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn


@contextmanager
def serving(asgi: Any) -> Iterator[str]:
    """Serve ``asgi`` on 127.0.0.1 (a free port) until the block ends; yields the base URL."""
    config = uvicorn.Config(asgi, host="127.0.0.1", port=0, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    failed: list[BaseException] = []

    def run() -> None:
        try:
            asyncio.run(server.serve())
        except BaseException as exc:  # reported to the test below
            failed.append(exc)

    thread = threading.Thread(target=run, name="uvicorn", daemon=True)
    thread.start()
    ready = threading.Event()
    for _ in range(500):
        if server.started or failed or not thread.is_alive():
            ready.set()
            break
        threading.Event().wait(0.01)
    assert ready.is_set() and server.started, f"the server did not start: {failed}"
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
