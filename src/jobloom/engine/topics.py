"""Topics: names that performers subscribe to with ``triggers``, and that :meth:`App.publish` fans out.

A topic name is 1 to 128 characters of ASCII letters, digits, ``.``, ``_``, ``-`` and ``:``, starting
with a letter or a digit (``order.created``, ``billing:invoice-paid``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from jobloom.core.errors import InvalidOption

MAX_TOPIC = 128
"""The longest topic name, in characters."""
TOPIC_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
"""What a topic name matches (in full)."""
EXPECTED = "a topic name: 1 to 128 of A-Z a-z 0-9 . _ - :, starting with a letter or digit"


def check_topic(value: Any, option: str = "topic", binding: str | None = None) -> str:
    """``value`` if it is a valid topic name, else ``InvalidOption`` naming ``option`` (and ``binding``)."""
    if not isinstance(value, str) or TOPIC_RE.fullmatch(value) is None:
        raise InvalidOption(option, value, EXPECTED, binding)
    return value


def check_triggers(value: Any, binding: str) -> tuple[str, ...]:
    """A performer's ``triggers``: a list or tuple of distinct topic names (empty: it subscribes to none)."""
    if value is None:
        return ()
    if not isinstance(value, (list, tuple)):
        raise InvalidOption("triggers", value, "a list of topic names", binding)
    topics = tuple(check_topic(t, "triggers", binding) for t in value)
    if len(set(topics)) != len(topics):
        raise InvalidOption("triggers", value, "a list of distinct topic names", binding)
    return topics


def subscribers(bindings: Iterable[tuple[str, tuple[str, ...]]]) -> dict[str, list[str]]:
    """Each topic's subscribed bindings (sorted), from ``(binding, triggers)`` pairs; topics sorted."""
    found: dict[str, list[str]] = {}
    for binding, triggers in bindings:
        for topic in triggers:
            found.setdefault(topic, []).append(binding)
    return {t: sorted(found[t]) for t in sorted(found)}


__all__ = ["MAX_TOPIC", "TOPIC_RE", "check_topic", "check_triggers", "subscribers"]
