"""SQLite wake-ups: sockets for a database file at a path too long for a Unix socket beside it, and
senders that list the wake folder at most every ``wake.REFRESH`` seconds without losing a listener."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
from pathlib import Path

import pytest

import jobloom
from jobloom.store.sqlite import wake
from jobloom.store.sqlite.store import wake_folder

from .performers import Echo


def test_short_paths_keep_the_folder_beside_the_file() -> None:
    assert wake_folder("/tmp/a/jobloom.db") == "/tmp/a/jobloom.db.wake"


def test_long_paths_get_a_short_folder_named_after_the_file() -> None:
    long = "/tmp/" + "x" * 120 + "/jobloom.db"
    folder = wake_folder(long)
    assert len(folder) < 60 and folder == wake_folder(long) and folder != wake_folder(long + "2")


def test_the_short_folder_is_private_and_one_made_by_someone_else_is_refused(tmp_path: Path) -> None:
    import stat

    from jobloom.core.errors import StoreError
    from jobloom.store.sqlite.store import private_folder

    mine = private_folder(str(tmp_path / "mine"))
    assert stat.S_IMODE(os.stat(mine).st_mode) == 0o700 and os.stat(mine).st_uid == os.geteuid()
    assert private_folder(mine) == mine  # again: accepted as it is
    open_to_all = tmp_path / "open"
    open_to_all.mkdir()
    open_to_all.chmod(0o777)
    with pytest.raises(StoreError, match="not a private folder"):
        private_folder(str(open_to_all))
    if os.geteuid() == 0:  # as root, a folder that another user made first can be staged
        theirs = tmp_path / "theirs"
        theirs.mkdir(0o700)
        os.chown(theirs, 65534, 65534)
        with pytest.raises(StoreError, match="owner uid 65534"):
            private_folder(str(theirs))


async def test_a_worker_on_a_long_path_wakes_on_enqueue(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 100)
    deep.mkdir()
    app = jobloom.App(f"sqlite:///{deep}/jobloom.db", performers=[Echo])
    worker = jobloom.Worker(app, grace=2)
    task = asyncio.create_task(worker.run())
    try:
        await app.list_jobs()
        job = await app.enqueue(Echo, {"n": 1})
        done = await app.wait(job.id, timeout=10)
        assert done.state == "succeeded"
    finally:
        worker.stop()
        await asyncio.wait_for(task, 10)
        await app.close()


# -- how often a sender lists the folder ----------------------------------------------------------------


def _listener(folder: Path, name: str) -> socket.socket:
    """A listening socket made as another process would: without this process's sockets knowing."""
    folder.mkdir(exist_ok=True)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(folder / name))
    sock.setblocking(False)
    return sock


def _received(sock: socket.socket) -> int:
    n = 0
    with contextlib.suppress(BlockingIOError):
        while True:
            sock.recv(64)
            n += 1
    return n


def test_a_sender_lists_the_folder_at_most_once_per_refresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    listed: list[str] = []
    real = os.listdir

    def counting(path: str) -> list[str]:
        listed.append(path)
        return real(path)

    monkeypatch.setattr(wake.os, "listdir", counting)
    sender = wake.WakeFolder(str(tmp_path / "missing.wake"))  # nobody listens: the folder does not exist
    started = time.monotonic()
    for _ in range(1000):
        sender.send()
    elapsed = time.monotonic() - started
    assert 1 <= len(listed) <= 1 + int(elapsed / wake.REFRESH)
    sender.close()


def test_a_new_listener_elsewhere_is_signalled_once_the_listing_expires(tmp_path: Path) -> None:
    folder = tmp_path / "w.wake"
    sender = wake.WakeFolder(str(folder))
    sender.send()  # lists the (missing) folder
    sock = _listener(folder, "999999-aaaaaaaa.sock")
    try:
        time.sleep(wake.REFRESH + 0.01)
        sender.send()
        assert _received(sock) == 1
    finally:
        sock.close()
        sender.close()


def test_a_failed_send_lists_the_folder_again_at_the_next_send(tmp_path: Path) -> None:
    folder = tmp_path / "w.wake"
    gone = _listener(folder, "999998-aaaaaaaa.sock")
    gone.close()  # its process died without removing the file: sends are refused
    sender = wake.WakeFolder(str(folder))
    sender.send()
    assert not (folder / "999998-aaaaaaaa.sock").exists()  # removed by the failed send
    sock = _listener(folder, "999999-bbbbbbbb.sock")
    try:
        sender.send()  # well within REFRESH of the first listing: listed again because a send failed
        assert _received(sock) == 1
    finally:
        sock.close()
        sender.close()


async def test_listeners_of_this_process_are_signalled_at_once(tmp_path: Path) -> None:
    folder = str(tmp_path / "w.wake")
    sender = wake.WakeFolder(folder)
    sender.send()  # a listing without any listener
    listener = wake.SocketWakeups(folder)
    try:
        sender.send()
        assert await listener.wait(1.0)
    finally:
        await listener.close()
        sender.close()


@pytest.mark.serial  # a time bound: the delay of a missed signal
async def test_a_listener_wakes_by_itself_once_the_senders_listings_expired(tmp_path: Path) -> None:
    """What bounds the delay of a signal a sender elsewhere missed: at most REFRESH and a margin."""
    listener = wake.SocketWakeups(str(tmp_path / "w.wake"))
    started = time.monotonic()
    try:
        assert await listener.wait(2.0)
        assert wake.REFRESH <= time.monotonic() - started < wake.REFRESH + 0.5
        assert not await listener.wait(wake.REFRESH * 2)  # once only
    finally:
        await listener.close()
