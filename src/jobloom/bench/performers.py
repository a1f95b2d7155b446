"""The performers that benchmarks run, and the app that bench worker processes load.

Worker processes are started as ``jobloom worker jobloom.bench.performers:worker_app`` (or
``:flow_app``, the same with the diamond and fan-out flows, or ``:latency_app``, with :class:`Stamped`
alone); the store they use comes from ``JOBLOOM_BENCH_URL`` and ``JOBLOOM_BENCH_OPTIONS`` (JSON store
options, e.g. the PostgreSQL ``schema``), set by the bench for each private store it creates. Flows
are in an app of their own so that the other workloads measure a worker without flow housekeeping,
and so is the latency benchmark's performer, so that no other workload's worker serves its binding.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from jobloom.app.facade import App
from jobloom.engine.performer import Performer
from jobloom.flows.flow import Flow

URL_ENV = "JOBLOOM_BENCH_URL"
OPTIONS_ENV = "JOBLOOM_BENCH_OPTIONS"
APP_REF = "jobloom.bench.performers:worker_app"
FLOW_APP_REF = "jobloom.bench.performers:flow_app"
LATENCY_APP_REF = "jobloom.bench.performers:latency_app"
NOOP_APP_REF = "jobloom.bench.performers:noop_app"
# High enough never to bind at any worker concurrency a benchmark uses: they measure the checks only.
NEVER_BINDS = 1_000_000
KEYS = 100


def tenant(payload: dict[str, Any]) -> str:
    """The concurrency key of a bench payload: one of ``KEYS`` tenants."""
    return f"t{int(payload.get('i', 0)) % KEYS}"


class Noop(Performer[dict[str, Any], None]):
    """A job that does nothing: what is measured is jobloom's own cost per job."""

    async def perform(self, payload: dict[str, Any]) -> None:
        """Return at once."""
        return None


class Limited(Performer[dict[str, Any], None]):
    """:class:`Noop` with a concurrency limit, a per-key limit and a rate limit that never bind."""

    concurrency = NEVER_BINDS
    concurrency_key = staticmethod(tenant)
    key_concurrency = NEVER_BINDS
    rate_limit = f"{NEVER_BINDS}/s burst {NEVER_BINDS}"

    async def perform(self, payload: dict[str, Any]) -> None:
        """Return at once."""
        return None


ACTIVE_KEYS = 1_000
"""The keys a :class:`Turns` binding's jobs spread over in ``jobloom bench limits``."""


def many_keys(payload: dict[str, Any]) -> str | None:
    """The concurrency key of a :class:`Turns` bench payload: one of ``ACTIVE_KEYS``, None with ``"no_key"``."""
    return None if payload.get("no_key") else f"k{int(payload.get('i', 0)) % ACTIVE_KEYS}"


class Turns(Performer[dict[str, Any], None]):
    """:class:`Noop` whose keys take turns (``fairness = "round_robin"``), with a rate per key and a
    per-key limit that never bind: what turns and key buckets cost a dispatch."""

    concurrency_key = staticmethod(many_keys)
    key_concurrency = NEVER_BINDS
    fairness = "round_robin"
    key_rate_limit = f"{NEVER_BINDS}/s burst {NEVER_BINDS}"

    async def perform(self, payload: dict[str, Any]) -> None:
        """Return at once."""
        return None


class Capped(Performer[dict[str, Any], None]):
    """:class:`Noop` with ``concurrency = 50``: a limit that binds as soon as workers offer more slots
    (``benchmarks/processes.py`` drains it with 1, 2 and 4 worker processes)."""

    concurrency = 50

    async def perform(self, payload: dict[str, Any]) -> None:
        """Return at once."""
        return None


class Stamped(Performer[dict[str, Any], float]):
    """A no-op that returns the moment its ``perform`` began (epoch seconds).

    The latency benchmark measures from enqueue to this moment: the job's ``started_at`` is the
    moment its worker's cycle claimed it, which comes before the job runs."""

    async def perform(self, payload: dict[str, Any]) -> float:
        """Return the time now."""
        return time.time()


PERFORMERS: list[type[Performer[Any, Any]]] = [Noop, Limited, Capped, Turns]


def diamond() -> Flow:
    """The diamond flow: ``a``, then ``b`` and ``c`` side by side, then ``d``; every node a no-op."""
    flow = Flow("bench-diamond")
    a = flow.node("a", Noop)
    b = flow.node("b", Noop, after=[a])
    c = flow.node("c", Noop, after=[a])
    flow.node("d", Noop, after=[b, c])
    return flow


DIAMOND = diamond()


def fan_out() -> Flow:
    """A fan-out: one map node over ``input["n"]`` no-op children."""
    flow = Flow("bench-map")
    flow.map("each", Noop, over=lambda inp, up: [{"i": i} for i in range(int(inp["n"]))])
    return flow


MAP = fan_out()


def bench_app(url: str, options: dict[str, Any] | None = None, *, flows: bool = False, latency: bool = False,
              **kwargs: Any) -> App:
    """An app with the bench performers on ``url`` (store ``options`` as for :class:`App`); with
    ``latency``, :class:`Stamped` alone."""
    performers = [Stamped] if latency else PERFORMERS
    return App(url, performers=performers, flows=[DIAMOND, MAP] if flows else [], **(options or {}), **kwargs)


def _from_env(flows: bool = False, latency: bool = False) -> App:
    url = os.environ.get(URL_ENV)
    if not url:
        raise RuntimeError(f"{URL_ENV} is not set: bench worker processes are started by `jobloom bench`")
    return bench_app(url, json.loads(os.environ.get(OPTIONS_ENV) or "{}"), flows=flows, latency=latency,
                     auto_migrate=False)


def worker_app() -> App:
    """The app of a bench worker process, on the store named by the environment."""
    return _from_env(flows=False)


def flow_app() -> App:
    """:func:`worker_app` with the diamond and fan-out flows."""
    return _from_env(flows=True)


def latency_app() -> App:
    """:func:`worker_app` with :class:`Stamped` alone, for the latency benchmark."""
    return _from_env(latency=True)


def noop_app() -> App:
    """An app with :class:`Noop` alone, on the store named by the environment (the ``defaults`` drain:
    ``jobloom worker`` with no ``--bindings``, as a user runs it)."""
    url = os.environ.get(URL_ENV)
    if not url:
        raise RuntimeError(f"{URL_ENV} is not set: bench worker processes are started by `jobloom bench`")
    return App(url, performers=[Noop], auto_migrate=False, **json.loads(os.environ.get(OPTIONS_ENV) or "{}"))
