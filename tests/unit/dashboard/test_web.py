"""The dashboard's pure parts: session cookies (signature, expiry, tampering), CSRF, safe redirects,
limit forms, job filters' default states, time formatting with zones, and the chart's minutes."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest
from starlette.requests import Request

from jobloom.core.errors import InvalidOption
from jobloom.core.options import RateLimit
from jobloom.core.types import Policy
from jobloom.dashboard.jobs import DEFAULT_STATES, filter_of, states_of
from jobloom.dashboard.limits import limits_of, rate_text
from jobloom.dashboard.overview import chart_data
from jobloom.dashboard.render import ago, seconds, when
from jobloom.dashboard.session import COOKIE, Sessions
from jobloom.dashboard.web import Form, local_path
from jobloom.housekeeping.stats import Figures, Stats
from jobloom.http.auth import Guard


def request(cookie: str | None = None, scheme: str = "http", headers: dict[str, str] | None = None) -> Request:
    raw = [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    if cookie is not None:
        raw.append((b"cookie", f"{COOKIE}={cookie}".encode()))
    return Request({"type": "http", "method": "GET", "path": "/", "headers": raw, "scheme": scheme,
                    "server": ("t", 80), "query_string": b""})


def open_sessions(**options: Any) -> Sessions:
    return Sessions(Guard(None, "off"), key=b"k" * 32, **options)  # type: ignore[arg-type]  # "off" reads no store


def test_a_session_cookie_is_signed_and_tampering_ends_it() -> None:
    sessions = open_sessions()
    cookie = asyncio.run(sessions.login(""))
    session = asyncio.run(sessions.read(request(cookie)))
    assert session is not None and session.allows("operate") and session.prefix is None
    prefix, issued, nonce, signature = cookie.split(".")
    for forged in (f"{prefix}.{issued}.{nonce}x.{signature}", f"{prefix}.{int(issued) + 1}.{nonce}.{signature}",
                   f"other.{issued}.{nonce}.{signature}", "garbage", ""):
        assert asyncio.run(sessions.read(request(forged))) is None, forged
    other_key = Sessions(Guard(None, "off"), key=b"x" * 32)  # type: ignore[arg-type]
    assert asyncio.run(other_key.read(request(cookie))) is None  # a restarted server's new key


def test_a_session_expires() -> None:
    sessions = open_sessions(ttl=-1.0)
    cookie = asyncio.run(sessions.login(""))
    assert asyncio.run(sessions.read(request(cookie))) is None


def test_the_csrf_token_is_the_sessions_own() -> None:
    sessions = open_sessions()
    one = asyncio.run(sessions.read(request(asyncio.run(sessions.login("")))))
    two = asyncio.run(sessions.read(request(asyncio.run(sessions.login("")))))
    assert one is not None and two is not None and one.csrf != two.csrf
    assert sessions.csrf_ok(one, request(), one.csrf)
    assert sessions.csrf_ok(one, request(headers={"X-CSRF-Token": one.csrf}), None)
    assert not sessions.csrf_ok(one, request(), two.csrf)
    assert not sessions.csrf_ok(one, request(), None)
    assert not sessions.csrf_ok(one, request(), "")


def test_the_cookie_flags() -> None:
    sessions = open_sessions()
    plain = sessions.cookie_header("v", request())
    assert "HttpOnly" in plain and "SameSite=Strict" in plain and "Secure" not in plain
    assert "; Secure" in sessions.cookie_header("v", request(scheme="https"))
    assert "Max-Age=0" in sessions.clear_header(request())


@pytest.mark.parametrize("target, expected", [
    ("/jobs?state=failed", "/jobs?state=failed"), ("//evil.example/x", "/"), ("https://evil.example", "/"),
    ("/\\evil", "/"), (None, "/"), ("jobs", "/"),
])
def test_redirects_stay_on_the_site(target: str | None, expected: str) -> None:
    assert local_path(target) == expected


def test_limit_forms() -> None:
    form = Form({"concurrency": ["3"], "key_concurrency": [""], "rate_limit": ["10/s burst 2"]})
    assert limits_of(form) == {"concurrency": 3, "key_concurrency": 1, "rate_limit": "10/s burst 2"}
    assert limits_of(Form({"concurrency": [""], "rate_limit": ["none"]})) == {"concurrency": None, "rate_limit": None}
    assert limits_of(Form({"concurrency": ["0"]})) == {"concurrency": 0}
    with pytest.raises(InvalidOption, match="concurrency"):
        limits_of(Form({"concurrency": ["-1"]}))
    assert rate_text(10.0, 2.0) == "10/s burst 2" and rate_text(1 / 60, 1.0) == "1/m"


def test_a_limit_form_changes_only_the_values_that_differ_from_those_in_force() -> None:
    policy = Policy(concurrency=2, key_concurrency=1, rate=RateLimit(5.0, 1.0))
    shown = {"concurrency": ["2"], "key_concurrency": ["1"], "rate_limit": [rate_text(5.0, 1.0)]}
    assert limits_of(Form(shown), policy) == {}
    assert limits_of(Form(shown | {"rate_limit": ["7/s"]}), policy) == {"rate_limit": "7/s"}
    assert limits_of(Form(shown | {"concurrency": [""]}), policy) == {"concurrency": None}
    odd = Policy(rate=RateLimit(0.3, 2.0))
    assert limits_of(Form({"rate_limit": [rate_text(0.3, 2.0)]}), odd) == {}
    assert limits_of(Form({"rate_limit": ["none"]}), odd) == {"rate_limit": None}
    assert limits_of(Form({"rate_limit": [""]}), Policy()) == {}


def test_a_blank_state_lists_unfinished_and_failed_jobs_through_their_indexes() -> None:
    assert states_of("") == DEFAULT_STATES and states_of("all") is None and states_of("failed") == "failed"
    assert "succeeded" not in DEFAULT_STATES and "skipped" not in DEFAULT_STATES
    assert filter_of({"binding": "B"}).states == tuple(s for s in filter_of({}).states or ())
    with pytest.raises(InvalidOption, match="state"):
        filter_of({"state": "nonsense"})


def test_times_carry_their_zone() -> None:
    moment = datetime(2026, 7, 1, 12, 0, tzinfo=UTC)
    assert when(moment) == "2026-07-01 12:00:00 UTC"
    assert when(moment, "Europe/Berlin") == "2026-07-01 14:00:00 Europe/Berlin (UTC+0200)"
    assert when(moment.timestamp()) == "2026-07-01 12:00:00 UTC"
    assert when(None) == "—" and when(moment, "Not/AZone") == "2026-07-01 12:00:00 UTC"
    assert seconds(0.25) == "250 ms" and seconds(4.2) == "4.2 s" and seconds(185) == "3 min 5 s"
    assert ago(moment, now=moment.timestamp() + 3) == "3 s ago"
    assert ago(moment, now=moment.timestamp() - 60) == "in 1 min 0 s"


def test_the_chart_has_every_minute_of_the_hour() -> None:
    since = datetime(2026, 7, 1, 12, 0, tzinfo=UTC)
    stats = Stats(since, Figures(), {}, [(datetime(2026, 7, 1, 12, 30, tzinfo=UTC), Figures(succeeded=4, p50=0.1))], 0)
    data = chart_data(stats, since.timestamp() + 3600)
    assert len(data["x"]) == 61 and data["range"] == [since.timestamp(), since.timestamp() + 3660]
    assert data["succeeded"][30] == 4 and sum(data["succeeded"]) == 4
    assert data["p50"][30] == 0.1 and data["p50"][0] is None


def test_a_limit_form_sets_a_rate_per_key_and_names_it_when_bad() -> None:
    policy = Policy(key_concurrency=2, key_rate=RateLimit(2.0, 1.0))
    shown = {"key_concurrency": ["2"], "key_rate_limit": [rate_text(2.0, 1.0)]}
    assert limits_of(Form(shown), policy) == {}
    assert limits_of(Form(shown | {"key_rate_limit": ["5/s burst 2"]}), policy) == {"key_rate_limit": "5/s burst 2"}
    assert limits_of(Form(shown | {"key_rate_limit": [""]}), policy) == {"key_rate_limit": None}
    with pytest.raises(InvalidOption, match="key_rate_limit"):
        limits_of(Form({"key_rate_limit": ["fast"]}), policy)


def test_an_offloaded_payload_and_result_are_shown_by_size_never_loaded() -> None:
    from jobloom.core.types import job_of
    from jobloom.dashboard.job import payload_text, result_value

    ref = f"jobloom-blob:1:{'a' * 32}:20000011"
    job = job_of((7, "Big", "succeeded", 1, 3, 0, None, None, "at_least_once", None, ref, ref, None, 0.0, None,
                  None, False, None, None, None, None, None, 0, None))
    assert payload_text(job) == (f"Offloaded to the blob store: 20000011 bytes (blob {'a' * 32}). "
                                 "Read it with app.get_job(7).")
    assert result_value(job) == payload_text(job)
