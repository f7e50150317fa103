"""The compiled scanner of the Kineto fast path (``_scanner.c`` through ``scanner``).

Specification: on any strict-JSON trace the scanner either declines or reads exactly what the
lenient path (Python's ``json``) reads -- checked here on generated events with every value kind a
field can meet -- and it declines, never guesses, on anything that is not strict JSON.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from traceq import schema
from traceq.importers.arrow_capsule import series_of
from traceq.importers.kineto import raw_frame, scanner, trace_bytes
from traceq.importers.kineto.importer import read_kineto

TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)
NUMBER = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0, -0.0, 1e300, 5e-324, 2**63, -(2**63), 2**53 + 1, 1.5, 1699999999999.123]),
)
SCALAR = st.one_of(st.none(), st.booleans(), NUMBER, TEXT, st.sampled_from(["stream 7", "0x1f", "7.0", " 12 "]))
VALUE = st.recursive(
    SCALAR, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3), max_leaves=8
)
TRIPLE = st.one_of(
    st.lists(st.integers(min_value=-(2**40), max_value=2**40), min_size=3, max_size=3),
    st.lists(SCALAR, min_size=0, max_size=4),
    st.builds(
        lambda x, y, z, sep: f"[{x}{sep},{sep}{y},{z}{sep}]",
        st.integers(),
        st.integers(),
        st.integers(),
        st.sampled_from(["", " ", "\t", "\n"]),
    ),
    st.sampled_from(["grid(100,)", "[1, 2]", "[01, 2, 3]", "[1.0, 2, 3]"]),
    SCALAR,
)
ARG_KEYS = [
    "correlation",
    "External id",
    "external id",
    "device",
    "stream",
    "context",
    "bytes",
    "registers per thread",
    "shared memory",
    "graph id",
    "Collective name",
    "name",
    "Input Dims",
]
TOP_KEYS = ["ph", "cat", "name", "pid", "tid", "ts", "dur", "id", "bp", "s"]


@st.composite
def events(draw: st.DrawFn) -> dict[str, Any]:
    event: dict[str, Any] = {
        "ph": draw(st.sampled_from(["X", "X", "X", "i", "B", "E", "s", "f", "M", "C"])),
        "ts": draw(st.one_of(NUMBER, st.none())),
    }
    for key in draw(st.lists(st.sampled_from(TOP_KEYS), max_size=6, unique=True)):
        event[key] = draw(st.one_of(SCALAR, NUMBER) if key in ("ts", "dur") else SCALAR)
    if draw(st.booleans()):
        args: dict[str, Any] = {}
        for key in draw(st.lists(st.sampled_from(ARG_KEYS), max_size=6, unique=True)):
            args[key] = draw(VALUE if key == "Input Dims" else SCALAR)
        for key in ("grid", "block"):
            if draw(st.booleans()):
                args[key] = draw(TRIPLE)
        event["args"] = args
    # Only values of a kind the field can take keep the scanner on the fast path; the others are
    # covered by the decline tests below.
    for key in ("ts", "dur"):
        if isinstance(event.get(key), str | list | dict):
            del event[key]
    return event


def _number_fields_hold_numbers(event: dict[str, Any]) -> bool:
    numeric = (
        "correlation",
        "External id",
        "external id",
        "context",
        "bytes",
        "registers per thread",
        "shared memory",
        "graph id",
    )
    args = event.get("args", {})
    return not any(isinstance(args.get(key), str | list | dict) for key in numeric)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(events(), min_size=1, max_size=12), st.sampled_from(["compact", "pretty", "ascii"]))
def test_the_scanner_reads_exactly_what_pythons_json_reads(
    tmp_path_factory: pytest.TempPathFactory, batch: list[dict[str, Any]], layout: str
) -> None:
    batch = [e for e in batch if _number_fields_hold_numbers(e)] or [{"ph": "X", "ts": 1, "dur": 1}]
    batch.append({"ph": "X", "ts": 1, "dur": 1, "name": "anchor"})  # never an empty trace
    doc = {"traceEvents": batch}
    text = {
        "compact": json.dumps(doc, ensure_ascii=False, separators=(",", ":")),
        "pretty": json.dumps(doc, ensure_ascii=False, indent=2),
        "ascii": json.dumps(doc),
    }[layout]
    path = tmp_path_factory.mktemp("scan") / "t.json"
    path.write_text(text, encoding="utf-8")
    lenient = read_kineto(path, parser="lenient")
    fast = read_kineto(path)
    if fast.meta.properties["traceq.parser"] != "fast":
        # json.dumps escapes non-ASCII keys in the ascii layout: the scanner declines escaped keys.
        assert layout == "ascii"
        assert any("a key holds a backslash escape" in w for w in fast.meta.warnings)
        return
    assert schema.to_polars(fast.events).equals(schema.to_polars(lenient.events))
    assert fast.stats == lenient.stats


def test_numbers_are_read_correctly_rounded_like_python(tmp_path: Path) -> None:
    texts = [
        "0.1",
        "1699999999999.123",
        "123456789012345678901234567890",
        "1e-7",
        "2.5e-3",
        "9007199254740993",
        "18446744073709551621",  # 2**64 + 5: twenty digits, more than a uint64 mantissa holds
        "0.30000000000000004",
        "1.7976931348623157e308",
        "4.9e-324",
        "-0.0",
        "1E+2",
        "-12.5e1",
    ]
    events = ",".join(f'{{"ph":"C","name":"n{i}","pid":1,"tid":1,"ts":{t},"args":{{}}}}' for i, t in enumerate(texts))
    buf = ("[" + events + "]").encode()
    spec = scanner.FieldSpec.of({"idx": pl.UInt32(), "ts": pl.Float64()}, ())
    block = scanner.scan_block(buf, 1, len(buf), first=True, spec=spec, first_index=0)
    got = block.frame["ts"].to_list()
    assert [math.copysign(1, v) * abs(v) for v in got] == [float(t) for t in texts]
    assert block.closed and block.events == len(texts)


@st.composite
def json_numbers(draw: st.DrawFn) -> str:
    """JSON number texts of every length around the scanner's eight-digit steps and its 19-digit
    mantissa: integer parts of 1-25 digits, fractions of 1-25 digits (leading zeros included)."""
    sign = draw(st.sampled_from(["", "-"]))
    integer = draw(st.one_of(st.just("0"), st.builds(str.__add__, st.sampled_from("123456789"), st.text("0123456789"))))
    fraction = draw(st.one_of(st.just(""), st.text("0123456789", min_size=1, max_size=25).map(lambda d: "." + d)))
    exponent = draw(
        st.one_of(
            st.just(""),
            st.builds(
                lambda e, s, d: f"{e}{s}{d}", st.sampled_from("eE"), st.sampled_from(["", "+", "-"]), st.integers(0, 40)
            ),
        )
    )
    return sign + integer[:25] + fraction + exponent


def _as_int64_field(text: str) -> int | None:
    """What an integer field holds for a JSON number: a plain integer in int64's range, or an
    integral number whose double is below 2**63 in magnitude; else null."""
    if text.lstrip("-").isdigit():
        value = int(text)
        return value if -(2**63) <= value < 2**63 else None
    as_float = float(text)
    return int(as_float) if math.isfinite(as_float) and as_float == int(as_float) and abs(as_float) < 2**63 else None


@settings(max_examples=300, deadline=None)
@given(st.lists(json_numbers(), min_size=1, max_size=16), st.sampled_from(["", " ", "\n      "]))
def test_numbers_of_every_length_read_as_python_reads_them(texts: list[str], space: str) -> None:
    # Each number three times: a float field, an integer field, and a key the scanner skips (which
    # it validates all the same); the last one ends the buffer, where no eight-byte step fits.
    events = ",".join(f'{{"ph":"C","ts":{space}{t},"args":{{"correlation":{t},"skipped":{t}{space}}}}}' for t in texts)
    buf = ("[" + events + "]").encode()
    spec = scanner.FieldSpec.of({"idx": pl.UInt32(), "ts": pl.Float64(), "args.correlation": pl.Int64()}, ())
    block = scanner.scan_block(buf, 1, len(buf), first=True, spec=spec, first_index=0)
    assert block.closed and block.events == len(texts)
    floats = block.frame["ts"].to_list()
    assert [(v, math.copysign(1, v)) for v in floats] == [(float(t), math.copysign(1, float(t))) for t in texts]
    assert block.frame["args.correlation"].to_list() == [_as_int64_field(t) for t in texts]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("[1, 2, 3]", (1, 2, 3)),
        ("[\n  128,\n  1,\n  1\n]", (128, 1, 1)),
        ("[2147483648, -2147483648, 0]", (None, -(2**31), 0)),
        ("[1.0, 2, 3]", (None, None, None)),
        ("[1, 2]", (None, None, None)),
        ("[true, 2, 3]", (None, None, None)),
        ('"[4, 5, 6]"', (4, 5, 6)),
        ('"[4,\\t5, 6]"', (4, 5, 6)),
        ('"grid(100,)"', (None, None, None)),
        ("{}", (None, None, None)),
        ("7", (None, None, None)),
    ],
)
def test_a_kernel_grid_is_read_into_three_int32_columns(value: str, expected: tuple[int | None, ...]) -> None:
    buf = f'[{{"ph":"X","ts":1,"args":{{"grid":{value}}}}}]'.encode()
    spec = scanner.FieldSpec.of(
        {"idx": pl.UInt32(), "grid_x": pl.Int32(), "grid_y": pl.Int32(), "grid_z": pl.Int32()}, ("grid",)
    )
    frame = scanner.scan_block(buf, 1, len(buf), first=True, spec=spec, first_index=0).frame
    assert frame.select("grid_x", "grid_y", "grid_z").row(0) == expected
    lenient = raw_frame.triple_of_list(json.loads(value)) if value.startswith("[") else None
    if lenient is not None:
        assert lenient == expected


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ('{"ph":"X","ts":01}', "not JSON"),
        ('{"ph":"X","ts":1.}', "not JSON"),
        ('{"ph":"X","ts":NaN}', "bare word"),
        ('{"ph":"X","ts":1,}', "not a string"),
        ('{"ph":"X" "ts":1}', "missing ','"),
        ('{"ph":{"a":1},"ts":1}', "where ph should be text"),
        ('{"p\\u0068":"X","ts":1}', "key holds a backslash escape"),
        ('{"ph":"\\ud800","ts":1}', "unpaired surrogate"),
        ('{"ph":"\\x","ts":1}', "invalid backslash escape"),
        ('{"ph":"a\tb","ts":1}', "raw control character"),
        ('{"ph":"X","ts":1}{"ph":"X"}', "missing ','"),
        ('{"ph":"X","ts":1},]', "trailing comma"),
        ("1", "not an object"),
        ('{"ph":"X","ts":1}}', "closes with '}'"),
        ('{"ph":"X","ts":tru}', "bare word"),
        ('{"ph":"X","ts":1,"name":"cut', "cut off"),
    ],
)
def test_the_scanner_declines_what_is_not_strict_json(body: str, reason: str) -> None:
    buf = ("[" + body + "]").encode()
    spec = scanner.FieldSpec.of(
        {"idx": pl.UInt32(), "ph": pl.String(), "ts": pl.Float64(), "args.correlation": pl.Int64()}, ()
    )
    with pytest.raises(scanner.FastPathDeclined, match=reason.replace("(", r"\(")):
        scanner.scan_block(buf, 1, len(buf), first=True, spec=spec, first_index=0)


NUMBER_TEXTS = [
    "616", "0", "-0", "-12", "007", "00", "0x268", "0o17", "0b11", " 616 ", "1_000", "+5", "1.5", "1e3",
    "nan", "inf", "-", "", "abc", "\\u0036\\u0031\\u0036", "999999999999999999", "9223372036854775807",
    "9223372036854775808", "-9223372036854775809", "12345678901234567890123",
]  # fmt: skip
"""Strings in a number field: ROCm's HIP rows write ``"bytes": "616"``; the odd spellings are the edges."""


