"""Option values: backoff delays, rate-limit parsing, and the checks that reject bad options clearly."""

from __future__ import annotations

import math
import random
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobloom.core.errors import InvalidOption, JobloomError
from jobloom.core.options import DELIVERIES, Backoff, RateLimit, concurrency, delivery, positive_int, seconds


class FixedRandom(random.Random):
    """A random source that always draws the same value."""

    def __init__(self, value: float) -> None:
        super().__init__()
        self.value = value

    def random(self) -> float:
        return self.value


# ---------------------------------------------------------------- Backoff


def test_default_backoff_is_the_designed_one() -> None:
    b = Backoff()
    assert (b.kind, b.base, b.factor, b.max, b.jitter) == ("exponential", 1.0, 2.0, 3600.0, "equal")
    assert Backoff.exponential() == b


def test_exponential_doubles_from_base() -> None:
    b = Backoff.exponential(jitter="none")
    assert [b.delay(n) for n in range(1, 8)] == [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0]
    c = Backoff.exponential(base=0.5, factor=3.0, jitter="none")
    assert [c.delay(n) for n in range(1, 5)] == [0.5, 1.5, 4.5, 13.5]


def test_exponential_is_capped_at_max() -> None:
    b = Backoff.exponential(jitter="none")
    assert b.delay(12) == 2048.0
    assert b.delay(13) == 3600.0
    assert b.delay(10_000) == 3600.0
    small = Backoff.exponential(base=1.0, factor=2.0, max=10.0, jitter="none")
    assert [small.delay(n) for n in range(1, 7)] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]


def test_fixed_waits_the_same_every_time() -> None:
    b = Backoff.fixed(5.0)
    assert b.kind == "fixed"
    assert b.jitter == "none"
    assert [b.delay(n) for n in (1, 2, 3, 50)] == [5.0, 5.0, 5.0, 5.0]


def test_equal_jitter_is_half_fixed_half_random() -> None:
    b = Backoff.exponential(base=4.0, jitter="equal")  # attempt 2: 8 s before jitter
    assert b.delay(2, FixedRandom(0.0)) == 4.0
    assert b.delay(2, FixedRandom(0.5)) == 6.0
    assert b.delay(2, FixedRandom(0.999)) == pytest.approx(7.996)


def test_full_jitter_is_uniform_up_to_the_delay() -> None:
    b = Backoff.exponential(base=4.0, jitter="full")
    assert b.delay(2, FixedRandom(0.0)) == 0.0
    assert b.delay(2, FixedRandom(0.25)) == 2.0
    assert b.delay(2, FixedRandom(0.999)) == pytest.approx(7.992)


def test_fixed_with_jitter() -> None:
    assert Backoff.fixed(10.0, jitter="equal").delay(3, FixedRandom(0.2)) == 6.0
    assert Backoff.fixed(10.0, jitter="full").delay(3, FixedRandom(0.2)) == 2.0


@pytest.mark.parametrize("jitter, low", [("equal", 0.5), ("full", 0.0)])
def test_jitter_stays_in_bounds_and_follows_the_seed(jitter: str, low: float) -> None:
    b = Backoff.exponential(base=1.0, factor=2.0, max=100.0, jitter=jitter)
    plain = Backoff.exponential(base=1.0, factor=2.0, max=100.0, jitter="none")
    rng = random.Random(1234)
    delays = [b.delay(n, rng) for n in range(1, 40)]
    for n, d in enumerate(delays, start=1):
        raw = plain.delay(n)
        assert low * raw <= d <= raw
    # the same seed gives the same delays; the delays are really random
    again = random.Random(1234)
    assert [b.delay(n, again) for n in range(1, 40)] == delays
    capped = delays[10:]  # all at the 100 s cap before jitter
    assert len(set(capped)) == len(capped)


