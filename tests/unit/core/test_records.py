"""A binding's stored record to the policy the coordinator applies."""

from __future__ import annotations

import json

import pytest

from jobloom.core.errors import InvalidOption
from jobloom.core.options import Backoff, RateLimit
from jobloom.core.records import backoff_json, policy_from_row
from jobloom.core.rows import PolicyRow
from jobloom.core.types import Bucket, Policy


def row(**fields: object) -> PolicyRow:
    base: dict[str, object] = {
        "concurrency": None, "key_concurrency": 1, "rate": None, "burst": None, "priority_aging": 60.0,
        "backoff": backoff_json(Backoff()), "overrides": None, "tokens": None, "tokens_at": None, "paused": False,
        "batch_size": None, "batch_wait": None,
    }
    return PolicyRow(**(base | fields))  # type: ignore[arg-type]


def test_no_record_is_the_default_policy() -> None:
    assert policy_from_row(None) == (Policy(), None, Backoff())


def test_overrides_take_the_place_of_the_code_values() -> None:
    overrides = {"concurrency": 3, "key_concurrency": 2, "rate_limit": "10/s", "priority_aging": 5.0}
    policy, _, _ = policy_from_row(row(concurrency=9, rate=1.0, overrides=json.dumps(overrides)))
    assert policy == Policy(concurrency=3, key_concurrency=2, rate=RateLimit(10.0, 1.0), priority_aging=5.0)
    lifted, _, _ = policy_from_row(row(concurrency=9, rate=1.0, overrides=json.dumps({"concurrency": None,
                                                                                     "rate_limit": None})))
    assert lifted.concurrency is None and lifted.rate is None


def test_the_same_record_gives_the_same_policy_and_a_bucket_of_its_own() -> None:
    # the policy is parsed once per distinct record; the bucket is the row's state and is made anew
    a = policy_from_row(row(rate=2.0, burst=4.0, tokens=1.5, tokens_at=100.0))
    b = policy_from_row(row(rate=2.0, burst=4.0, tokens=1.5, tokens_at=100.0))
    assert a == b and a[1] is not b[1]
    assert a[1] == Bucket(1.5, 100.0)
    changed = policy_from_row(row(rate=2.0, burst=4.0, tokens=0.5, tokens_at=101.0, paused=True))
    assert changed[0].paused and changed[1] == Bucket(0.5, 101.0)


def test_a_bad_override_fails_every_time_it_is_read() -> None:
    bad = row(overrides=json.dumps({"rate_limit": "fast"}))
    for _ in range(2):  # an error is not remembered as a policy
        with pytest.raises(InvalidOption, match="rate_limit"):
            policy_from_row(bad)