@pytest.mark.parametrize("text", NUMBER_TEXTS)
def test_a_string_in_a_number_field_is_read_as_the_lenient_path_reads_it(text: str) -> None:
    literal = '"' + text + '"'  # the escaped case is JSON escapes of "616"
    buf = f'[{{"ph":"X","ts":{literal},"args":{{"correlation":{literal}}}}}]'.encode()
    spec = scanner.FieldSpec.of({"idx": pl.UInt32(), "ts": pl.Float64(), "args.correlation": pl.Int64()}, ())
    frame = scanner.scan_block(buf, 1, len(buf), first=True, spec=spec, first_index=0).frame
    value = json.loads(literal)
    expected = (raw_frame.float_of_value(value), raw_frame.int_of_value(value))
    assert repr(frame.row(0)[1:]) == repr(expected)  # repr: nan equals nan


def test_plain_decimal_strings_are_read_by_the_scanner_itself() -> None:
    """The common ROCm case costs no Python per value: no fixup record comes back for it."""
    buf = b'[{"ph":"X","args":{"correlation":"616"}},{"ph":"X","args":{"correlation":"-42"}}]'
    spec = scanner.FieldSpec.of({"idx": pl.UInt32(), "args.correlation": pl.Int64()}, ())
    scanned = scanner.scan(buf, 1, len(buf), first=True, spec=spec)
    assert len(scanned.fixups) == 0
    frame = scanner.to_block(buf, scanned, spec=spec, first_index=0).frame
    assert frame["args.correlation"].to_list() == [616, -42]


