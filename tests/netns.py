"""Separate hosts on one machine: network namespaces joined to the host by veth pairs with added delay.

Each :class:`Namespaces` host gets a namespace of its own and a veth pair, the host end in the root
namespace with an address of its own (``10.A.B.4i+1/30``) and the other end inside the namespace
(``...4i+2``); ``tc netem`` delays what leaves either end by half the round trip asked for, so a packet
and its answer take ``rtt`` longer than on loopback, as between machines on one network. Names carry a
random tag, so that concurrent runs do not collide, and :meth:`Namespaces.destroy` removes every
namespace and veth made, also after a failure half-way through :meth:`Namespaces.create`.

Kernels built without ``sch_netem`` (CONFIG_NET_SCH_NETEM) refuse the qdisc: then
:attr:`Namespaces.netem` turns false and :class:`DelayRelay` (``tests/delay_relay.py``, in a process
of its own) adds the delay instead, relaying each link's address to the server.

Needs root and the ``ip`` and ``tc`` programs (package ``iproute2``).
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import uuid
from dataclasses import dataclass, field

import pytest

from .conftest import IN_CI

HOW = ("run the test as root on Linux with iproute2 installed (`apt-get install iproute2`): it puts worker "
       "processes in network namespaces joined by veth pairs with `tc netem` delay")


def require_netns() -> None:
    """Skip (or, with CI=true, fail) unless namespaces can be made here: root, ``ip`` and ``tc``."""
    missing = [name for name in ("ip", "tc") if shutil.which(name) is None]
    why = None
    if missing:
        why = f"{' and '.join(missing)} not found"
    elif os.geteuid() != 0:
        why = "not running as root"
    if why is None:
        return
    message = f"network namespaces are not available ({why}): {HOW}"
    if IN_CI:
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


def _ip(*args: str) -> None:
    out = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)} failed: {out.stderr.strip()}")


def _tc(*args: str) -> None:
    out = subprocess.run(["tc", *args], capture_output=True, text=True, timeout=30, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"tc {' '.join(args)} failed: {out.stderr.strip()}")


@dataclass(slots=True)
class Host:
    """One namespace: its name, the address the root namespace has on its link, and its own address."""

    namespace: str
    server_address: str
    address: str

    def prefix(self) -> list[str]:
        """The command prefix that runs a program inside this namespace."""
        return ["ip", "netns", "exec", self.namespace]


@dataclass(slots=True)
class Namespaces:
    """``count`` namespaces, each a host ``rtt_ms`` away from the root namespace."""

    count: int
    rtt_ms: float = 1.0
    tag: str = field(default_factory=lambda: uuid.uuid4().hex[:5])
    netem: bool = True  # False once the kernel turned netem down: then a DelayRelay must add the delay
    hosts: list[Host] = field(default_factory=list)
    _links: list[str] = field(default_factory=list)
    _namespaces: list[str] = field(default_factory=list)

    def create(self) -> list[Host]:
        """Make the namespaces, links, addresses and delays (undone by :meth:`destroy` on failure)."""
        net = f"10.{random.randint(160, 239)}.{random.randint(0, 255)}"
        half = f"{self.rtt_ms / 2:g}ms"
        try:
            for i in range(self.count):
                ns, outer, inner = f"jl-{self.tag}-{i}", f"jlh{self.tag}{i}", f"jln{self.tag}{i}"
                server, own = f"{net}.{4 * i + 1}", f"{net}.{4 * i + 2}"
                _ip("netns", "add", ns)
                self._namespaces.append(ns)
                _ip("link", "add", outer, "type", "veth", "peer", "name", inner)
                self._links.append(outer)
                _ip("link", "set", inner, "netns", ns)
                _ip("addr", "add", f"{server}/30", "dev", outer)
                _ip("link", "set", outer, "up")
                _ip("-n", ns, "addr", "add", f"{own}/30", "dev", inner)
                _ip("-n", ns, "link", "set", inner, "up")
                _ip("-n", ns, "link", "set", "lo", "up")
                if self.rtt_ms > 0 and self.netem:
                    try:
                        _tc("qdisc", "add", "dev", outer, "root", "netem", "delay", half)
                    except RuntimeError as exc:
                        if "unknown" not in str(exc):
                            raise
                        self.netem = False  # no sch_netem in this kernel: a DelayRelay adds the delay
                    else:
                        _ip("netns", "exec", ns, "tc", "qdisc", "add", "dev", inner, "root", "netem", "delay",
                            half)
                self.hosts.append(Host(ns, server, own))
        except BaseException:
            self.destroy()
            raise
        return self.hosts

    def destroy(self) -> None:
        """Remove every link and namespace made (deleting one end of a veth pair removes both)."""
        for link in self._links:
            subprocess.run(["ip", "link", "del", link], capture_output=True, timeout=30, check=False)
        for ns in self._namespaces:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30, check=False)
        self._links.clear()
        self._namespaces.clear()


class DelayRelay:
    """``tests/delay_relay.py`` listening on ``listen`` (``host:port`` each), forwarding to ``to`` with
    ``rtt_ms / 2`` of delay each way; the addresses of its clients are in :meth:`peers`."""

    def __init__(self, to: str, listen: list[str], rtt_ms: float, folder: str) -> None:
        self.peers_file = os.path.join(folder, "relay-peers")
        cmd = [sys.executable, os.path.join(os.path.dirname(__file__), "delay_relay.py"), "--to", to,
               "--delay-ms", f"{rtt_ms / 2:g}", "--peers", self.peers_file]
        for where in listen:
            cmd += ["--listen", where]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if line.strip() != "ready":
            self.stop()
            raise RuntimeError(f"the delay relay did not start (it said {line!r})")

    def peers(self) -> set[str]:
        """The addresses of every client the relay accepted so far."""
        try:
            with open(self.peers_file) as f:
                return set(f.read().split())
        except FileNotFoundError:
            return set()

    def stop(self) -> None:
        """Stop the relay process."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)
