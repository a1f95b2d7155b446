"""Option values: backoff policies, rate limits and their parsing, with clear errors for bad input."""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass
from typing import Literal

from jobloom.core.errors import InvalidOption

Delivery = Literal["at_least_once", "at_most_once"]
DELIVERIES: tuple[str, ...] = ("at_least_once", "at_most_once")
MIN_INT, MAX_INT = -(2**31), 2**31 - 1
"""The range of ``priority`` and ``max_attempts`` (a 32-bit integer column)."""
MAX_DELAY = 10.0**10
"""Seconds from now at most (about 317 years) for a delay, a retry, a sleep or a deadline: a moment
further on could not be shown as a datetime."""
MIN_EPOCH, MAX_EPOCH = -62135596800.0, 253402300799.0
"""The epoch seconds of a datetime: from year 1 to the end of year 9999 (UTC)."""


@dataclass(frozen=True, slots=True)
class Backoff:
    """Spacing between attempts.

    ``kind="exponential"`` waits ``base * factor ** (attempt - 1)`` seconds, capped at ``max``;
    ``kind="fixed"`` waits ``base`` seconds every time. ``jitter`` is ``"equal"`` (half fixed, half
    random), ``"full"`` (uniform in ``[0, delay]``) or ``"none"``.
    """

    kind: Literal["exponential", "fixed"] = "exponential"
    base: float = 1.0
    factor: float = 2.0
    max: float = 3600.0
    jitter: Literal["equal", "full", "none"] = "equal"

    def __post_init__(self) -> None:
        if self.kind not in ("exponential", "fixed"):
            raise InvalidOption("backoff.kind", self.kind, "'exponential' or 'fixed'")
        finite("backoff.base", self.base)
        finite("backoff.factor", self.factor, minimum=1.0)
        finite("backoff.max", self.max)
        if self.jitter not in ("equal", "full", "none"):
            raise InvalidOption("backoff.jitter", self.jitter, "'equal', 'full' or 'none'")

    @classmethod
    def exponential(
        cls, base: float = 1.0, factor: float = 2.0, max: float = 3600.0, jitter: str = "equal"
    ) -> Backoff:
        """Exponential backoff: ``base * factor ** (attempt - 1)``, capped at ``max``."""
        return cls("exponential", base, factor, max, jitter)  # type: ignore[arg-type]

    @classmethod
    def fixed(cls, seconds: float, jitter: str = "none") -> Backoff:
        """The same delay before every retry."""
        return cls("fixed", seconds, 1.0, seconds, jitter)  # type: ignore[arg-type]

    def delay(self, attempt: int, rng: random.Random | None = None) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        if self.kind == "fixed":
            raw = self.base
        else:
            try:
                raw = min(self.max, self.base * self.factor ** (attempt - 1))
            except OverflowError:  # factor ** (attempt - 1) is past any float, so past max too
                raw = self.max if self.base > 0 else 0.0
        rand = (rng or random).random()
        if self.jitter == "equal":
            return raw / 2 + rand * raw / 2
        if self.jitter == "full":
            return rand * raw
        return raw


_RATE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*/\s*(\d+(?:\.\d+)?)?\s*(ms|s|m|h)\s*(?:burst\s+(\d+))?\s*$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
RATE_FORM = "'N/s', 'N/m', 'N/h' or 'N/Ks' (e.g. '10/s', '600/m', '5/2s'), optionally 'burst B'"


@dataclass(frozen=True, slots=True)
class RateLimit:
    """A token bucket: ``rate`` tokens per second, holding at most ``burst`` tokens."""

    rate: float
    burst: float = 1.0

    @classmethod
    def parse(cls, text: str | RateLimit, binding: str | None = None, name: str = "rate_limit") -> RateLimit:
        """Parse ``"10/s"``, ``"600/m"``, ``"5/2s"`` or ``"100/s burst 20"`` (an error names ``name``)."""
        if isinstance(text, RateLimit):
            return text
        if not isinstance(text, str):
            raise InvalidOption(name, text, RATE_FORM, binding)
        m = _RATE_RE.match(text)
        if not m:
            raise InvalidOption(name, text, RATE_FORM, binding)
        count = float(m.group(1))
        period = float(m.group(2) or 1) * _UNIT_SECONDS[m.group(3)]
        if count <= 0 or period <= 0:
            raise InvalidOption(name, text, "a positive count and period", binding)
        burst = float(m.group(4)) if m.group(4) else 1.0
        if burst < 1:
            raise InvalidOption(name, text, "a burst of at least 1", binding)
        return cls(rate=count / period, burst=burst)


def positive_int(name: str, value: object, binding: str | None = None, *, allow_none: bool = True,
                 minimum: int = 1) -> int | None:
    """Check an option that must be an integer from ``minimum`` (1 unless told) up, or None where allowed."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= MAX_INT:
        raise InvalidOption(name, value, f"an integer from {minimum} to {MAX_INT}" + (" or None" if allow_none else ""),
                            binding)
    return value


def concurrency(value: object, binding: str | None = None) -> int | None:
    """Check a binding's ``concurrency``: None (unlimited), or at most N running at once; 0 holds every
    job of the binding queued (as a pause does) until the limit is raised."""
    return positive_int("concurrency", value, binding, minimum=0)


def integer(name: str, value: object, binding: str | None = None) -> int:
    """Check an option that is an integer stored in a 32-bit column (``priority``)."""
    if isinstance(value, bool) or not isinstance(value, int) or not MIN_INT <= value <= MAX_INT:
        raise InvalidOption(name, value, f"an integer from {MIN_INT} to {MAX_INT}", binding)
    return value


def finite(name: str, value: object, binding: str | None = None, *, minimum: float = 0.0,
           above: bool = False, maximum: float = math.inf) -> float:
    """Check a finite number ``>= minimum`` (``> minimum`` with ``above``) and ``<= maximum``;
    NaN and infinities are refused."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        number = math.nan
    else:
        try:
            number = float(value)
        except OverflowError:
            number = math.inf
    if not math.isfinite(number) or number < minimum or (above and number == minimum) or number > maximum:
        relation = ">" if above else ">="
        upto = "" if maximum == math.inf else f" and <= {maximum:g}"
        raise InvalidOption(name, value, f"a finite number {relation} {minimum:g}{upto}", binding)
    return number


def seconds(name: str, value: object, binding: str | None = None, *, allow_none: bool = True) -> float | None:
    """Check an option that is a duration in seconds (a number or a ``timedelta``)."""
    from datetime import timedelta

    if value is None and allow_none:
        return None
    seconds = value.total_seconds() if isinstance(value, timedelta) else value
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        seconds = math.nan
    else:
        try:
            seconds = float(seconds)
        except OverflowError:
            seconds = math.inf
    if not 0 <= seconds < math.inf:
        raise InvalidOption(name, value, "seconds >= 0, finite (a number or a timedelta)", binding)
    return seconds


def delivery(value: object, binding: str | None = None) -> Delivery:
    """Check a delivery mode."""
    if value not in DELIVERIES:
        raise InvalidOption("delivery", value, "'at_least_once' or 'at_most_once'", binding)
    return value  # type: ignore[return-value]