def test_an_object_or_array_in_a_number_field_is_null_as_on_the_lenient_path() -> None:
    buf = b'[{"ph":"X","ts":{"a":[1]},"args":{"correlation":[3]}}]'
    spec = scanner.FieldSpec.of({"idx": pl.UInt32(), "ts": pl.Float64(), "args.correlation": pl.Int64()}, ())
    frame = scanner.scan_block(buf, 1, len(buf), first=True, spec=spec, first_index=0).frame
    assert frame.row(0)[1:] == (None, None)


@pytest.mark.parametrize("raw", [b"\xff", b"\xc0\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe2\x82"])
def test_invalid_utf8_in_a_string_is_declined(raw: bytes) -> None:
    buf = b'[{"ph":"X","name":"a' + raw + b'b","ts":1}]'
    spec = scanner.FieldSpec.of({"idx": pl.UInt32(), "name": pl.String()}, ())
    with pytest.raises(scanner.FastPathDeclined, match="invalid UTF-8"):
        scanner.scan_block(buf, 1, len(buf), first=True, spec=spec, first_index=0)


def test_long_and_escaped_strings_come_back_intact() -> None:
    names = ["", "short", "exactly12byt", "thirteen byte", "ü" * 40, 'q"uo\\te\n', "\U0001f680 rocket " * 3]
    events = ",".join(json.dumps({"ph": "X", "name": n, "ts": 1}, ensure_ascii=i % 2 == 0) for i, n in enumerate(names))
    buf = ("[" + events + "]").encode()
    spec = scanner.FieldSpec.of({"idx": pl.UInt32(), "name": pl.String()}, ())
    frame = scanner.scan_block(buf, 1, len(buf), first=True, spec=spec, first_index=0).frame
    assert frame["name"].to_list() == names


