"""The JSON report's text is what ``json.dumps(value, indent=1, sort_keys=True)`` writes, byte for
byte, whichever values it holds: traceq writes it faster, never differently."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import traceq
from traceq.report import json_text

from ..conftest import SAMPLES


def standard(value: Any) -> str:
    return json.dumps(value, indent=1, sort_keys=True)


scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text()  # any code point: control characters, quotes, backslashes, surrogates, emoji
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=5) | st.tuples(inner, inner) | st.dictionaries(st.text(max_size=8), inner, max_size=5)
    ),
    max_leaves=40,
)


@given(values)
def test_any_json_value_is_written_as_the_standard_library_writes_it(value: Any) -> None:
    assert json_text.dumps(value) == standard(value)


@pytest.mark.parametrize(
    "value",
    [
        {},
        [],
        {"a": {}, "b": [], "c": [{}], "d": [[]]},
        {"b": 1, "a": 2, "B": 3, "é": 4, "": 5},  # sorted as the standard library sorts: by code point
        [True, False, None, 1, 1.0, -0.0, 1e300, 5e-324, math.nan, math.inf, -math.inf],
        ["<script>", 'quote " and \\ backslash', "\x00\x1f\x7f", "\u2028\u2029", "\U0001f600", "\ud800"],
    ],
)
def test_edge_values_are_written_as_the_standard_library_writes_them(value: Any) -> None:
    assert json_text.dumps(value) == standard(value)


def test_subclasses_of_the_json_types_are_written_as_their_base_types() -> None:
    class Name(str):
        pass

    class Count(int):
        pass

    class Share(float):
        pass

    class Row(dict[str, Any]):
        pass

    value = Row(name=Name("k"), count=Count(3), share=Share(0.25), flags=(True,))
    assert json_text.dumps(value) == standard(value)


@pytest.mark.parametrize("value", [{1: "a"}, {None: 1}, {"a": {2.5: 1}}])
def test_a_key_that_is_not_a_string_is_refused(value: Any) -> None:
    with pytest.raises(TypeError, match="keys are strings"):
        json_text.dumps(value)


@pytest.mark.parametrize("value", [object(), {"a": {1, 2}}, [b"bytes"]])
def test_a_value_json_cannot_hold_is_refused_as_the_standard_library_refuses_it(value: Any) -> None:
    with pytest.raises(TypeError, match="not JSON serializable"):
        standard(value)
    with pytest.raises(TypeError, match="not JSON serializable"):
        json_text.dumps(value)


@pytest.mark.parametrize(
    "sample",
    ["training_step.nsys.sqlite", "clean_step.pt.trace.json.gz", "ranks", "before_after/input_stall.pt.trace.json.gz"],
)
def test_the_reports_of_the_samples_are_written_byte_for_byte(sample: str) -> None:
    payload = traceq.report(Path(SAMPLES / sample)).to_dict()
    assert json_text.dumps(payload) == standard(payload)
