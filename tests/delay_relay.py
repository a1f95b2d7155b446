"""A TCP relay that delays every byte by a fixed time each way: a round trip for kernels without netem.

``tc netem`` needs the kernel's ``sch_netem`` (CONFIG_NET_SCH_NETEM); where it is missing, the
many-hosts test and benchmark put this relay on each namespace's link instead: it listens on the
root namespace's address of the link and forwards to PostgreSQL, holding what it reads for
``--delay-ms`` before writing it on, in both directions (so a round trip gains twice that).

    python tests/delay_relay.py --to 127.0.0.1:5432 --listen 10.1.2.1:6000 --listen 10.1.2.5:6000 \\
        --delay-ms 0.5 --peers peers.txt

Prints ``ready`` once every address listens. Each accepted client's address is appended to the
``--peers`` file. Two threads per direction of each connection (reader and timed writer) with
``time.sleep``, which is precise to tens of microseconds, unlike an event loop's millisecond timers.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import socket
import sys
import threading
import time


def _pump(src: socket.socket, dst: socket.socket, delay: float) -> None:
    """Copy ``src`` to ``dst``, each chunk written ``delay`` seconds after it was read, in order."""
    pending: collections.deque[tuple[float, bytes]] = collections.deque()
    ready = threading.Condition()

    def writer() -> None:
        while True:
            with ready:
                while not pending:
                    ready.wait()
                due, data = pending.popleft()
            wait = due - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            if not data:
                with contextlib.suppress(OSError):
                    dst.shutdown(socket.SHUT_WR)
                return
            try:
                dst.sendall(data)
            except OSError:
                return

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    while True:
        try:
            data = src.recv(65536)
        except OSError:
            data = b""
        with ready:
            pending.append((time.monotonic() + delay, data))
            ready.notify()
        if not data:
            break
    thread.join()


def _serve(listener: socket.socket, target: tuple[str, int], delay: float, peers: str | None) -> None:
    while True:
        client, addr = listener.accept()
        if peers:
            with open(peers, "a") as f:
                f.write(f"{addr[0]}\n")
        try:
            upstream = socket.create_connection(target)
        except OSError:
            client.close()
            continue
        for s in (client, upstream):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def both(a: socket.socket = client, b: socket.socket = upstream) -> None:
            other = threading.Thread(target=_pump, args=(b, a, delay), daemon=True)
            other.start()
            _pump(a, b, delay)
            other.join()
            a.close()
            b.close()

        threading.Thread(target=both, daemon=True).start()


def main() -> int:
    """Entry point."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--to", required=True, help="host:port to forward to")
    parser.add_argument("--listen", action="append", required=True, help="host:port to listen on (repeatable)")
    parser.add_argument("--delay-ms", type=float, default=0.5, help="delay each way, in milliseconds")
    parser.add_argument("--peers", default=None, help="file to append each client's address to")
    args = parser.parse_args()
    host, port = args.to.rsplit(":", 1)
    target = (host, int(port))
    threads = []
    for where in args.listen:
        lhost, lport = where.rsplit(":", 1)
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((lhost, int(lport)))
        listener.listen(128)
        threads.append(threading.Thread(target=_serve, args=(listener, target, args.delay_ms / 1000, args.peers),
                                        daemon=True))
    for t in threads:
        t.start()
    print("ready", flush=True)
    for t in threads:
        t.join()
    return 0


if __name__ == "__main__":
    sys.exit(main())