def test_the_python_codes_are_the_compiled_scanners() -> None:
    from traceq.importers.kineto import _scanner

    for name in ("FLOAT", "INT", "TEXT", "TRIPLE", "ARGS", "PART", "TOP", "IN_ARGS", "CLOSED", "OPEN_END"):
        assert getattr(scanner, name) == getattr(_scanner, name), name


def test_without_the_compiled_scanner_the_lenient_path_reads_the_file_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": [{"ph": "X", "name": "k", "ts": 1, "dur": 2, "pid": 1, "tid": 1}]}))
    expected = read_kineto(path)
    monkeypatch.setattr(scanner, "_scanner", None)
    monkeypatch.setattr(trace_bytes, "_scanner", None)  # the same compiled module holds move_pages
    got = read_kineto(path)
    assert got.meta.properties["traceq.parser"] == "lenient"
    assert any(scanner.NOT_BUILT in w for w in got.meta.warnings)
    assert schema.to_polars(got.events).equals(schema.to_polars(expected.events))


# --------------------------------------------------------------------------------------------
# Dictionary encoding of the Categorical text columns

_TEXTS = st.one_of(
    st.none(),
    st.sampled_from(["", "X", "kernel", "cpu_op", "exactly12chr", "thirteen char", "ncclKernel_AllReduce_RING_LL"]),
    st.text(max_size=40),
)


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(values=st.lists(_TEXTS, max_size=60), dirty_padding=st.booleans())
def test_dictionary_encoding_gives_the_categorical_a_cast_gives(values: list[str | None], dirty_padding: bool) -> None:
    # The scanner's text views become Categorical columns through the compiled encode(): the same
    # values as polars' own cast, whatever bytes pad a short string's view.
    array = pa.array(values, type=pa.string_view())
    validity, views, *variadic = array.buffers()
    raw = bytearray(views.to_pybytes())
    if dirty_padding:
        for row in range(len(values)):
            length = int.from_bytes(raw[16 * row : 16 * row + 4], "little")
            if length <= 12:
                raw[16 * row + 4 + length : 16 * row + 16] = b"\xff" * (12 - length)
    nulls = array.null_count
    if nulls == len(values):
        return  # all-null columns are cast, not encoded
    encoded = scanner._dictionary(bytes(raw), len(values), validity if nulls else None, nulls, list(variadic))
    column = series_of("c", encoded)
    assert column.dtype == pl.Categorical
    assert column.to_list() == values
    assert column.n_unique() == pl.Series(values, dtype=pl.String).n_unique()


