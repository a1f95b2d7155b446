"""PgBouncer in transaction pooling mode in front of the test PostgreSQL, started by the suite as the
``postgres`` user (PgBouncer refuses to run as root), one per test process.

Tests that run through it take the ``pooled_store_url`` fixture (``tests/conftest.py``): each store in
turn, and PostgreSQL through PgBouncer as a third. The URL carries the test's private schema as
``options=-csearch_path=...``; PgBouncer is told to ignore that startup parameter, and jobloom, seeing
a pooler, sets the search path in each transaction instead.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from urllib.parse import urlsplit

import pytest

from .conftest import IN_CI, POSTGRES_URL


def pgbouncer_binary() -> str:
    """The path of ``pgbouncer``; skip, or with CI=true fail, when it is not installed."""
    found = shutil.which("pgbouncer") or ("/usr/sbin/pgbouncer" if os.access("/usr/sbin/pgbouncer", os.X_OK) else None)
    if found is None:
        message = "pgbouncer is not installed: `apt-get install pgbouncer` (.ci/run installs it)"
        if IN_CI:
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return found


class PgBouncer:
    """A PgBouncer (``pool_mode = transaction``) in front of the test server, on a port of its own."""

    def __init__(self) -> None:
        binary = pgbouncer_binary()
        server = urlsplit(POSTGRES_URL)
        self.database = server.path.lstrip("/") or "postgres"
        self.folder = tempfile.mkdtemp(prefix="jobloom-pgbouncer-")
        prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        user = server.username or "postgres"
        with open(os.path.join(self.folder, "userlist.txt"), "w") as f:
            f.write(f'"{user}" ""\n')
        ini = os.path.join(self.folder, "pgbouncer.ini")
        with open(ini, "w") as f:
            f.write(f"""[databases]
{self.database} = host={server.hostname or '127.0.0.1'} port={server.port or 5432} dbname={self.database}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {self.port}
unix_socket_dir = {self.folder}
auth_type = trust
auth_file = {self.folder}/userlist.txt
pool_mode = transaction
max_client_conn = 1000
default_pool_size = 20
ignore_startup_parameters = extra_float_digits, options
logfile = {self.folder}/pgbouncer.log
""")
        if prefix:
            shutil.chown(self.folder, "postgres")
            for name in ("userlist.txt", "pgbouncer.ini"):
                shutil.chown(os.path.join(self.folder, name), "postgres")
        self.url = f"postgresql://{user}@127.0.0.1:{self.port}/{self.database}"
        self.proc = subprocess.Popen([*prefix, binary, ini], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"pgbouncer did not start: {self.log()}") from None
                time.sleep(0.05)

    def through(self, direct_url: str) -> str:
        """``direct_url`` (to the test server, with its query) through this PgBouncer."""
        query = urlsplit(direct_url).query
        return self.url + (f"?{query}" if query else "")

    def log(self) -> str:
        """PgBouncer's log so far."""
        try:
            with open(os.path.join(self.folder, "pgbouncer.log")) as f:
                return f.read()
        except OSError:
            return ""

    def stop(self) -> None:
        """Stop it and delete its folder."""
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.folder, ignore_errors=True)
