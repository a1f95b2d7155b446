"""Issue 28, item 7: every malformed credential is refused with the documented error, never raised as
something else (a 500), and an option that would make a check fail open is refused."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

import jobloom
from jobloom.core.signing import signature_header
from tests.security.conftest import httpx, serve, store_for

SECRET = "s" * 32


def headers(value: str) -> dict[str, str]:
    return {"Jobloom-Signature": value, "Idempotency-Key": "1:1"}


@pytest.mark.parametrize("value", [
    "t={t},v2=é" + "0" * 63,  # a non-ASCII signature: hmac.compare_digest refuses str with it
    "t={t},v2=\udcff",  # a lone surrogate, as a server may hand over undecodable bytes
    "t=\u0661\u0667\u0660\u0660,v2=00",  # digits int() would take, but not ASCII
    "t=1_700_000_000,v2=00",
    "t=,v2=00",
    "v2=00",
    "t={t}",
    "garbage",
])
def test_a_malformed_signature_is_refused_as_invalid(value: str) -> None:
    with pytest.raises(jobloom.InvalidSignature):
        jobloom.verify_signature(SECRET, headers(value.replace("{t}", str(int(time.time())))), b"{}")


@pytest.mark.parametrize("tolerance", [float("nan"), float("inf"), -1.0])
def test_a_tolerance_that_would_accept_any_time_is_refused(tolerance: float) -> None:
    good = signature_header(SECRET.encode(), b"{}", idempotency_key="1:1")
    with pytest.raises(jobloom.InvalidOption, match="tolerance"):
        jobloom.verify_signature(SECRET, headers(good), b"{}", tolerance=tolerance)


def test_a_signature_made_long_ago_is_refused_and_a_fresh_one_verifies() -> None:
    old = signature_header(SECRET.encode(), b"{}", timestamp=int(time.time()) - 3600, idempotency_key="1:1")
    with pytest.raises(jobloom.InvalidSignature, match="tolerance"):
        jobloom.verify_signature(SECRET, headers(old), b"{}")
    fresh = signature_header(SECRET.encode(), b"{}", idempotency_key="1:1")
    assert jobloom.verify_signature(SECRET, headers(fresh), b"{}")


def test_a_non_ascii_session_cookie_or_csrf_token_is_refused_not_a_500(store: str, tmp_path: Path) -> None:
    with store_for(store, tmp_path) as url, serve(url, tmp_path, tokens={"ops": "read,operate"}) as s:
        forged = "ops.1." + str(int(time.time())) + ".nonce.é"  # any shape: it must never reach a 500
        for cookie in (forged, "a.b.c.\xe9", "\xe9\xe9\xe9"):
            r = httpx.get(f"{s.url}/jobs", headers={"cookie": f"jobloom_session={cookie}".encode("latin-1")},
                          follow_redirects=False)
            assert r.status_code == 303, (cookie, r.status_code, r.text[:200])  # to the login page
        r = httpx.post(f"{s.url}/v1/jobs", headers={"authorization": "Bearer jlt_\xe9".encode("latin-1")},
                       json={"binding": "Echo", "payload": 1})
        assert r.status_code == 401, r.text
        r = httpx.post(f"{s.url}/login", data={"token": "x", "csrf": "\xe9"},
                       headers={"cookie": "jobloom_login=\xe9".encode("latin-1")}, follow_redirects=False)
        assert r.status_code == 403, r.text