def _string_views(rows: list[str | None]) -> tuple[bytes, bytes, bytes]:
    """Arrow string views of ``rows`` with every long string in one data buffer, as the scanner
    writes them: (views, validity, data)."""
    views, validity, data = bytearray(), bytearray((len(rows) + 7) // 8), bytearray()
    for row, value in enumerate(rows):
        raw = (value or "").encode()
        if value is not None:
            validity[row // 8] |= 1 << (row % 8)
        if len(raw) <= 12:
            views += len(raw).to_bytes(4, "little") + raw.ljust(12, b"\0")
        else:
            views += len(raw).to_bytes(4, "little") + raw[:4] + bytes(4) + len(data).to_bytes(4, "little")
            data += raw
    return bytes(views), bytes(validity), bytes(data)


@pytest.mark.parametrize("distinct", [1, 511, 512, 513, 5000])
def test_dictionary_encoding_codes_many_distinct_values_in_order_of_first_appearance(distinct: int) -> None:
    # encode()'s table of codes starts with room for 512 values and doubles as it fills: values
    # coded before it grew are found again after (each value comes back, reversed, later), never
    # coded twice.
    values = [f"v{i}" if i % 3 else f"a value longer than twelve bytes, {i}" for i in range(distinct)]
    rows = [*values, None, *values[::-1], *values[::7]]
    views, validity, data = _string_views(rows)
    encoded = scanner._dictionary(views, len(rows), validity, 1, [pa.py_buffer(data)])
    assert encoded.dictionary.to_pylist() == values
    assert encoded.indices.to_pylist() == [None if v is None else values.index(v) for v in rows]
