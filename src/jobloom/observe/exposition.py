"""Serving the metrics: the registry one endpoint exposes, and the endpoint of ``jobloom worker
--metrics-port`` (one for all of a supervisor's processes).

One process (``jobloom serve``, ``jobloom.web.asgi(app)``): its own :data:`~jobloom.observe.metrics.REGISTRY` and
the store's gauges. Several (a worker's supervisor): each worker process writes its values to files in
a folder that prometheus-client's multiprocess mode sums at each scrape (``PROMETHEUS_MULTIPROC_DIR``,
a fresh folder per supervisor). A process that dies, even by ``kill -9``, leaves its files: its counts
stay in the sums, so counters never go back.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
import threading
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead
from prometheus_client.registry import Collector

from jobloom.core.errors import JobloomError
from jobloom.observe.gauges import StoreGauges
from jobloom.observe.metrics import REGISTRY, multiprocess_dir

if TYPE_CHECKING:
    from prometheus_client import Metric

    from jobloom.store.base import Store


class _Registered(Collector):
    """A registry's metrics, as one collector of another registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

    def collect(self) -> Iterator[Metric]:
        yield from self.registry.collect()


def scrape_registry(gauges: StoreGauges | None, folder: str | None = None) -> CollectorRegistry:
    """A registry of jobloom's metrics: the processes' of ``folder`` (multiprocess mode, by default the
    environment's ``PROMETHEUS_MULTIPROC_DIR``) or else this process's, and the store's ``gauges``."""
    registry = CollectorRegistry(auto_describe=False)
    folder = folder or multiprocess_dir()
    if folder:
        MultiProcessCollector(registry, path=folder)  # type: ignore[no-untyped-call]
    else:
        registry.register(_Registered(REGISTRY))
    if gauges is not None:
        registry.register(gauges)
    return registry


def render(registry: CollectorRegistry) -> bytes:
    """The text exposition format of ``registry``."""
    return generate_latest(registry)


class WorkerMetricsServer:
    """The metrics endpoint of a worker supervisor: ``http://HOST:PORT/metrics``.

    :meth:`start` makes the folder of the worker processes' values (set it in their environment with
    :meth:`child_env`), starts an event loop thread for the store's gauges and the HTTP server thread.
    :meth:`process_exited` drops a dead process's live gauges; :meth:`close` stops it all and removes
    the folder.
    """

    def __init__(self, store: Callable[[], Awaitable[Store]], close_store: Callable[[], Coroutine[Any, Any, None]],
                 host: str, port: int, bindings: Iterable[str] = ()) -> None:
        self.store = store
        self.bindings = tuple(bindings)
        self.close_store = close_store
        self.host = host
        self.port = port
        self.folder: str | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: threading.Thread | None = None
        self._server: Any = None

    def start(self) -> int:
        """Start serving; the port it listens on (``port=0`` picks a free one)."""
        from prometheus_client import start_http_server

        self.folder = tempfile.mkdtemp(prefix="jobloom-metrics-")
        loop = self._loop = asyncio.new_event_loop()
        self._loop_thread = threading.Thread(target=loop.run_forever, name="jobloom-metrics", daemon=True)
        self._loop_thread.start()
        gauges = StoreGauges(self.store, loop=loop, bindings=self.bindings)
        registry = scrape_registry(gauges, self.folder)
        try:
            self._server, _ = start_http_server(self.port, addr=self.host, registry=registry)
        except OSError as exc:
            self.close()
            raise JobloomError(f"--metrics-port {self.port}: cannot listen on {self.host}:{self.port} "
                               f"({exc.strerror or exc}); give another port, or 0 for a free one") from None
        self.port = int(self._server.server_port)
        return self.port

    def child_env(self) -> dict[str, str]:
        """What the worker processes' environment needs for their values to reach this endpoint."""
        assert self.folder is not None
        return {"PROMETHEUS_MULTIPROC_DIR": self.folder}

    def process_exited(self, pid: int) -> None:
        """A worker process ended (or was killed): its live gauges go; its counts stay."""
        if self.folder is not None:
            with contextlib.suppress(OSError):
                mark_process_dead(pid, self.folder)  # type: ignore[no-untyped-call]

    def close(self) -> None:
        """Stop the server and the loop, close the store, remove the folder."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._loop is not None:
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(self.close_store(), self._loop).result(5)
            self._loop.call_soon_threadsafe(self._loop.stop)
            if self._loop_thread is not None:
                self._loop_thread.join(5)
            self._loop = None
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None

