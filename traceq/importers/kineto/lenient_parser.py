"""The lenient parser of the Kineto importer: Python's ``json`` after a repair pass.

Used only when the fast path (:mod:`traceq.importers.kineto.fast_parser`) declines a file.  It
repairs what real traces get wrong (invalid UTF-8, unescaped backslashes, control characters and
raw line breaks in strings, bare ``N/A``/``nan``/``inf``/``NaN``, trailing garbage, an array form
cut off mid-event), raises the traceq errors for what it cannot read or what is not a trace, and
builds the same raw frame as the fast path (:mod:`traceq.importers.kineto.raw_frame`): where polars
accepts a value, the conversion here is polars' (numbers read into a string field are spelled the
way polars spells them; of duplicate keys the first wins); where polars refuses one, it is more
forgiving (a numeric string in a number field is read; anything else becomes null).  This path
builds Python objects per event, by design.

Its limits: values nested deeper than :data:`MAX_NESTING` levels are refused
(:class:`~traceq.errors.LimitExceededError`, found by an iterative count before ``json`` -- which
recurses per level -- sees the text), integers longer than :data:`_LONG_INT_DIGITS` digits are read
as their text (Python's ``int`` refuses them), and text values are cut as the scanner cuts them
(:func:`~traceq.importers.kineto.raw_frame.cut_long_texts`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Final

import numpy as np
import polars as pl

from traceq.errors import CorruptTraceError, EmptyTraceError, LimitExceededError, UnsupportedFormatError
from traceq.importers.kineto.raw_frame import (
    ARG_FIELDS,
    NO_TRIPLE,
    RAW_SCHEMA,
    TOP_FIELDS,
    TRIPLE_FIELDS,
    UNCLOSED_ARRAY_WARNING,
    Compact,
    Container,
    ParsedTrace,
    Triple,
    cut_long_texts,
    cut_warnings,
    decoder,
    float_of_value,
    float_text,
    int_of_value,
    triple_of_list,
    triple_of_text,
)
from traceq.importers.kineto.trace_bytes import Raw

try:
    from traceq.importers.kineto import _scanner
except ImportError:  # a source tree imported without its compiled module (pip install . builds it)
    _scanner = None  # type: ignore[assignment]

_CUT_OFF_TAIL_MAX_CHARS: Final = 1 << 20
"""A cut-off last event longer than this is called corruption, not truncation."""
MAX_NESTING: Final = 512
"""The deepest nesting of arrays and objects the lenient parser reads (real traces nest below 10;
``json`` needs a frame of Python's stack per level)."""
_LONG_INT_DIGITS: Final = 4000
"""Integers with more digits are kept as text: Python's ``int`` refuses more than 4300."""


def parse_lenient(data: Raw, path: Path, compact: Compact) -> ParsedTrace:
    """Parse with Python's ``json`` after repairs; raises traceq errors for what cannot be read."""
    warnings: list[str] = []
    raw = data if isinstance(data, bytes | bytearray) else bytes(data)
    text = _decode(raw, warnings)
    if not text.strip():
        raise EmptyTraceError("the file is empty", path=path, hint="the profiler wrote nothing; profile again")
    if nesting_depth(raw if _scanner is not None else text) > MAX_NESTING:
        raise _too_deep(path)
    try:
        doc = _load_repaired(text, path, warnings)
    except RecursionError:  # the check above leaves room; a caller deep in its own stack may not
        raise _too_deep(path) from None
    if isinstance(doc, dict):
        if "traceEvents" not in doc:
            raise UnsupportedFormatError(
                "JSON object without a traceEvents key is not a Chrome trace",
                path=path,
                hint='traceq reads PyTorch profiler / Chrome-trace JSON ({"traceEvents": [...]} or [...])',
            )
        events = doc.pop("traceEvents")
        if not isinstance(events, list):
            raise UnsupportedFormatError(
                f"traceEvents is a JSON {type(events).__name__}, not an array",
                path=path,
                hint="the file is not a Chrome trace",
            )
        container: Container = "object"
        top: dict[str, Any] = doc
    elif isinstance(doc, list):
        events, container, top = doc, "array", {}
    else:
        raise UnsupportedFormatError(
            f"JSON {type(doc).__name__} is not a trace", path=path, hint="expected a JSON object or array of events"
        )
    if not events:
        raise EmptyTraceError(
            "the trace holds no events", path=path, hint="the profiler recorded nothing; profile again"
        )
    if not any(isinstance(e, dict) for e in events):
        raise UnsupportedFormatError(
            "the JSON array holds no event objects",
            path=path,
            hint="traceq reads PyTorch profiler / Chrome-trace JSON",
        )
    frame, non_objects = _events_to_frame(events, clean=_needs_surrogate_cleaning(text))
    frame, cut = cut_long_texts(frame)
    return ParsedTrace(compact(frame), top, container, "lenient", non_objects, (*warnings, *cut_warnings(cut)))


_STRING_TEXT: Final = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKET: Final = re.compile(r"[^\[\]{}]+")


def nesting_depth(text: str | bytes | bytearray) -> int:
    """How deep arrays and objects nest in the JSON ``text`` (brackets inside strings aside), counted
    without recursion, and no further than ``MAX_NESTING + 1``: by the compiled ``nesting_depth``
    over bytes, else as the brackets' running sum."""
    if not isinstance(text, str):
        if _scanner is not None:
            return _scanner.nesting_depth(text, MAX_NESTING)
        text = text.decode("utf-8", errors="replace")
    brackets = _NOT_BRACKET.sub("", _STRING_TEXT.sub("", text)).encode("ascii")
    codes = np.frombuffer(brackets, dtype=np.uint8)
    steps = np.isin(codes, (ord("["), ord("{"))).astype(np.int32) - np.isin(codes, (ord("]"), ord("}")))
    return min(int(np.cumsum(steps).max(initial=0)), MAX_NESTING + 1)


def _too_deep(path: Path) -> LimitExceededError:
    return LimitExceededError(
        f"JSON values are nested more than {MAX_NESTING} levels deep, which no trace writer does",
        path=path,
        hint="the file is damaged or not a trace",
    )


def _decode(data: bytes | bytearray, warnings: list[str]) -> str:
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        warnings.append(f"invalid UTF-8 (first at byte {exc.start}) replaced by U+FFFD")
        return data.decode("utf-8", errors="replace")


_TOKEN: Final = re.compile(
    r'(?P<string>"(?:[^"\\]|\\.)*")|(?P<bare>\bN/A\b|-?\bnan\b|-?\binf\b|\bundefined\b)', re.DOTALL
)
_ESCAPE: Final = re.compile(r'\\(?:[\\"/bfnrt]|u[0-9a-fA-F]{4})?')
"""A valid escape, or a lone backslash (group empty) that must be doubled."""


def _load_repaired(text: str, path: Path, warnings: list[str]) -> Any:
    try:
        return decoder(strict=True).decode(text)
    except json.JSONDecodeError:
        pass
    repaired, notes = _repair(text)
    warnings.extend(notes)
    start = len(repaired) - len(repaired.lstrip())
    lenient = decoder(strict=False)
    try:
        doc, end = lenient.raw_decode(repaired, start)
    except json.JSONDecodeError as exc:
        if repaired[start : start + 1] == "[":
            return _recover_cut_off_array(repaired, start, lenient, path, warnings)
        raise _corrupt(path, exc) from exc
    trailing = repaired[end:].strip()
    if trailing:
        warnings.append(f"ignored {len(trailing)} characters of trailing garbage after the JSON value")
    return doc


def _repair(text: str) -> tuple[str, list[str]]:
    """Escape stray backslashes in strings; turn bare N/A, nan, inf, undefined into null.

    Control characters inside strings need no edit: the decoder is run with ``strict=False``.
    """
    counts = {"escape": 0, "bare": 0}

    def fix(match: re.Match[str]) -> str:
        token = match.group(0)
        if match.group("bare") is not None:
            counts["bare"] += 1
            return "null"
        if "\\" not in token:
            return token
        stray = 0

        def double_lone(escape: re.Match[str]) -> str:
            nonlocal stray
            if len(escape.group(0)) > 1:
                return escape.group(0)
            stray += 1
            return "\\\\"

        fixed = _ESCAPE.sub(double_lone, token[1:-1])
        counts["escape"] += stray
        return f'"{fixed}"' if stray else token

    repaired = _TOKEN.sub(fix, text)
    notes = ["the file is not strict JSON; read with the lenient parser"]
    if counts["escape"]:
        notes.append(f"escaped {counts['escape']} stray backslashes inside strings")
    if counts["bare"]:
        notes.append(f"read {counts['bare']} bare N/A/nan/inf/undefined tokens as null")
    return repaired, notes


def _recover_cut_off_array(
    text: str, start: int, lenient: json.JSONDecoder, path: Path, warnings: list[str]
) -> list[Any]:
    """Array form whose writer stopped early: keep every complete element, drop a cut-off last one."""
    items: list[Any] = []
    pos = start + 1
    while True:
        pos = _skip_ws(text, pos)
        if pos >= len(text):
            warnings.append(UNCLOSED_ARRAY_WARNING)
            return items
        if text[pos] == "]" and not items:
            return items
        try:
            item, pos = lenient.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            if _is_cut_off(text, pos):
                warnings.append(
                    f"the event array is cut off inside its last event (from character {pos}); "
                    f"{len(items)} complete events were read"
                )
                return items
            raise _corrupt(path, exc) from exc
        items.append(item)
        pos = _skip_ws(text, pos)
        if pos < len(text) and text[pos] == ",":
            pos += 1
        elif pos < len(text) and text[pos] == "]":
            trailing = text[pos + 1 :].strip()
            if trailing:
                warnings.append(f"ignored {len(trailing)} characters of trailing garbage after the JSON value")
            return items
        elif pos < len(text):
            raise _corrupt_at(path, text, pos, "expected ',' or ']' between events")


def _is_cut_off(text: str, pos: int) -> bool:
    """Whether ``text[pos:]`` is one value that the file ends inside of (rather than bad syntax)."""
    tail = text[pos:]
    if len(tail) > _CUT_OFF_TAIL_MAX_CHARS:
        return False
    depth, in_string, escaped = 0, False, False
    for ch in tail:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
            if depth <= 0:
                return False
    return depth > 0 or in_string


def _skip_ws(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t\r\n":
        pos += 1
    return pos


def _corrupt(path: Path, exc: json.JSONDecodeError) -> CorruptTraceError:
    return CorruptTraceError(
        f"invalid JSON at line {exc.lineno}, column {exc.colno} ({exc.msg})",
        path=path,
        hint="the file is damaged or was not fully written; re-export the trace",
    )


def _corrupt_at(path: Path, text: str, pos: int, what: str) -> CorruptTraceError:
    line = text.count("\n", 0, pos) + 1
    column = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return CorruptTraceError(
        f"invalid JSON at line {line}, column {column} ({what})",
        path=path,
        hint="the file is damaged or was not fully written; re-export the trace",
    )


# Python values -> raw frame, with polars' conversions


_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def _needs_surrogate_cleaning(text: str) -> bool:
    return "\\ud" in text or "\\uD" in text


def _as_text(value: Any, clean: bool) -> str | None:
    """A value read into a string field, spelled the way polars spells it."""
    if value is None:
        return None
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value) if clean else value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return float_text(value)
    return json.dumps(value, ensure_ascii=False)


def _as_float(value: Any, clean: bool) -> float | None:
    return float_of_value(value)


def _as_int(value: Any, clean: bool) -> int | None:
    return int_of_value(value)


def _as_triple(value: Any) -> Triple:
    if isinstance(value, list):
        return triple_of_list(value)
    if isinstance(value, str):
        return triple_of_text(value)
    return NO_TRIPLE


_Converter = Callable[[Any, bool], Any]


def _converter(dtype: pl.DataType) -> _Converter:
    if dtype in (pl.String(), pl.Categorical()):
        return _as_text
    if dtype == pl.Float64():
        return _as_float
    return _as_int


_TOP_CONVERTERS: Final = [(name, _converter(dtype)) for name, dtype in TOP_FIELDS.items()]
_ARG_CONVERTERS: Final = [(name, _converter(dtype)) for name, dtype in ARG_FIELDS.items()]


def _events_to_frame(events: Iterable[Any], *, clean: bool) -> tuple[pl.DataFrame, int]:
    columns: dict[str, list[Any]] = {name: [] for name in RAW_SCHEMA.names()}
    top_columns = [(columns[name], name, conv) for name, conv in _TOP_CONVERTERS]
    arg_columns = [(columns[f"args.{name}"], name, conv) for name, conv in _ARG_CONVERTERS]
    triple_columns = [(name, [columns[f"{name}_{axis}"] for axis in "xyz"]) for name in TRIPLE_FIELDS]
    index = columns["idx"]
    non_objects = 0
    for position, event in enumerate(events):
        if not isinstance(event, dict):
            non_objects += 1
            continue
        index.append(position)
        for column, name, conv in top_columns:
            column.append(conv(event.get(name), clean))
        args = event.get("args")
        if not isinstance(args, dict):
            args = {}
        for column, name, conv in arg_columns:
            column.append(conv(args.get(name), clean))
        for name, parts in triple_columns:
            for part, value in zip(parts, _as_triple(args.get(name)), strict=True):
                part.append(value)
    return pl.DataFrame(columns, schema=RAW_SCHEMA), non_objects
