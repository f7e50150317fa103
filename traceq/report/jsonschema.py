"""JSON Schema from the type hints of frozen dataclasses, so the report schema cannot drift; and the
way back, a JSON payload checked against those hints into the dataclasses again.

Supports what the report model uses: ``int``, ``float``, ``str``, ``bool``, ``X | None``,
``tuple[X, ...]``, ``list[X]``, ``Mapping[str, X]``/``dict[str, X]`` and nested dataclasses.
A field's docstring (a string literal right after it) is not visible at run time, so
descriptions come from the ``FIELD_DOCS`` class variable a model may define, and the allowed
values of a string field from ``FIELD_ENUMS``.

:func:`from_jsonable` reads a payload :func:`to_jsonable` wrote (a saved JSON report, which
``traceq diff`` compares): every value is checked against its field's type, a field with a default
may be absent (a report saved before the field existed), keys the model does not know are
ignored, and anything else raises :class:`PayloadError` naming where in the payload it is.  A
field the JSON never carries (``field(repr=False, compare=False)``: frames and in-memory details)
gets its default, or zero (``0``, ``""``, an empty frame) where it has none.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Mapping
from typing import Any, Final


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
    """A dataclass tree as plain JSON values (mappings with sorted keys, tuples as lists).

    A report holds hundreds of thousands of values, most of them numbers: a value whose type is
    one of :data:`_PLAIN` is written as it is without a call, and each dataclass's written fields
    are listed once per class (:func:`_written_fields`)."""
    kind: type = type(value)
    if kind in _PLAIN:
        return value
    names = _written_fields(kind)
    if names is not None:
        out = {}
        for name in names:
            item = getattr(value, name)
            out[name] = item if type(item) in _PLAIN else to_jsonable(item)
        return out
    if isinstance(value, Mapping):
        return {str(k): v if type(v) in _PLAIN else to_jsonable(v) for k, v in sorted(value.items())}
    if isinstance(value, tuple | list):
        return [v if type(v) in _PLAIN else to_jsonable(v) for v in value]
    return value


_PLAIN: Final = frozenset({str, int, float, bool, type(None)})
"""Types whose values :func:`to_jsonable` returns as they are (exact types: a subclass takes the
general path, which returns it as it is too unless it is a mapping or a sequence)."""


@functools.cache
def _written_fields(cls: type) -> tuple[str, ...] | None:
    """The fields of dataclass ``cls`` that the JSON carries (``repr`` or ``compare``), in declaration
    order; ``None`` for a type that is not a dataclass."""
    if not dataclasses.is_dataclass(cls):
        return None
    return tuple(f.name for f in dataclasses.fields(cls) if f.repr or f.compare)


class PayloadError(ValueError):
    """A JSON payload that does not fit the model: ``where`` is its place (``devices[0].steady``)."""

    def __init__(self, where: str, problem: str) -> None:
        self.where = where
        self.problem = problem
        super().__init__(f"{where or 'the payload'}: {problem}")


def from_jsonable(cls: type[T], value: Any, where: str = "") -> T:
    """The dataclass ``cls`` rebuilt from ``value`` (what :func:`to_jsonable` made of one), every
    value checked against the type hints; raises :class:`PayloadError`."""
    out: T = _read(cls, value, where)
    return out


T = typing.TypeVar("T")

_SCALARS: dict[Any, str] = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}


def _read(hint: Any, value: Any, where: str) -> Any:
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if hint in _SCALARS:
        return _scalar(hint, value, where)
    if hint is type(None):
        if value is not None:
            raise PayloadError(where, "should be null")
        return None
    if origin in (types.UnionType, typing.Union):
        if value is None and type(None) in args:
            return None
        rest = [a for a in args if a is not type(None)]
        if len(rest) == 1:
            return _read(rest[0], value, where)
        for arg in rest:
            try:
                return _read(arg, value, where)
            except PayloadError:
                continue
        raise PayloadError(where, f"fits none of {hint}")
    if origin in (tuple, list):
        if not isinstance(value, list):
            raise PayloadError(where, "should be an array")
        items = [_read(args[0], v, f"{where}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin in (dict, Mapping, typing.Mapping):
        if not isinstance(value, dict):
            raise PayloadError(where, "should be an object")
        return {str(k): _read(args[1], v, f"{where}.{k}" if where else str(k)) for k, v in value.items()}
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return _dataclass(hint, value, where)
    raise PayloadError(where, f"no reader for {hint!r}")


def _scalar(hint: Any, value: Any, where: str) -> Any:
    if hint is float and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if hint is int and isinstance(value, int) and not isinstance(value, bool):
        return value
    if hint in (str, bool) and isinstance(value, hint):
        return value
    raise PayloadError(where, f"should be {_SCALARS[hint]}, not {json_type(value)}")


def _dataclass(cls: type[Any], value: Any, where: str) -> Any:
    if not isinstance(value, dict):
        raise PayloadError(where, f"should be an object ({cls.__name__}), not {json_type(value)}")
    hints = typing.get_type_hints(cls)
    enums: Mapping[str, tuple[str, ...]] = getattr(cls, "FIELD_ENUMS", {})
    kwargs: dict[str, Any] = {}
    for field in dataclasses.fields(cls):
        if not field.init:
            continue
        if not field.repr and not field.compare:  # not serialised: its default stands, else a zero
            if field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
                kwargs[field.name] = _zero(hints[field.name])
            continue
        at = f"{where}.{field.name}" if where else field.name
        if field.name not in value:
            if field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
                raise PayloadError(at, "is missing")
            continue
        kwargs[field.name] = _read(hints[field.name], value[field.name], at)
        allowed = enums.get(field.name)
        if allowed is not None and kwargs[field.name] is not None and kwargs[field.name] not in allowed:
            raise PayloadError(at, f"should be one of {', '.join(allowed)}")
    return cls(**kwargs)


def _zero(hint: Any) -> Any:
    """The value of a field the JSON does not carry and the model gives no default: none, or zero."""
    origin = typing.get_origin(hint)
    if origin in (types.UnionType, typing.Union) and type(None) in typing.get_args(hint):
        return None
    zeros: dict[Any, Any] = {int: 0, float: 0.0, str: "", bool: False, tuple: (), list: [], dict: {}, Mapping: {}}
    key = origin if origin is not None else hint
    if key in zeros or key is typing.Mapping:
        return zeros.get(key, {})
    if isinstance(hint, type):
        return hint()  # an empty one: a frame the JSON never held
    raise TypeError(f"no zero for {hint!r}")


def json_type(value: Any) -> str:
    """What JSON calls the type of ``value`` (for messages)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"
