"""The pure text checks: names and keys, JSON values and text, and free text made storable."""

from __future__ import annotations

import math

import pytest

from jobloom import InvalidOption, InvalidSchedule, Schedule
from jobloom.core.text import (
    MAX_JSON_DEPTH,
    check_name,
    dumped_problem,
    json_problem,
    load_json_text,
    name_problem,
    plain_json,
    storable_text,
    too_deep,
)


def test_names_and_keys() -> None:
    assert check_name("unique_key", "order-42 é 💥") == "order-42 é 💥"
    assert name_problem("x" * 512, 512) is None
    for bad, reason in [("", "non-empty"), ("a\x00b", "control characters"), ("a\nb", "control characters"),
                        ("\x9b", "control characters"), ("a\udc80", "lone surrogates"), (7, "a string"),
                        ("é" * 257, r"at most 512 UTF-8 bytes \(it has 514\)")]:
        with pytest.raises(InvalidOption, match=f"invalid unique_key on B: .*; expected .*{reason}"):
            check_name("unique_key", bad, 512, "B")


def test_a_long_value_is_cut_in_the_message() -> None:
    with pytest.raises(InvalidOption) as info:
        check_name("unique_key", "k" * 10_000)
    assert len(str(info.value)) < 250 and "(10002 characters)" in str(info.value)


def test_storable_text_escapes_and_cuts() -> None:
    assert storable_text(None, 10) is None
    assert storable_text("plain", 100) == "plain"
    assert storable_text("a\x00b", 100) == "a\\x00b"
    assert storable_text("a\ud800b", 100) == "a\\ud800b"
    cut = storable_text("begin " + "é" * 50_000 + " end", 1024)
    assert cut is not None and len(cut.encode()) <= 1024
    assert cut.startswith("begin ") and cut.endswith(" end") and "bytes cut: the limit is 1024 bytes" in cut
    cut.encode()  # never a broken character at either side of the cut


def test_json_problems() -> None:
    assert json_problem({"a": [1, 2.5, None, True, "x\x00", 10**40]}) is None
    assert "NaN and infinities" in (json_problem({"a": [math.nan]}) or "")
    assert "NaN and infinities" in (json_problem(-math.inf) or "")
    assert "lone surrogate" in (json_problem({"k\udc80": 1}) or "")
    deep: object = 0
    for _ in range(10_000):
        deep = [deep]
    assert f"deeper than {MAX_JSON_DEPTH}" in (json_problem(deep) or "")
    edge: object = 0
    for _ in range(MAX_JSON_DEPTH):
        edge = [edge]
    assert json_problem(edge) is None and json_problem([edge]) is not None


def test_too_deep_reads_text_without_recursing() -> None:
    assert not too_deep(b"[" * 64 + b"]" * 64)
    assert not too_deep(b"[{" * 32 + b"}]" * 32) and too_deep(b"{" + b"[{" * 32 + b"}]" * 32 + b"}")
    assert too_deep(b"[" * 65 + b"]" * 65)
    assert too_deep(b"[" * 10_000 + b"]" * 10_000)
    brackets_in_strings = b'{"a": "' + b"[" * 500 + b'", "b": "\\"[{"}'
    assert not too_deep(brackets_in_strings)
    many_flat = b"[" + b",".join([b"{}"] * 1000) + b"]"
    assert not too_deep(many_flat)


def test_dumped_problem_walks_only_when_suspicious() -> None:
    def never() -> object:
        raise AssertionError("walked a value that looked fine")

    assert dumped_problem(b'{"a": 1, "b": null}', never) is None
    assert dumped_problem(b'{"a": "NaN"}', lambda: {"a": "NaN"}) is None
    assert dumped_problem(b'{"a": NaN}', lambda: {"a": math.nan}) is not None
    assert dumped_problem(b'{"a": null}', lambda: {"a": math.nan}, nulls_may_hide_nan=True) is not None


def test_plain_json_and_text_from_people() -> None:
    assert plain_json({"n": 10**30, "s": "\x00"}) == '{"n": 1000000000000000000000000000000, "s": "\\u0000"}'
    with pytest.raises(ValueError, match="NaN"):
        plain_json([math.nan])
    with pytest.raises(ValueError, match="not JSON"):
        load_json_text('{"a": Infinity}')
    with pytest.raises(ValueError, match="nested deeper than 64"):
        load_json_text("[" * 10_000 + "]" * 10_000)
    assert load_json_text('{"a": "[[[["}') == {"a": "[[[["}


@pytest.mark.parametrize(("cron", "quoted"), [
    ("30-10 * * * *", "the minute field has '30-10'"),
    ("5/2 * * * *", "the minute field has '5/2'"),
    ("0 0 * DEC-JAN *", "the month field has 'DEC-JAN'"),
    ("0 0 * * FRI-MON", "the weekday field has 'FRI-MON'"),
    ("*/10 50-40 * * * *", "the minute field has '50-40'"),
    ("3/5 * * * * *", "the second field has '3/5'"),
])
def test_reversed_ranges_and_steps_on_one_value_are_refused(cron: str, quoted: str) -> None:
    with pytest.raises(InvalidSchedule, match=f"invalid cron on schedule 'c': .*; {quoted}"):
        Schedule("c", cron=cron, performer="R", payload={})


@pytest.mark.parametrize("cron", ["* * * JAN-MAR MON-FRI", "10-30/5 * * * *", "0 0 * * 5-7", "*/5 1,3-4 * * *"])
def test_ordinary_ranges_and_names_stay_accepted(cron: str) -> None:
    assert Schedule("c", cron=cron, performer="R", payload={}).cron == cron


def test_schedule_names_refuse_control_characters() -> None:
    for name in ("tab\there", "nul\x00", "s\udc80"):
        with pytest.raises(InvalidSchedule, match="invalid name"):
            Schedule(name, cron="* * * * *", performer="R", payload={})
