"""Option values: backoff policies, rate limits and their parsing, with clear errors for bad input."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Literal

from .errors import InvalidOption

Delivery = Literal["at_least_once", "at_most_once"]
DELIVERIES: tuple[str, ...] = ("at_least_once", "at_most_once")


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
        if not self.base >= 0:
            raise InvalidOption("backoff.base", self.base, "seconds >= 0")
        if not self.factor >= 1:
            raise InvalidOption("backoff.factor", self.factor, "a factor >= 1")
        if not self.max >= 0:
            raise InvalidOption("backoff.max", self.max, "seconds >= 0")
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
    def parse(cls, text: str | RateLimit, binding: str | None = None) -> RateLimit:
        """Parse ``"10/s"``, ``"600/m"``, ``"5/2s"`` or ``"100/s burst 20"``."""
        if isinstance(text, RateLimit):
            return text
        if not isinstance(text, str):
            raise InvalidOption("rate_limit", text, RATE_FORM, binding)
        m = _RATE_RE.match(text)
        if not m:
            raise InvalidOption("rate_limit", text, RATE_FORM, binding)
        count = float(m.group(1))
        period = float(m.group(2) or 1) * _UNIT_SECONDS[m.group(3)]
        if count <= 0 or period <= 0:
            raise InvalidOption("rate_limit", text, "a positive count and period", binding)
        burst = float(m.group(4)) if m.group(4) else 1.0
        if burst < 1:
            raise InvalidOption("rate_limit", text, "a burst of at least 1", binding)
        return cls(rate=count / period, burst=burst)


def positive_int(name: str, value: object, binding: str | None = None, *, allow_none: bool = True) -> int | None:
    """Check an option that must be a positive integer (or None where allowed)."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidOption(name, value, "an integer >= 1" + (" or None" if allow_none else ""), binding)
    return value


def seconds(name: str, value: object, binding: str | None = None, *, allow_none: bool = True) -> float | None:
    """Check an option that is a duration in seconds (a number or a ``timedelta``)."""
    from datetime import timedelta

    if value is None and allow_none:
        return None
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise InvalidOption(name, value, "seconds >= 0 (a number or a timedelta)", binding)
    return float(value)


def delivery(value: object, binding: str | None = None) -> Delivery:
    """Check a delivery mode."""
    if value not in DELIVERIES:
        raise InvalidOption("delivery", value, "'at_least_once' or 'at_most_once'", binding)
    return value  # type: ignore[return-value]
