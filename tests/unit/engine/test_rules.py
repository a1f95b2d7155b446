"""The enqueue rules a performing app stores with a binding, and the spec a bare store's server builds from
them: the same jobs as the app's own enqueue, or a refusal that names the binding and why."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel, Field, field_validator

import jobloom
from jobloom.core.errors import InvalidOption, InvalidPayload, UnknownBinding
from jobloom.engine.enqueue import DEFAULT_OPTIONS, EnqueueOptions, build_job
from jobloom.engine.performer import PerformerSpec, inspect_performer
from jobloom.engine.rules import RULES_VERSION, rules_json, stored_spec


class Line(BaseModel):
    sku: str
    qty: int = Field(ge=1)


class Order(BaseModel):
    id: str
    lines: list[Line]
    note: str = ""


class Ship(jobloom.Performer[Order, None]):
    delivery = "at_most_once"
    max_attempts = 7
    priority = -2
    timeout = 12.5
    unique_for = 600.0

    async def perform(self, payload: Order) -> None:
        return None


class Lenient(jobloom.Performer[Order, None]):
    unknown_keys = "drop"

    async def perform(self, payload: Order) -> None:
        return None


class Opaque(jobloom.Performer[Callable[[], None], None]):
    """A payload type pydantic validates but cannot describe as a JSON Schema."""

    async def perform(self, payload: Callable[[], None]) -> None:
        return None


class Raw(jobloom.Performer[Any, None]):
    async def perform(self, payload: Any) -> None:
        return None


def spec_of(cls: type[jobloom.Performer[Any, Any]]) -> PerformerSpec:
    return inspect_performer(cls)


def stored(spec: PerformerSpec) -> Any:
    return stored_spec(spec.binding, True, rules_json(spec))


GOOD = {"id": "o-1", "lines": [{"sku": "a", "qty": 2}]}


def test_a_stored_spec_makes_the_job_the_app_would_make() -> None:
    app_spec = spec_of(Ship)
    for options in (DEFAULT_OPTIONS, EnqueueOptions(priority=4, unique_key="k", max_attempts=2)):
        ours = build_job(app_spec, GOOD, options, 100.0)
        theirs = build_job(stored(app_spec), GOOD, options, 100.0)
        assert json.loads(theirs.payload) == GOOD  # as given; the worker's pydantic fills in the defaults
        assert (theirs.delivery, theirs.max_attempts, theirs.priority, theirs.timeout, theirs.unique_until) == (
            ours.delivery, ours.max_attempts, ours.priority, ours.timeout, ours.unique_until)


@pytest.mark.parametrize(("payload", "field"), [
    ({"id": "o-1", "lines": [{"sku": "a", "qty": 0}]}, "lines.0.qty"),
    ({"id": "o-1", "lines": [{"qty": 1}]}, "lines.0.sku"),
    ({"lines": []}, "id"),
    ({"id": "o-1", "lines": [], "rush": True}, "rush"),
    ({"id": "o-1", "lines": [{"sku": "a", "qty": 1, "gift": True}]}, "lines.0.gift"),
    ([1, 2], "payload"),
])
def test_a_payload_the_schema_refuses_names_its_field(payload: Any, field: str) -> None:
    with pytest.raises(InvalidPayload) as caught:
        build_job(stored(spec_of(Ship)), payload, DEFAULT_OPTIONS, 0.0)
    assert f"field {field!r}" in str(caught.value) and "Ship" in str(caught.value)
    with pytest.raises(InvalidPayload):  # the app refuses it too
        build_job(spec_of(Ship), payload, DEFAULT_OPTIONS, 0.0)


def test_unknown_keys_pass_where_the_performer_drops_them() -> None:
    payload = {**GOOD, "rush": True}
    build_job(stored(spec_of(Lenient)), payload, DEFAULT_OPTIONS, 0.0)
    build_job(spec_of(Lenient), payload, DEFAULT_OPTIONS, 0.0)


def test_a_remote_bindings_json_schema_is_stored_as_given() -> None:
    schema = {"type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"]}
    spec = jobloom.RemoteBinding("Fetch", payload=schema, max_attempts=9).spec
    assert json.loads(rules_json(spec))["payload_schema"] == schema
    made = build_job(stored(spec), {"url": "x", "more": 1}, DEFAULT_OPTIONS, 0.0)  # the schema allows more keys
    assert made.max_attempts == 9
    with pytest.raises(InvalidPayload, match="field 'url'"):
        build_job(stored(spec), {"url": 3}, DEFAULT_OPTIONS, 0.0)


def test_what_the_rules_cannot_carry_is_refused() -> None:
    class Validated(BaseModel):
        code: str

        @field_validator("code")
        @classmethod
        def upper(cls, value: str) -> str:
            return value.upper()

    class Custom(jobloom.Performer[Validated, None]):
        concurrency_key = staticmethod(lambda p: p.code)

        async def perform(self, payload: Validated) -> None:
            return None

    spec = stored(spec_of(Custom))
    with pytest.raises(InvalidOption) as caught:  # the key comes from code this side does not have
        build_job(spec, {"code": "a"}, DEFAULT_OPTIONS, 0.0)
    assert caught.value.option == "concurrency_key" and "Custom" in str(caught.value)
    made = build_job(spec, {"code": "a"}, EnqueueOptions(concurrency_key="A"), 0.0)
    assert made.concurrency_key == "A"
    opaque = spec_of(Opaque)  # no schema at all: refused, not taken as any JSON
    assert json.loads(rules_json(opaque))["payload_schema"] is None
    with pytest.raises(InvalidPayload, match="no JSON Schema"):
        build_job(stored(opaque), {}, DEFAULT_OPTIONS, 0.0)


@pytest.mark.parametrize(("registered", "rules", "why"), [
    (False, None, "no worker of the app that performs it has registered it"),
    (True, None, "a version of jobloom that stores no enqueue rules"),
    (True, json.dumps({"version": RULES_VERSION + 1}), "another version of jobloom"),
    (True, "not json", "another version of jobloom"),
    (True, json.dumps({"version": RULES_VERSION, "priority": 0}), "cannot be applied"),
    (True, json.dumps({"version": RULES_VERSION, "priority": 0, "max_attempts": 0, "delivery": "at_least_once",
                       "timeout": None, "unique_for": 1.0, "max_snoozes": 1}), "cannot be applied"),
    (True, json.dumps({"version": RULES_VERSION, "priority": 0, "max_attempts": 1, "delivery": "at_least_once",
                       "timeout": None, "unique_for": 1.0, "max_snoozes": 1, "payload_schema": {"type": 5}}),
     "cannot be applied"),
])
def test_rules_that_cannot_be_applied_refuse_the_binding_by_name(registered: bool, rules: str | None,
                                                                 why: str) -> None:
    with pytest.raises(UnknownBinding) as caught:
        stored_spec("Ship", registered, rules, ["Other"])
    assert "'Ship'" in str(caught.value) and why in str(caught.value) and "Other" in str(caught.value)


def test_raw_payloads_stay_any_json() -> None:
    spec = stored(spec_of(Raw))
    assert json.loads(build_job(spec, [1, {"a": None}], DEFAULT_OPTIONS, 0.0).payload) == [1, {"a": None}]
    with pytest.raises(InvalidPayload):
        build_job(spec, {"x": float("nan")}, DEFAULT_OPTIONS, 0.0)
