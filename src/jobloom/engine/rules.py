"""Enqueue rules stored with a binding, for the apps that enqueue its jobs without its performer.

The app that performs a binding stores them when its workers start (``App.register_bindings``, in
``jobloom_bindings.rules``): the options enqueue gives each job (priority, max_attempts, delivery,
timeout, unique_for), whether the job's concurrency key is computed from its payload, the
payload's JSON Schema, and the topics it subscribes to (``triggers``, so that an API serving the bare
store publishes to them). An app without the performer (``jobloom serve --url``) builds a spec from them
(:func:`stored_spec`) and enqueues through the same ``build_job`` as the performing app, so a job gets
the options its performer would give it. What the rules cannot carry is refused, never guessed: a
payload type without a JSON Schema, a concurrency key computed by code (unless the request gives one),
rules written by a newer jobloom.

The JSON Schema checks the payload's shape (types, required and unknown fields, enums, bounds, the
formats ``jsonschema`` checks); a pydantic validator written in code is not in it, and such a payload
is checked again by the worker that loads it.
"""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Any

from jobloom.core.errors import InvalidOption, InvalidPayload, UnknownBinding
from jobloom.core.extras import needs_extra
from jobloom.engine.performer import Performer, PerformerSpec, inspect_performer

if TYPE_CHECKING:  # imported where stored rules are applied only (an app serving a bare store), not by every app
    import jsonschema

RULES_VERSION = 1
"""The format of the stored rules; rules of a newer format are refused (served by a newer jobloom)."""


def payload_schema(spec: PerformerSpec) -> dict[str, Any] | None:
    """The JSON Schema of ``spec``'s payloads, or None for a type that has none JSON can hold. With
    ``unknown_keys = "refuse"``, every object that lists its properties refuses others, as enqueue does."""
    try:
        schema: dict[str, Any] = spec.payload_adapter.json_schema()
        json.dumps(schema, allow_nan=False)
    except Exception:  # a type pydantic cannot describe (an arbitrary class, a callable)
        return None
    if spec.key_check is not None:
        _close(schema)
    return schema


def _close(node: Any) -> None:
    if isinstance(node, dict):
        if node.get("type") == "object" and isinstance(node.get("properties"), dict):
            node.setdefault("additionalProperties", False)
        for value in node.values():
            _close(value)
    elif isinstance(node, list):
        for value in node:
            _close(value)


def rules_json(spec: PerformerSpec) -> str:
    """``spec``'s enqueue rules as stored with its binding."""
    return json.dumps({
        "version": RULES_VERSION, "priority": spec.priority, "max_attempts": spec.max_attempts,
        "delivery": spec.delivery, "timeout": spec.timeout, "unique_for": spec.unique_for,
        "max_snoozes": spec.max_snoozes, "keyed": spec.concurrency_key is not None,
        "payload_schema": payload_schema(spec), "triggers": list(spec.triggers),
    }, allow_nan=False, sort_keys=True)


@dataclasses.dataclass(frozen=True, slots=True)
class StoredSpec(PerformerSpec):
    """A binding's spec built from its stored rules: payloads checked against the stored JSON Schema."""

    validator: Any = None  # a jsonschema validator, or None: the payload type has no JSON Schema

    def validate_payload(self, payload: Any, *, check_keys: bool = True) -> Any:
        """``payload`` as given, once the stored JSON Schema accepts it (naming the field it refuses)."""
        if self.validator is None:
            raise InvalidPayload(self.binding, "its payload type has no JSON Schema, so an app without its "
                                 "performer cannot check payloads: enqueue through the app that performs it")
        import jsonschema  # imported by stored_spec already, which made the validator

        error = jsonschema.exceptions.best_match(self.validator.iter_errors(payload))
        if error is not None:
            raise InvalidPayload(self.binding, f"field {_field(error)!r}: {error.message}")
        return payload


def _field(error: jsonschema.ValidationError) -> str:
    """The payload field an error is about: its path, or the key that is missing or not allowed."""
    path = [str(p) for p in error.absolute_path]
    instance = error.instance
    if error.validator == "required" and isinstance(instance, dict) and isinstance(error.validator_value, list):
        path += [next((str(k) for k in error.validator_value if k not in instance), "")]
    elif error.validator == "additionalProperties" and isinstance(instance, dict):
        declared = error.schema.get("properties", {}) if isinstance(error.schema, dict) else {}
        path += [next((str(k) for k in instance if k not in declared), "")]
    return ".".join(p for p in path if p) or "payload"


def _no_key(binding: str) -> Any:
    def key_for(payload: Any) -> str | None:
        raise InvalidOption("concurrency_key", None, f"a concurrency_key given with the job: {binding} computes it "
                            "from the payload in its app's code, which this app does not have", binding)

    return key_for


def stored_spec(binding: str, registered: bool, rules: str | None, known: list[str] | None = None) -> StoredSpec:
    """The spec an app without the performer enqueues ``binding`` by; ``UnknownBinding`` (naming the
    ``known`` bindings) when the store holds no rules for it that this version can apply."""
    with needs_extra("web", "enqueue by a binding's stored rules"):
        import jsonschema
    if rules is None:
        why = ("its workers registered it with a version of jobloom that stores no enqueue rules: restart them"
               if registered else "no worker of the app that performs it has registered it in this store: "
               "start one first, or enqueue through that app")
        raise UnknownBinding(binding, known, why=why)
    try:
        values = json.loads(rules)
        version = values.get("version")
    except (ValueError, AttributeError):
        values, version = {}, None
    if version != RULES_VERSION:
        raise UnknownBinding(binding, known, why=f"its enqueue rules were stored by another version of jobloom (format "
                             f"{version!r}, this one reads {RULES_VERSION}): serve with that version")
    try:
        return _build(binding, values)
    except (KeyError, TypeError, ValueError, InvalidOption, jsonschema.SchemaError) as exc:
        raise UnknownBinding(binding, known, why=f"its stored enqueue rules cannot be applied ({exc}): restart "
                             "its workers to store them again") from None


def _build(binding: str, values: dict[str, Any]) -> StoredSpec:
    async def perform(self: Any, payload: Any) -> Any:  # never called: the performing app's workers run it
        raise NotImplementedError

    options = {k: values[k] for k in ("priority", "max_attempts", "delivery", "timeout", "unique_for", "max_snoozes")}
    attrs = {**options, "binding": binding, "perform": perform, "unknown_keys": "drop", "__module__": __name__,
             "triggers": values.get("triggers", []),
             "__doc__": f"{binding}, by its stored enqueue rules"}
    spec = inspect_performer(type(f"Stored[{binding}]", (Performer,), attrs))
    schema = values.get("payload_schema")
    validator = None
    if schema is not None:
        import jsonschema

        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)
        validator = cls(schema, format_checker=cls.FORMAT_CHECKER)
    fields = {f.name: getattr(spec, f.name) for f in dataclasses.fields(spec)}
    fields["concurrency_key"] = _no_key(binding) if values.get("keyed") else None
    return StoredSpec(**fields, validator=validator)


__all__ = ["RULES_VERSION", "StoredSpec", "payload_schema", "rules_json", "stored_spec"]
