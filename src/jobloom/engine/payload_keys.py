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

from collections.abc import Callable, Iterable
from typing import Any

Checker = Callable[[Any, str], "str | None"]
"""Finds the first unknown key in ``value`` (data as the caller gave it), as a path under ``at``."""


def _join(at: str, key: str) -> str:
    return f"{at}.{key}" if at else key


def key_checker(core_schema: Any) -> Checker | None:
    """A checker for a payload type's core schema, or None when nothing of it can drop a key."""
    return _Builder().make(core_schema)


class _Builder:
    """Builds the checkers of one core schema, each part once: ``definitions`` by ref as found, the
    checkers ``built`` by ref, and the refs ``building`` now (a recursive type refers to itself)."""

    def __init__(self) -> None:
        self.definitions: dict[str, Any] = {}
        self.built: dict[str, Checker | None] = {}
        self.building: set[str] = set()

    def make(self, schema: Any) -> Checker | None:
        """The checker of one part of the schema, or None when it cannot drop a key."""
        if not isinstance(schema, dict):
            return None
        kind = schema.get("type")
        if kind == "definitions":
            for d in schema.get("definitions", []):
                self.definitions[d["ref"]] = d
            return self.make(schema["schema"])
        if "ref" in schema and kind != "definition-ref" and schema["ref"] not in self.building:
            return self._named(schema)
        if kind == "definition-ref":
            return self.by_ref(schema["schema_ref"])
        if kind in ("default", "nullable", "function-after", "function-before"):
            return self.make(schema.get("schema"))
        if kind in ("list", "set", "frozenset", "generator"):
            return _items(self.make(schema.get("items_schema")))
        if kind == "dict":
            return _values(self.make(schema.get("values_schema")))
        if kind == "model":
            inner = schema["schema"]
            if inner.get("type") != "model-fields":
                return None
            return _fields(self._names(inner["fields"].items()), _extra_of(inner, schema.get("config")))
        if kind == "dataclass":
            args = schema["schema"]
            fields = [(f["name"], f) for f in args.get("fields", [])
                      if not (f.get("init_only") or f.get("init") is False)]
            return _fields(self._names(fields), _extra_of(args, schema.get("config")))
        if kind == "typed-dict":
            return _fields(self._names(schema["fields"].items()), _extra_of(schema, schema.get("config")))
        return None

    def by_ref(self, ref: str) -> Checker | None:
        """The checker of a definition, by its ref."""
        if ref in self.built:
            return self.built[ref]
        if ref in self.building:  # a recursive type: look the checker up when it runs
            return lambda value, at: (self.built.get(ref) or (lambda v, a: None))(value, at)
        self.building.add(ref)
        self.built[ref] = self.make(self.definitions.get(ref))
        self.building.discard(ref)
        return self.built[ref]

    def _named(self, schema: dict[str, Any]) -> Checker | None:
        """A part that carries its own ref: built once, under that ref."""
        ref = schema["ref"]
        self.definitions.setdefault(ref, schema)
        if ref in self.built:
            return self.built[ref]
        self.building.add(ref)
        self.built[ref] = self.make({k: v for k, v in schema.items() if k != "ref"})
        self.building.discard(ref)
        return self.built[ref]

    def _names(self, fields: Iterable[tuple[str, dict[str, Any]]]) -> dict[str, Checker | None]:
        """Each field's checker, under its name and every alias it may be given by."""
        names: dict[str, Checker | None] = {}
        for name, field in fields:
            check = self.make(field.get("schema"))
            for n in _field_names(name, field):
                names[n] = check
        return names


def _items(item: Checker | None) -> Checker | None:
    """A list's checker, from its items' checker."""
    if item is None:
        return None
    return lambda value, at: next((found for i, v in enumerate(value)
                                   if (found := item(v, f"{at}[{i}]")) is not None), None) \
        if isinstance(value, list) else None


def _values(values: Checker | None) -> Checker | None:
    """A dict's checker, from its values' checker."""
    if values is None:
        return None
    return lambda value, at: next((found for k, v in value.items()
                                   if (found := values(v, _join(at, str(k)))) is not None), None) \
        if isinstance(value, dict) else None


def _fields(names: dict[str, Checker | None], extra: str | None) -> Checker | None:
    """The checker of an object with these field names (and checkers): it finds a key none of them is,
    unless the object keeps (``allow``) or refuses (``forbid``) extra keys on its own."""
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


def _field_names(name: str, field: dict[str, Any]) -> list[str]:
    """A field's name and its validation aliases."""
    names = [name]
    alias = field.get("validation_alias")
    if isinstance(alias, str):
        names.append(alias)
    elif isinstance(alias, list):
        names.extend(a[0] if isinstance(a, list) else a for a in alias if isinstance(a, str | list) and a)
    return [n for n in names if isinstance(n, str)]


def _extra_of(schema: dict[str, Any], config: dict[str, Any] | None) -> str | None:
    """What an object does with extra keys: its own setting, else its config's."""
    return schema.get("extra_behavior") or (config or {}).get("extra_fields_behavior")
