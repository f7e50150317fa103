"""The text of a JSON report: what ``json.dumps(value, indent=1, sort_keys=True)`` writes, written
in about half the time.

The JSON report's layout (one space of indent per level, sorted keys, ASCII with ``\\u`` escapes)
is its contract, and :func:`dumps` writes exactly those bytes.  The standard library writes an
indented document with its pure-Python encoder (its C encoder knows no indent), a chain of
generators that costs a quarter of a second on the report of a 20 M-row trace (9,000 steps).
This writer walks the same tree with one list of pieces, and leaves each string to the same C
function the standard library calls (``encode_basestring_ascii``); numbers are written by
``int.__repr__`` and ``float.__repr__`` as there (``NaN`` and ``Infinity`` too).  Keys must be
strings, as in every report (:func:`traceq.report.jsonschema.to_jsonable` writes them so).
``tests/report/test_json_text.py`` checks the bytes against ``json.dumps`` on the reports of the
sample traces and on drawn values.
"""

from __future__ import annotations

from json.encoder import encode_basestring_ascii
from typing import Any, Final

_INFINITY: Final = float("inf")


def dumps(value: Any) -> str:
    """``json.dumps(value, indent=1, sort_keys=True)``, the same text; raises ``TypeError`` on a
    value JSON cannot hold or a key that is not a string."""
    pieces: list[str] = []
    _write(value, pieces, "\n")
    return "".join(pieces)


def _write(value: Any, pieces: list[str], newline: str) -> None:
    """Append ``value`` at the depth ``newline`` (a line break and the indent of ``value``'s line) gives."""
    kind = type(value)
    if kind is str:
        pieces.append(encode_basestring_ascii(value))
    elif kind is int:
        pieces.append(int.__repr__(value))
    elif isinstance(value, dict):
        if not value:
            pieces.append("{}")
            return
        inner = newline + " "
        opening = "{" + inner
        for key in sorted(value):
            if not isinstance(key, str):
                raise TypeError(f"a JSON report's keys are strings, not {type(key).__name__}")
            pieces.append(opening + encode_basestring_ascii(key) + ": ")
            opening = "," + inner
            _write(value[key], pieces, inner)
        pieces.append(newline + "}")
    elif isinstance(value, list | tuple):
        if not value:
            pieces.append("[]")
            return
        inner = newline + " "
        opening = "[" + inner
        for item in value:
            pieces.append(opening)
            opening = "," + inner
            _write(item, pieces, inner)
        pieces.append(newline + "]")
    else:
        pieces.append(_scalar(value))


def _scalar(value: Any) -> str:
    if isinstance(value, str):
        return encode_basestring_ascii(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float):
        if value != value:
            return "NaN"
        if value == _INFINITY:
            return "Infinity"
        if value == -_INFINITY:
            return "-Infinity"
        return float.__repr__(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")
