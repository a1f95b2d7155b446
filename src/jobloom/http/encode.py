"""Jobs, attempts, runs and schedules as JSON bytes, written directly (the hot path of the API).

A job's payload and result are stored as JSON text already; they are spliced into the response as
they are, never decoded and encoded again (one offloaded to the blob store is the string of its
reference, ``"jobloom-blob:1:<id>:<size>"``). The shapes are those of :mod:`jobloom.http.schemas`.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from datetime import UTC, datetime
from typing import Any

from jobloom.core.blobref import PREFIX
from jobloom.core.types import Attempt, Job, NodeState, Run
from jobloom.housekeeping.stats import Stats

_dumps = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode


def _str(value: str | None) -> str:
    return "null" if value is None else _dumps(value)


def _ts(ts: float | None) -> str:
    return "null" if ts is None else _iso(ts)


@functools.lru_cache(maxsize=1024)
def _iso(ts: float) -> str:  # the jobs of one batch share their times: each is formatted once
    return '"' + datetime.fromtimestamp(ts, UTC).isoformat() + '"'


def _dt(value: datetime | None) -> str:
    return "null" if value is None else '"' + value.isoformat() + '"'


def job_json(job: Job) -> str:
    """One job as a JSON object (text)."""
    return (
        f'{{"id":{job.id},"binding":{_str(job.binding)},"state":"{job.state}","attempt":{job.attempt},'
        f'"attempts_spent":{job.attempts_spent},"max_attempts":{job.max_attempts},"priority":{job.priority},"delivery":"{job.delivery}",'
        f'"payload":{_stored(job.payload_json)},"result":{_stored(job.result_json)},"error":{_str(job.error)},'
        f'"unique_key":{_str(job.unique_key)},"concurrency_key":{_str(job.concurrency_key)},'
        f'"run_at":{_ts(job.run_ts)},"created_at":{_ts(job.created_ts)},"started_at":{_ts(job.started_ts)},'
        f'"finished_at":{_ts(job.finished_ts)},"cancel_requested":{"true" if job.cancel_requested else "false"},'
        f'"run_id":{_str(job.run_id)},"node":{_str(job.node)},"tags":{job.tags_json or "[]"},'
        f'"meta":{job.meta_json or "{}"},"progress":{_progress(job)},'
        f'"parent_id":{"null" if job.parent_id is None else job.parent_id}}}'
    )


def _stored(text: str | None) -> str:
    """A stored payload or result as JSON: itself, or the string of its blob reference when it is
    offloaded (``GET /v1/jobs/{id}`` reads the blob; lists never do)."""
    if not text:
        return "null"
    return _dumps(text) if text.startswith(PREFIX) else text


def _progress(job: Job) -> str:
    if job.progress_json is None:
        return "null"
    p = job.progress
    if p is None:
        return "null"
    return _dumps({"fraction": p.fraction, "message": p.message, "at": p.at.isoformat(), "attempt": p.attempt})


def jobs_json(jobs: list[Job], key: str = "jobs", extra: str = "") -> bytes:
    """``{"jobs": [...]}`` (plus ``extra``, a JSON fragment of further members) as bytes."""
    return f'{{"{key}":[{",".join(job_json(j) for j in jobs)}]{extra}}}'.encode()


def attempt_json(a: Attempt) -> str:
    """One attempt as a JSON object (text)."""
    return (
        f'{{"job_id":{a.job_id},"attempt":{a.attempt},"worker":{_str(a.worker)},"started_at":{_dt(a.started_at)},'
        f'"finished_at":{_dt(a.finished_at)},"outcome":{_str(a.outcome)},"error":{_str(a.error)},'
        f'"traceback":{_str(a.traceback)},"reported_outcome":{_str(a.reported_outcome)},'
        f'"reported_at":{_dt(a.reported_at)}}}'
    )


def plain(value: Any) -> Any:
    """Dataclasses, datetimes and containers as JSON-ready values (datetimes in ISO 8601)."""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, NodeState):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def run_dict(run: Run) -> dict[str, Any]:
    """A run as a JSON-ready dict."""
    out: dict[str, Any] = plain(run)
    return out


def stats_dict(st: Stats) -> dict[str, Any]:
    """``App.stats`` as ``GET /v1/stats`` (and ``jobloom stats --json``) writes it: a JSON-ready dict."""
    return {"since": plain(st.since), "total": plain(st.total), "bindings": plain(st.bindings),
            "minutes": [{"minute": plain(m), "figures": plain(f)} for m, f in st.minutes],
            "pending_events": st.pending_events}


def diagnosis_dict(d: Any) -> dict[str, Any]:
    """Why a job is not running (``jobloom.app.diagnose.Diagnosis``) as ``GET /v1/jobs/{id}/why`` (and
    ``jobloom jobs why --json``) writes it: its fields, and ``ready``."""
    out: dict[str, Any] = plain(d)
    out["ready"] = d.ready
    return out


def dumps(value: Any) -> bytes:
    """JSON bytes of a JSON-ready value."""
    return _dumps(value).encode()