def spec_delay_before_jitter(b: Backoff, attempt: int) -> float:
    """``base`` (fixed) or ``min(max, base * factor ** (attempt - 1))``, worked out in logs so it cannot overflow."""
    if b.kind == "fixed":
        return b.base
    if b.base == 0 or b.max == 0:
        return 0.0
    log_raw = math.log(b.base) + (attempt - 1) * math.log(b.factor)
    return b.max if log_raw >= math.log(b.max) else math.exp(log_raw)


@settings(max_examples=300, deadline=None)
@given(
    kind=st.sampled_from(["exponential", "fixed"]),
    base=st.floats(0, 1e6),
    factor=st.floats(1, 1e12),
    cap=st.floats(0, 1e7),
    jitter=st.sampled_from(["equal", "full", "none"]),
    attempt=st.integers(1, 10_000),
    seed=st.integers(0, 2**32),
)
def test_any_valid_backoff_gives_its_delay_within_the_jitter_bounds(
    kind: str, base: float, factor: float, cap: float, jitter: str, attempt: int, seed: int
) -> None:
    b = Backoff(kind, base, factor, cap, jitter)  # type: ignore[arg-type]
    raw = spec_delay_before_jitter(b, attempt)
    d = b.delay(attempt, random.Random(seed))
    slack = 1e-9 * max(1.0, raw)
    low = {"none": raw, "equal": raw / 2, "full": 0.0}[jitter]
    assert low - slack <= d <= raw + slack


@pytest.mark.parametrize(
    "kwargs, option",
    [
        ({"kind": "linear"}, "backoff.kind"),
        ({"base": -1.0}, "backoff.base"),
        ({"base": float("nan")}, "backoff.base"),
        ({"factor": 0.5}, "backoff.factor"),
        ({"max": -3.0}, "backoff.max"),
        ({"jitter": "some"}, "backoff.jitter"),
    ],
)
def test_bad_backoff_is_refused_naming_the_field(kwargs: dict[str, object], option: str) -> None:
    with pytest.raises(InvalidOption) as info:
        Backoff(**kwargs)  # type: ignore[arg-type]
    assert info.value.option == option
    assert f"invalid {option}:" in str(info.value)
    assert "expected" in str(info.value)


# ---------------------------------------------------------------- RateLimit


@pytest.mark.parametrize(
    "text, rate, burst",
    [
        ("10/s", 10.0, 1.0),
        ("600/m", 10.0, 1.0),
        ("3600/h", 1.0, 1.0),
        ("5/2s", 2.5, 1.0),
        ("30/10m", 0.05, 1.0),
        ("1/ms", 1000.0, 1.0),
        ("0.5/s", 0.5, 1.0),
        ("3/1.5s", 2.0, 1.0),
        ("100/s burst 20", 100.0, 20.0),
        ("600/m burst 60", 10.0, 60.0),
        ("5/2s burst 3", 2.5, 3.0),
        ("  10 / s  ", 10.0, 1.0),
        ("10/s   burst   4", 10.0, 4.0),
    ],
)
def test_rate_limit_forms(text: str, rate: float, burst: float) -> None:
    parsed = RateLimit.parse(text)
    assert parsed.rate == pytest.approx(rate)
    assert parsed.burst == burst


def test_a_rate_limit_passes_through_parse() -> None:
    limit = RateLimit(rate=3.0, burst=2.0)
    assert RateLimit.parse(limit) is limit


def test_default_burst_is_one() -> None:
    assert RateLimit(rate=5.0).burst == 1.0


@pytest.mark.parametrize(
    "bad",
    [
        "fast",
        "",
        "10",
        "10/",
        "/s",
        "10/x",
        "10/sec",
        "10/S",
        "ten/s",
        "-1/s",
        "10/s burst",
        "10/s burst 2.5",
        "10/s burst -1",
        "10 per second",
        "10/s/s",
    ],
)
def test_malformed_rate_limit_names_the_option_and_the_accepted_form(bad: str) -> None:
    with pytest.raises(InvalidOption) as info:
        RateLimit.parse(bad)
    message = str(info.value)
    assert info.value.option == "rate_limit"
    assert info.value.value == bad
    assert message.startswith(f"invalid rate_limit: {bad!r}; expected ")
    for form in ("'10/s'", "'600/m'", "'5/2s'", "burst"):
        assert form in message


