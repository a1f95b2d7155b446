"""A PostgreSQL server of a test's own, for tests that stop, restart or cut off the server.

The shared test server (``JOBLOOM_TEST_POSTGRES_URL``) is never stopped: a test that needs to take
PostgreSQL down runs ``initdb`` into a temporary folder and starts a server on its own port. A test
module uses the fixture by binding it at module level: ``private_server = private_server_fixture``
(the fixture's name is ``private_server``).
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator

import pytest

from .conftest import IN_CI


def server_binaries() -> tuple[str, str] | str:
    """``(initdb, pg_ctl)``, or why they were not found.

    Debian and Ubuntu keep them outside PATH, so they are looked for where ``pg_config --bindir``
    says, then in the newest ``/usr/lib/postgresql/<version>/bin``, then on PATH."""
    folders: list[str] = []
    pg_config = shutil.which("pg_config")
    if pg_config is not None:
        try:
            out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, timeout=30, check=True)
            folders.append(out.stdout.strip())
        except (OSError, subprocess.SubprocessError):
            pass

    def version(folder: str) -> tuple[int, ...]:
        return tuple(int(n) for n in re.findall(r"\d+", folder.split("/")[-2]))

    folders += sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=version, reverse=True)
    for folder in folders:
        initdb, pg_ctl = os.path.join(folder, "initdb"), os.path.join(folder, "pg_ctl")
        if os.access(initdb, os.X_OK) and os.access(pg_ctl, os.X_OK):
            return initdb, pg_ctl
    initdb_path, pg_ctl_path = shutil.which("initdb"), shutil.which("pg_ctl")
    if initdb_path is not None and pg_ctl_path is not None:
        return initdb_path, pg_ctl_path
    return (f"initdb and pg_ctl were not found (looked in {', '.join(folders) or 'no pg_config --bindir'} "
            "and on PATH): install the PostgreSQL server package (e.g. postgresql-15) to run the tests "
            "that stop and restart a server")


class PrivateServer:
    """A PostgreSQL server of this test's own: initdb into a temporary folder, its own port."""

    def __init__(self, *, listen: tuple[str, ...] = (), trust: tuple[str, ...] = (),
                 settings: tuple[str, ...] = ()) -> None:
        """``listen``: addresses to listen on besides 127.0.0.1 (they must exist already); ``trust``:
        networks (``10.1.2.0/24``) whose clients may connect without a password, besides loopback;
        ``settings``: server settings (``name=value``) it starts with."""
        self.pg_ctl: str | None = None
        self.settings = settings
        self.listen = ("127.0.0.1", *listen)
        found = server_binaries()
        if isinstance(found, str):
            if IN_CI:
                pytest.fail(found, pytrace=False)
            pytest.skip(found)
        initdb, self.pg_ctl = found
        self.folder = tempfile.mkdtemp(prefix="jobloom-pg-")
        self.data = os.path.join(self.folder, "data")
        # initdb refuses to run as root: run the server as the postgres user then
        self.prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        if self.prefix:
            shutil.chown(self.folder, "postgres")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        try:
            self._run(initdb, "-D", self.data, "-U", "postgres", "--auth=trust", "--no-sync")
            if trust:
                with open(os.path.join(self.data, "pg_hba.conf"), "a") as hba:
                    hba.writelines(f"host all all {net} trust\n" for net in trust)
            self.start()
        except BaseException:
            self.destroy()
            raise

    def _run(self, *args: str) -> None:
        subprocess.run([*self.prefix, *args], check=True, capture_output=True, timeout=120)

    def start(self) -> None:
        """Start the server and wait until it accepts connections."""
        opts = (f"-p {self.port} -c listen_addresses={','.join(self.listen)} "
                f"-c unix_socket_directories={self.folder} -c fsync=off"
                + "".join(f" -c {setting}" for setting in self.settings))
        self._run(str(self.pg_ctl), "-D", self.data, "-o", opts, "-l", os.path.join(self.folder, "log"),
                  "-w", "-t", "60", "start")

    def stop(self, mode: str = "fast") -> None:
        """Stop the server: ``fast`` (sessions are ended, a clean shutdown) or ``immediate`` (a crash)."""
        self._run(str(self.pg_ctl), "-D", self.data, "-m", mode, "-w", "-t", "60", "stop")

    def restart(self, mode: str = "fast") -> None:
        """Stop the server, then start it again on the same port and data."""
        self.stop(mode)
        self.start()

    def log(self) -> str:
        """The server's log so far (for failure messages)."""
        try:
            with open(os.path.join(self.folder, "log")) as f:
                return f.read()
        except OSError:
            return ""

    def destroy(self) -> None:
        """Stop the server if it runs and delete its folder."""
        if self.pg_ctl is not None and os.path.isdir(self.data):
            subprocess.run([*self.prefix, str(self.pg_ctl), "-D", self.data, "-m", "immediate", "-w", "stop"],
                           capture_output=True, timeout=60)
        shutil.rmtree(self.folder, ignore_errors=True)


@pytest.fixture(name="private_server")
def private_server_fixture() -> Iterator[PrivateServer]:
    """A private PostgreSQL server for this test, stopped and deleted afterwards."""
    server = PrivateServer()
    try:
        yield server
    finally:
        server.destroy()
