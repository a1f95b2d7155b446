"""A primary and a streaming standby of the test's own, from Debian's PostgreSQL binaries: the topology
that production failover runs on, on one machine.

The primary waits for the standby at every commit (``synchronous_standby_names = '*'``), so a commit
acknowledged to a client is on both. The standby is made with ``pg_basebackup -R`` and streams from
the primary. :meth:`Pair.kill_primary` is ``kill -9`` of the primary's postmaster, :meth:`Pair.promote`
is ``pg_ctl promote`` of the standby, and :meth:`Pair.restart_old_primary` starts the old primary
again as a writable server on its old timeline (split brain: nothing may write to it)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time

import psycopg

from .pg_private import PrivateServer


class Standby:
    """The standby: a base backup of ``primary`` on a port of its own, streaming from it."""

    def __init__(self, primary: PrivateServer) -> None:
        self.primary = primary
        self.folder = os.path.join(primary.folder, "standby")
        self.data = os.path.join(self.folder, "data")
        os.makedirs(self.folder)
        if primary.prefix:
            shutil.chown(self.folder, "postgres")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        assert primary.pg_ctl is not None
        basebackup = os.path.join(os.path.dirname(primary.pg_ctl), "pg_basebackup")
        primary._run(basebackup, "-D", self.data, "-R", "-X", "stream", "-h", "127.0.0.1", "-p", str(primary.port),
                     "-U", "postgres", "--no-sync")
        self.start()

    def start(self) -> None:
        """Start the standby (it waits for no standby of its own once promoted)."""
        opts = (f"-p {self.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={self.folder} "
                "-c fsync=off -c synchronous_standby_names=''")
        self.primary._run(str(self.primary.pg_ctl), "-D", self.data, "-o", opts, "-l",
                          os.path.join(self.folder, "log"), "-w", "-t", "60", "start")

    def promote(self) -> None:
        """``pg_ctl promote``: the standby leaves recovery and takes writes (returns once it does)."""
        self.primary._run(str(self.primary.pg_ctl), "-D", self.data, "-w", "-t", "60", "promote")

    def log(self) -> str:
        """The standby's log so far."""
        try:
            with open(os.path.join(self.folder, "log")) as f:
                return f.read()
        except OSError:
            return ""

    def destroy(self) -> None:
        """Stop it (immediately)."""
        if os.path.isdir(self.data):
            subprocess.run([*self.primary.prefix, str(self.primary.pg_ctl), "-D", self.data, "-m", "immediate", "-w",
                            "stop"], capture_output=True, timeout=60)


class Pair:
    """A synchronous primary/standby pair and the multi-host URL that finds the writable one."""

    def __init__(self) -> None:
        self.primary = PrivateServer(settings=("synchronous_standby_names='*'", "wal_keep_size=256MB"))
        try:
            self.standby = Standby(self.primary)
            self.wait_sync()
        except BaseException:
            self.primary.destroy()
            raise

    def url(self, database: str = "postgres") -> str:
        """Both servers, primary first, and only a writable server accepted."""
        return (f"postgresql://postgres@127.0.0.1:{self.primary.port},127.0.0.1:{self.standby.port}/{database}"
                "?target_session_attrs=read-write")

    def wait_sync(self, timeout: float = 60.0) -> None:
        """Wait until the standby streams as the primary's synchronous standby."""
        deadline = time.monotonic() + timeout
        while True:
            with psycopg.connect(self.primary.url, autocommit=True) as conn:
                row = conn.execute("SELECT sync_state FROM pg_stat_replication").fetchone()
            if row is not None and row[0] == "sync":
                return
            assert time.monotonic() < deadline, f"the standby never became synchronous: {self.standby.log()}"
            time.sleep(0.1)

    def kill_primary(self) -> None:
        """``kill -9`` the primary's postmaster (its backends end when they notice)."""
        with open(os.path.join(self.primary.data, "postmaster.pid")) as f:
            pid = int(f.readline())
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while True:  # its backends notice the postmaster's death and end too
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            assert time.monotonic() < deadline, "the killed primary never ended"
            time.sleep(0.05)

    def restart_old_primary(self) -> None:
        """Start the old primary again as it was (a writable server on the old timeline), without waiting
        for a standby: what an operator who restarts it by mistake gets."""
        self.primary.settings = ("synchronous_standby_names=''",)
        self.primary.start()

    def destroy(self) -> None:
        """Stop both servers and delete their folders."""
        self.standby.destroy()
        self.primary.destroy()