@pytest.mark.parametrize(
    "bad, expected",
    [
        ("0/s", "a positive count and period"),
        ("10/0s", "a positive count and period"),
        ("0.0/m", "a positive count and period"),
        ("10/s burst 0", "a burst of at least 1"),
    ],
)
def test_out_of_range_rate_limit_says_what_is_needed(bad: str, expected: str) -> None:
    with pytest.raises(InvalidOption) as info:
        RateLimit.parse(bad)
    assert info.value.option == "rate_limit"
    assert str(info.value) == f"invalid rate_limit: {bad!r}; expected {expected}"


@pytest.mark.parametrize("bad", [10, 2.5, None, ["10/s"]])
def test_a_rate_limit_that_is_not_text_is_refused(bad: object) -> None:
    with pytest.raises(InvalidOption, match="invalid rate_limit") as info:
        RateLimit.parse(bad)  # type: ignore[arg-type]
    assert "'10/s'" in str(info.value)


def test_rate_limit_errors_name_the_binding() -> None:
    with pytest.raises(InvalidOption) as info:
        RateLimit.parse("fast", binding="emails.send")
    assert str(info.value).startswith("invalid rate_limit on emails.send: 'fast'; expected ")
    assert isinstance(info.value, JobloomError)


# ---------------------------------------------------------------- simple checks


def test_positive_int() -> None:
    assert positive_int("concurrency", 3) == 3
    assert positive_int("concurrency", 1) == 1
    assert positive_int("concurrency", None) is None
    for bad in (0, -2, True, 1.5, "3"):
        with pytest.raises(InvalidOption) as info:
            positive_int("concurrency", bad, "reports.build")
        assert str(info.value) == (
            f"invalid concurrency on reports.build: {bad!r}; expected an integer from 1 to 2147483647 or None"
        )
    with pytest.raises(InvalidOption, match=r"expected an integer from 1 to 2147483647$"):
        positive_int("max_attempts", None, allow_none=False)
    with pytest.raises(InvalidOption, match=r"max_attempts: 2147483648; expected an integer from 1 to 2147483647"):
        positive_int("max_attempts", 2**31)


def test_concurrency_takes_zero_and_none() -> None:
    assert concurrency(0) == 0
    assert concurrency(5) == 5
    assert concurrency(None) is None
    for bad in (-1, True, 1.5, "0"):
        with pytest.raises(InvalidOption) as info:
            concurrency(bad, "reports.build")
        assert str(info.value) == (
            f"invalid concurrency on reports.build: {bad!r}; expected an integer from 0 to 2147483647 or None"
        )


def test_seconds() -> None:
    assert seconds("timeout", 5) == 5.0
    assert seconds("timeout", 0) == 0.0
    assert seconds("timeout", 2.5) == 2.5
    assert seconds("timeout", timedelta(minutes=2)) == 120.0
    assert seconds("timeout", None) is None
    for bad in (-1, -0.5, True, "5", timedelta(seconds=-1), float("nan"), float("inf"), -float("inf"), 10**400):
        with pytest.raises(InvalidOption, match=r"invalid timeout: .*; expected seconds >= 0"):
            seconds("timeout", bad)
    with pytest.raises(InvalidOption):
        seconds("timeout", None, allow_none=False)


def test_delivery() -> None:
    assert DELIVERIES == ("at_least_once", "at_most_once")
    assert delivery("at_least_once") == "at_least_once"
    assert delivery("at_most_once") == "at_most_once"
    for bad in ("exactly_once", "", None, "AT_MOST_ONCE"):
        with pytest.raises(InvalidOption) as info:
            delivery(bad, "payments.charge")
        assert str(info.value) == (
            f"invalid delivery on payments.charge: {bad!r}; expected 'at_least_once' or 'at_most_once'"
        )
