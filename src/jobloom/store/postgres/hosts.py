"""Several servers in one URL (a primary and its standbys): connecting to the writable one, and never to
an old primary that came back after a standby was promoted (split brain).

A URL may name several servers (``postgresql://u@h1:5432,h2:5432/db?target_session_attrs=read-write``);
libpq tries them in order and ``target_session_attrs=read-write`` passes over a standby. That alone
does not protect from split brain: an old primary restarted after its standby was promoted is
writable again, and being first in the URL it would be chosen, while the promoted server holds the
newer writes. So when a URL names more than one server, each new connection first looks at every
server of the URL (at once, in parallel) and reads its timeline (a promotion starts a new one: the
first 8 hex digits of the current WAL file's name); a writable server on a timeline older than one
seen is *fenced*: not used by this process unless it is found on the newest timeline again. Pooled
connections live long (and the pool's are checked and replaced after a lost one), so this costs a
few connections per failover, not per transaction.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, ClassVar

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.rows import TupleRow

log = logging.getLogger("jobloom.store.postgres")

TIMELINE = ("SELECT pg_is_in_recovery(), CASE WHEN pg_is_in_recovery() THEN 0 ELSE "
            "('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int END")
"""Whether the server is a standby, and the timeline it writes on (0 for a standby)."""
PROBE_TIMEOUT = 3
"""Seconds one server may take to answer the probe at open."""


def servers(url: str) -> list[tuple[str, str]]:
    """The (host, port) pairs a URL names, in order (libpq's rules: one port for all, or one per host)."""
    try:
        info = conninfo_to_dict(url)
    except psycopg.Error:
        return []
    hosts = str(info.get("host") or "").split(",")
    ports = str(info.get("port") or "").split(",")
    if len(ports) == 1:
        ports = ports * len(hosts)
    if len(ports) != len(hosts):
        return []
    return [(h, p or "5432") for h, p in zip(hosts, ports, strict=True)]


class Servers:
    """The servers of one store's URL, the newest timeline seen on a writable one, and those fenced."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.all = servers(url)
        self.fenced: set[tuple[str, str]] = set()
        self.timeline = 0

    @property
    def several(self) -> bool:
        """Whether the URL names more than one server (only then is anything checked)."""
        return len(self.all) > 1

    def single(self, server: tuple[str, str]) -> str:
        """The URL narrowed to one server."""
        return make_conninfo(self.url, host=server[0], port=server[1])

    def judge(self, server: tuple[str, str], standby: bool, timeline: int) -> bool:
        """Whether ``server`` may be used; a writable one behind the newest timeline seen is fenced."""
        if standby:
            return True
        if timeline < self.timeline:
            if server not in self.fenced:
                self.fenced.add(server)
                log.error("PostgreSQL at %s:%s is writable on timeline %d, behind timeline %d of a promoted "
                          "server: it is an old primary (split brain), and this process will not use it",
                          server[0], server[1], timeline, self.timeline)
            return False
        self.timeline = timeline
        self.fenced.discard(server)  # rebuilt and promoted again: on the newest timeline, usable
        return True

    async def probe(self) -> None:
        """Look at every server at once (before each new connection: a failover may have happened since
        the last): the newest timeline among the writable ones is the one in force, and writable servers
        behind it are fenced. A server that does not answer is judged when it does."""
        answers = await asyncio.gather(*(self._look(server) for server in self.all))
        seen = [a for a in answers if a is not None]
        self.timeline = max([self.timeline, *(t for _, standby, t in seen if not standby)])
        for server, standby, timeline in seen:
            self.judge(server, standby, timeline)

    async def _look(self, server: tuple[str, str]) -> tuple[tuple[str, str], bool, int] | None:
        try:
            conn = await psycopg.AsyncConnection.connect(
                make_conninfo(self.single(server), target_session_attrs="any"), autocommit=True,
                connect_timeout=PROBE_TIMEOUT)
        except psycopg.Error:
            return None
        try:
            standby, timeline = await _read(conn)
            return server, standby, timeline
        except psycopg.Error:
            return None
        finally:
            await conn.close()


async def _read(conn: psycopg.AsyncConnection[Any]) -> tuple[bool, int]:
    cur = await conn.execute(TIMELINE)
    row = await cur.fetchone()
    assert row is not None
    return bool(row[0]), int(row[1])


class FencedConnection(psycopg.AsyncConnection[TupleRow]):
    """A connection made to the URL's servers in order, skipping fenced ones and checking the timeline of
    the one it gets (a subclass per store sets :attr:`servers`)."""

    servers: ClassVar[Servers]

    @classmethod
    async def connect(cls, conninfo: str = "", **kwargs: Any) -> FencedConnection:
        """Connect as libpq would, to the first server of the URL that is up, fits
        ``target_session_attrs`` and is not fenced."""
        known = cls.servers
        await known.probe()  # every new connection: a process that has seen only the old primary learns here
        if "target_session_attrs" not in conninfo_to_dict(conninfo):  # a job store needs a writable server
            conninfo = make_conninfo(conninfo, target_session_attrs="read-write")
        failures: list[str] = []
        for server in known.all:
            if server in known.fenced:
                continue
            try:
                conn = await super().connect(make_conninfo(conninfo, host=server[0], port=server[1]), **kwargs)
            except psycopg.OperationalError as exc:
                failures.append(f"{server[0]}:{server[1]}: {' '.join(str(exc).split())}")
                continue
            try:
                standby, timeline = await _read(conn)
            except BaseException:
                await conn.close()
                raise
            if known.judge(server, standby, timeline):
                return conn
            await conn.close()
            failures.append(f"{server[0]}:{server[1]}: fenced (an old primary)")
        raise psycopg.OperationalError("no usable PostgreSQL server: " + "; ".join(failures or ["all fenced"]))


def connection_class(known: Servers) -> type[FencedConnection]:
    """A :class:`FencedConnection` class for one store's servers."""
    return type("JobloomConnection", (FencedConnection,), {"servers": known})
