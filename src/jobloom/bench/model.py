"""What a benchmark reports: measurements, their targets, and the machine they were taken on."""

from __future__ import annotations

import os
import platform
import sqlite3
import subprocess
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import psutil  # type: ignore[import-untyped,unused-ignore]

Better = Literal["higher", "lower"]

# Targets on the reference machine (2 cores), per measurement key and store dialect.
TARGETS: dict[str, dict[str, float]] = {
    "enqueue.sequential": {"sqlite": 10_000, "postgres": 3_000},
    "enqueue.concurrent": {"sqlite": 30_000, "postgres": 15_000},
    "enqueue.many": {"sqlite": 150_000, "postgres": 60_000},
    "drain.p1": {"sqlite": 20_000, "postgres": 10_000},
    "drain.p1.rss": {"sqlite": 60, "postgres": 60},
    "drain.p2.rss": {"sqlite": 60, "postgres": 60},
    "latency.p50": {"sqlite": 1, "postgres": 2},
    "latency.p99": {"sqlite": 5, "postgres": 5},
    "limits.ratio": {"sqlite": 0.9, "postgres": 0.9},
    "limits.keys_ratio": {"sqlite": 0.8, "postgres": 0.8},  # 1,000 keys taking turns within 20 % of none
    "history.ratio": {"sqlite": 0.9, "postgres": 0.9},
    # ``jobloom worker APP`` with no flags (the defaults workload)
    "defaults.drain": {"sqlite": 30_000, "postgres": 15_000},
    "defaults.p50": {"sqlite": 0.5, "postgres": 1.5},
    "defaults.p99": {"sqlite": 2, "postgres": 4},
    "defaults.rss": {"sqlite": 60, "postgres": 60},
    "defaults.enqueue_ratio": {"postgres": 1.2},
}


@dataclass(slots=True)
class Measurement:
    """One number a workload measured (``value`` is ``None`` when it could not be measured).

    ``key`` is stable across runs (``drain.p1``), ``label`` is what a person reads, ``better`` says
    which direction is good, and ``details`` holds the parameters and raw figures behind it.
    """

    key: str
    label: str
    value: float | None
    unit: str
    better: Better = "higher"
    target: float | None = None
    note: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def met(self) -> bool | None:
        """Whether the target is met (``None`` without a target or a value)."""
        if self.target is None or self.value is None:
            return None
        return self.value >= self.target if self.better == "higher" else self.value <= self.target

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict, with ``met`` included."""
        return asdict(self) | {"met": self.met}


def with_target(m: Measurement, dialect: str) -> Measurement:
    """``m`` with the reference target for its key on this dialect, if there is one."""
    m.target = TARGETS.get(m.key, {}).get(dialect)
    return m


@dataclass(slots=True)
class Report:
    """The result of one ``jobloom bench`` run: one workload (or all) against one store."""

    workload: str
    dialect: str
    url: str
    params: dict[str, Any]
    measurements: list[Measurement]
    environment: dict[str, Any]
    started_at: str
    seconds: float

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "workload": self.workload, "dialect": self.dialect, "url": self.url, "params": self.params,
            "started_at": self.started_at, "seconds": round(self.seconds, 3),
            "environment": self.environment, "measurements": [m.as_dict() for m in self.measurements],
        }


def now_iso() -> str:
    """The current UTC time, ISO 8601 to the second."""
    return datetime.now(UTC).replace(microsecond=0).isoformat()


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _git(*args: str) -> str | None:
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(["git", "-C", str(here), *args], capture_output=True, text=True, timeout=5, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout


def _commit() -> tuple[str | None, list[str]]:
    """HEAD of the checkout jobloom runs from, and the package's files that differ from it."""
    commit = (_git("rev-parse", "--short=12", "HEAD") or "").strip() or None
    package = str(Path(__file__).resolve().parent.parent)
    status = _git("status", "--porcelain", "--", package) or ""
    changed = sorted(line[3:] for line in status.splitlines() if line[3:])
    return commit, changed


def environment(postgres_version: str | None = None) -> dict[str, Any]:
    """The machine and software the numbers were measured on."""
    mem = psutil.virtual_memory().total
    commit, changed = _commit()
    return {
        "cpu": _cpu_model(),
        "logical_cores": os.cpu_count(),
        "physical_cores": psutil.cpu_count(logical=False),
        "memory_gib": round(mem / 2**30, 1),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "postgres": postgres_version,
        "commit": commit,
        "uncommitted_changes": changed,
    }
