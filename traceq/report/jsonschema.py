"""JSON Schema from the type hints of frozen dataclasses, so the report schema cannot drift.

Supports what the report model uses: ``int``, ``float``, ``str``, ``bool``, ``X | None``,
``tuple[X, ...]``, ``list[X]``, ``Mapping[str, X]``/``dict[str, X]`` and nested dataclasses.
A field's docstring (a string literal right after it) is not visible at run time, so
descriptions come from the ``FIELD_DOCS`` class variable a model may define, and the allowed
values of a string field from ``FIELD_ENUMS``.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from typing import Any


def dataclass_schema(cls: type[Any], definitions: dict[str, Any]) -> dict[str, Any]:
    """A ``$ref`` to ``cls``'s schema, adding it (and what it uses) to ``definitions``."""
    name = cls.__name__
    if name not in definitions:
        definitions[name] = {}  # placeholder against recursion
        hints = typing.get_type_hints(cls)
        docs: Mapping[str, str] = getattr(cls, "FIELD_DOCS", {})
        enums: Mapping[str, tuple[str, ...]] = getattr(cls, "FIELD_ENUMS", {})
        properties = {}
        for field in dataclasses.fields(cls):
            if not field.repr and not field.compare:
                continue  # frames and other non-serialised attachments
            spec = type_schema(hints[field.name], definitions)
            if field.name in docs:
                spec = {**spec, "description": docs[field.name]}
            if field.name in enums:
                optional = type(None) in typing.get_args(hints[field.name])
                spec = {**spec, "enum": [*enums[field.name], *([None] if optional else [])]}
            properties[field.name] = spec
        definitions[name] = {
            "type": "object",
            "description": " ".join((cls.__doc__ or name).split()),
            "properties": properties,
            "required": list(properties),
            "additionalProperties": False,
        }
    return {"$ref": f"#/$defs/{name}"}


def type_schema(hint: Any, definitions: dict[str, Any]) -> dict[str, Any]:
    """The JSON Schema of one annotated type."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if hint is int:
        return {"type": "integer"}
    if hint is float:
        return {"type": "number"}
    if hint is str:
        return {"type": "string"}
    if hint is bool:
        return {"type": "boolean"}
    if hint is type(None):
        return {"type": "null"}
    if origin in (types.UnionType, typing.Union):
        return {"anyOf": [type_schema(a, definitions) for a in args]}
    if origin in (tuple, list):
        return {"type": "array", "items": type_schema(args[0], definitions)}
    if origin in (dict, Mapping, typing.Mapping):
        return {"type": "object", "additionalProperties": type_schema(args[1], definitions)}
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return dataclass_schema(hint, definitions)
    raise TypeError(f"no JSON Schema for {hint!r}")


def to_jsonable(value: Any) -> Any:
    """A dataclass tree as plain JSON values (mappings with sorted keys, tuples as lists)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value) if f.repr or f.compare}
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in sorted(value.items())}
    if isinstance(value, tuple | list):
        return [to_jsonable(v) for v in value]
    return value
