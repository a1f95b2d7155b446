"""Unknown keys in a payload: found before pydantic drops them.

pydantic ignores a key that a dataclass, a model or a TypedDict does not declare, so
``{"to": "x", "extra": 1}`` for a ``Mail(to)`` payload would be stored as ``{"to": "x"}`` and the
caller's mistake (a misspelt field, a field of another version) would go unseen. ``key_checker``
reads a payload type's pydantic schema once and returns a function that finds the first key of a
payload that the type would drop, with its path (``inner.extra``, ``items[2].extra``), so enqueue
can refuse it. Parts of the type that keep extra keys (``extra="allow"``) or refuse them already
(``extra="forbid"``) are left to pydantic; any part it cannot follow is not checked.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Checker = Callable[[Any, str], "str | None"]
"""Finds the first unknown key in ``value`` (data as the caller gave it), as a path under ``at``."""


def _join(at: str, key: str) -> str:
    return f"{at}.{key}" if at else key


def key_checker(core_schema: Any) -> Checker | None:  # noqa: C901 (tests/test_code_shape.py)
    """A checker for a payload type's core schema, or None when nothing of it can drop a key."""
    definitions: dict[str, Any] = {}
    built: dict[str, Checker | None] = {}
    building: set[str] = set()

    def by_ref(ref: str) -> Checker | None:
        if ref in built:
            return built[ref]
        if ref in building:  # a recursive type: look the checker up when it runs
            return lambda value, at: (built.get(ref) or (lambda v, a: None))(value, at)
        building.add(ref)
        built[ref] = make(definitions.get(ref))
        building.discard(ref)
        return built[ref]

    def fields_checker(names: dict[str, Checker | None], extra: str | None) -> Checker | None:
        inner = {k: c for k, c in names.items() if c is not None}
        own = extra not in ("allow", "forbid")
        if not own and not inner:
            return None
        allowed = frozenset(names)

        def check(value: Any, at: str) -> str | None:
            if not isinstance(value, dict):
                return None
            if own and not value.keys() <= allowed:  # the common case costs one set comparison
                return next(_join(at, str(k)) for k in value if k not in allowed)
            for key, item_check in inner.items():
                if key in value:
                    found = item_check(value[key], _join(at, key))
                    if found is not None:
                        return found
            return None

        return check

    def field_names(name: str, field: dict[str, Any]) -> list[str]:
        names = [name]
        alias = field.get("validation_alias")
        if isinstance(alias, str):
            names.append(alias)
        elif isinstance(alias, list):
            names.extend(a[0] if isinstance(a, list) else a for a in alias if isinstance(a, str | list) and a)
        return [n for n in names if isinstance(n, str)]

    def extra_of(schema: dict[str, Any], config: dict[str, Any] | None) -> str | None:
        return schema.get("extra_behavior") or (config or {}).get("extra_fields_behavior")

    def make(schema: Any) -> Checker | None:  # noqa: C901 (tests/test_code_shape.py)
        if not isinstance(schema, dict):
            return None
        kind = schema.get("type")
        if kind == "definitions":
            for d in schema.get("definitions", []):
                definitions[d["ref"]] = d
            return make(schema["schema"])
        if "ref" in schema and kind != "definition-ref" and schema["ref"] not in building:
            definitions.setdefault(schema["ref"], schema)
            ref = schema["ref"]
            if ref in built:
                return built[ref]
            building.add(ref)
            built[ref] = make({k: v for k, v in schema.items() if k != "ref"})
            building.discard(ref)
            return built[ref]
        if kind == "definition-ref":
            return by_ref(schema["schema_ref"])
        if kind in ("default", "nullable", "function-after", "function-before"):
            return make(schema.get("schema"))
        if kind in ("list", "set", "frozenset", "generator"):
            item = make(schema.get("items_schema"))
            if item is None:
                return None
            return lambda value, at: next((found for i, v in enumerate(value)
                                           if (found := item(v, f"{at}[{i}]")) is not None), None) \
                if isinstance(value, list) else None
        if kind == "dict":
            values = make(schema.get("values_schema"))
            if values is None:
                return None
            return lambda value, at: next((found for k, v in value.items()
                                           if (found := values(v, _join(at, str(k)))) is not None), None) \
                if isinstance(value, dict) else None
        if kind == "model":
            inner = schema["schema"]
            if inner.get("type") != "model-fields":
                return None
            names: dict[str, Checker | None] = {}
            for name, field in inner["fields"].items():
                check = make(field.get("schema"))
                for n in field_names(name, field):
                    names[n] = check
            return fields_checker(names, extra_of(inner, schema.get("config")))
        if kind == "dataclass":
            args = schema["schema"]
            names = {}
            for field in args.get("fields", []):
                if field.get("init_only") or field.get("init") is False:
                    continue
                check = make(field.get("schema"))
                for n in field_names(field["name"], field):
                    names[n] = check
            return fields_checker(names, extra_of(args, schema.get("config")))
        if kind == "typed-dict":
            names = {}
            for name, field in schema["fields"].items():
                check = make(field.get("schema"))
                for n in field_names(name, field):
                    names[n] = check
            return fields_checker(names, extra_of(schema, schema.get("config")))
        return None

    return make(core_schema)
