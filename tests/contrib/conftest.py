"""What the framework tests share: the example projects, run as real processes (a web server and a worker)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.helpers import eventually_sync

EXAMPLES = Path(__file__).resolve().parent.parent.parent / "examples"


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Services:
    """Processes of one test (each one's output kept in a file, shown when a check fails), stopped at its end."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.running: list[tuple[str, subprocess.Popen[bytes], Path]] = []
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("JOBLOOM_", "PYTEST_"))}

    def run(self, name: str, args: list[str], cwd: Path, env: dict[str, str] | None = None,
            timeout: float = 60) -> str:
        """Run a command to its end; its output, or a failure that shows it."""
        done = subprocess.run([sys.executable, *args], cwd=cwd, env={**self.env, **(env or {})},
                              capture_output=True, text=True, timeout=timeout)
        assert done.returncode == 0, f"{name} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
        return done.stdout + done.stderr

    def start(self, name: str, args: list[str], cwd: Path, env: dict[str, str] | None = None) -> None:
        """Start a long-running process (``python ARGS``)."""
        log = self.folder / f"{name}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen([sys.executable, *args], cwd=cwd, env={**self.env, **(env or {})},
                                    stdout=out, stderr=subprocess.STDOUT)
        self.running.append((name, proc, log))

    def logs(self) -> str:
        """Every process's output so far."""
        return "\n".join(f"--- {name} (exit {proc.poll()}):\n{log.read_text(errors='replace')[-4000:]}"
                         for name, proc, log in self.running)

    def wait_http(self, url: str, timeout: float = 60) -> None:
        """Wait until ``url`` answers (any status), failing early with the logs if a process died."""
        def up() -> bool:
            for name, proc, _ in self.running:
                assert proc.poll() is None, f"{name} exited early:\n{self.logs()}"
            with contextlib.suppress(httpx.TransportError):
                httpx.get(url, timeout=2)
                return True
            return False

        eventually_sync(up, timeout=timeout, interval=0.2, what=f"{url} to answer")

    def stop(self) -> None:
        """SIGTERM every process (a worker drains), then wait; SIGKILL what does not stop."""
        for _, proc, _ in self.running:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for _, proc, _ in self.running:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.fixture
def services(tmp_path: Path) -> Iterator[Services]:
    running = Services(tmp_path)
    try:
        yield running
    finally:
        running.stop()
