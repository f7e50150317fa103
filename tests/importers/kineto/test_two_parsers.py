"""The two parsers of the Kineto importer: the columnar fast path and the lenient fallback.

Specification: wherever the fast path accepts a file, both give identical tables and stats; the
fast path declines (never guesses) on anything that is not strict JSON, and the lenient path then
repairs what it can and says so in ``meta.warnings``.
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from traceq import schema
from traceq.errors import CorruptTraceError, UnsupportedFormatError
from traceq.importers.kineto import fast_parser, scanner, trace_bytes
from traceq.importers.kineto.importer import read_kineto
from traceq.importers.kineto.raw_frame import float_text
from traceq.importers.result import ImportResult


def kineto_text(events: list[dict[str, Any]], **top: Any) -> str:
    """Pretty-printed the way libkineto writes: each event spread over several lines."""
    body = ",\n".join("  " + json.dumps(e, indent=4, ensure_ascii=False).replace("\n", "\n  ") for e in events)
    head = "".join(f'  "{k}": {json.dumps(v)},\n' for k, v in top.items())
    return "{\n" + head + '  "traceEvents": [\n' + body + "\n  ]\n}\n"


TRICKY_EVENTS: list[dict[str, Any]] = [
    {"ph": "X", "cat": "cpu_op", "name": 'a "quoted" name', "pid": 7, "tid": 8, "ts": 1.5, "dur": 2},
    {"ph": "X", "cat": "cpu_op", "name": "C:\\path\\to\\file.py(12): fn", "pid": 7, "tid": 8, "ts": 2, "dur": 1},
    {"ph": "X", "cat": "cpu_op", "name": 'tricky }, { and ], [ and \\" inside', "pid": 7, "tid": 8, "ts": 3, "dur": 1},
    {
        "ph": "X",
        "cat": "kernel",
        "name": "ünïcødé ✓ 🚀 kernel",
        "pid": 0,
        "tid": 7,
        "ts": 4,
        "dur": 1,
        "args": {"correlation": 3},
    },
    {
        "ph": "X",
        "cat": "cpu_op",
        "name": "nested",
        "pid": 7,
        "tid": 8,
        "ts": 5,
        "dur": 1,
        "args": {
            "pg_config": [{"a": 1}, {"b": [2, {"c": "}, {"}]}],
            "Input Dims": [[1, 2], []],
            "occupancy": {"x": {}},
        },
    },
    {"ph": "X", "cat": "cpu_op", "name": "float pid", "pid": 7.0, "tid": True, "ts": 6, "dur": 0},
    {"ph": "X", "cat": "Trace", "name": "span", "pid": "Spans", "tid": "stream 7", "ts": 1e3, "dur": 2.5e-3},
    {
        "ph": "X",
        "cat": "cuda_runtime",
        "name": "cudaLaunchKernel",
        "pid": 7,
        "tid": 8,
        "ts": 3.9,
        "dur": 0.2,
        "args": {"correlation": 3},
    },
    {"ph": "s", "id": "0x1f", "pid": 7, "tid": 8, "ts": 3.9, "cat": "ac2g", "name": "ac2g"},
    {"ph": "i", "s": "t", "name": "[memory]", "pid": 7, "tid": 8, "ts": 6.25, "args": {}},
    {"ph": "X", "cat": "kernel", "name": "no args", "pid": 0, "tid": 7, "ts": 7, "dur": 1, "args": None},
    {
        "ph": "X",
        "cat": "kernel",
        "name": "inductor grid",
        "pid": 0,
        "tid": 7,
        "ts": 8,
        "dur": 1,
        "args": {"grid": "grid(100,)"},
    },
    {"ph": "M", "name": "thread_name", "pid": 7, "tid": 8, "args": {"name": "thread 8 (python)"}},
    {"ph": "X", "cat": "cpu_op", "name": "big ts", "pid": 7, "tid": 8, "ts": 1610366387140599, "dur": 14},
]


def both(path: Path) -> tuple[ImportResult, ImportResult]:
    return read_kineto(path, parser="fast"), read_kineto(path, parser="lenient")


def assert_identical(fast: ImportResult, lenient: ImportResult) -> None:
    assert schema.to_polars(fast.events).equals(schema.to_polars(lenient.events))
    assert fast.stats == lenient.stats
    assert fast.meta.properties["traceq.parser"] == "fast"
    assert lenient.meta.properties["traceq.parser"] == "lenient"


@pytest.mark.parametrize(
    "render",
    [
        pytest.param(lambda events: kineto_text(events, schemaVersion=1), id="kineto-pretty"),
        pytest.param(lambda events: json.dumps({"traceEvents": events}, separators=(",", ":")), id="compact"),
        pytest.param(lambda events: kineto_text(events).replace("\n", "\r\n"), id="crlf"),
        pytest.param(lambda events: json.dumps(events, indent=2), id="array-form"),
        pytest.param(lambda events: json.dumps(events)[:-1], id="array-form-unclosed"),
        pytest.param(lambda events: "\ufeff" + json.dumps({"traceEvents": events, "traceName": "t"}), id="bom"),
    ],
)
def test_fast_and_lenient_paths_give_identical_tables(tmp_path: Path, render: Any) -> None:
    path = tmp_path / "t.json"
    path.write_text(render(TRICKY_EVENTS), encoding="utf-8")
    assert_identical(*both(path))


def test_tricky_values_read_as_expected(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text(kineto_text(TRICKY_EVENTS), encoding="utf-8")
    df = schema.to_polars(read_kineto(path, parser="fast").events)
    names = df["name"].cast(pl.String).to_list()
    assert names[:4] == [
        'a "quoted" name',
        "C:\\path\\to\\file.py(12): fn",
        'tricky }, { and ], [ and \\" inside',
        "cudaLaunchKernel",
    ]
    span = df.filter(pl.col("start_ns") == 1_000_000).row(0, named=True)
    # dur 2.5e-3 µs is 2.5 ns, rounded half to even; "Spans" is not a pid.
    assert (span["name"], span["pid"], span["end_ns"]) == ("span", None, 1_000_002)
    float_pid = df.filter(pl.col("name") == "float pid").row(0, named=True)
    assert (float_pid["pid"], float_pid["tid"]) == (7, None)


@pytest.mark.parametrize("chunk_bytes", [1, 2, 3, 5, 7, 13, 64])
def test_tokenizer_chunk_boundaries_do_not_change_the_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk_bytes: int
) -> None:
    path = tmp_path / "t.json"
    path.write_text(kineto_text(TRICKY_EVENTS, schemaVersion=1), encoding="utf-8")
    expected = read_kineto(path, parser="lenient")
    monkeypatch.setattr(fast_parser, "CHUNK_BYTES", chunk_bytes)
    assert_identical(read_kineto(path, parser="fast"), expected)


def test_a_chunk_ending_exactly_after_an_event_on_a_word_boundary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each event is 128 bytes, so 128-byte chunks end right after an event's '}' (whole bit words).
    events = [{"ph": "X", "cat": "cpu_op", "name": "", "pid": 1, "tid": 1, "ts": i, "dur": 1} for i in range(4)]
    lines = [json.dumps(e, separators=(",", ":")) for e in events]
    lines = [line.replace('"name":""', '"name":"' + "n" * (128 - len(line)) + '"') for line in lines]
    assert {len(line) for line in lines} == {128}
    path = tmp_path / "t.json"
    path.write_text("[" + ",".join(lines) + "]")
    monkeypatch.setattr(fast_parser, "CHUNK_BYTES", 128)
    assert_identical(*both(path))


@pytest.mark.parametrize("layout", ["pretty", "compact"])
def test_a_scanner_pass_ends_right_after_the_first_event_that_reaches_its_limit(layout: str) -> None:
    text = kineto_text(TRICKY_EVENTS) if layout == "pretty" else json.dumps({"traceEvents": TRICKY_EVENTS})
    buf = text.encode()
    _, start = fast_parser.locate_event_array(buf)
    spec = scanner.FieldSpec.of({"idx": pl.UInt32(), "ph": pl.Categorical()}, ())
    at, first, seen = start + 1, True, 0
    while True:
        block = scanner.scan_block(buf, at, at + 50, first=first, spec=spec, first_index=seen)
        piece = buf[at : block.consumed].decode().strip().removeprefix(",")
        assert json.loads(f"[{piece}]") == TRICKY_EVENTS[seen : seen + block.events]
        assert block.frame["idx"].to_list() == list(range(seen, seen + block.events))
        if not block.closed:
            assert buf[block.consumed - 1 : block.consumed] == b"}" and block.consumed >= at + 50
        seen += block.events
        at, first = block.consumed, False
        if block.closed:
            break
    assert seen == len(TRICKY_EVENTS)


def test_non_string_names_are_left_to_the_lenient_path_which_keeps_their_json_text(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text(
        json.dumps([{"ph": "X", "cat": {"odd": 1}, "name": ["a", 1], "pid": 1, "tid": 1, "ts": 1, "dur": 1}])
    )
    with pytest.raises(UnsupportedFormatError, match="fast JSON path declined"):
        read_kineto(path, parser="fast")
    df = schema.to_polars(read_kineto(path).events)
    assert df.select(pl.col("name", "category").cast(pl.String)).row(0) == ('["a", 1]', '{"odd": 1}')


def test_escaped_surrogate_pairs_stay_on_the_fast_path(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text(event_text('"pair \\ud83d\\ude80 and \\\\ud800 as text"'))
    fast, lenient = both(path)
    assert_identical(fast, lenient)
    assert schema.to_polars(fast.events)["name"].cast(pl.String).to_list() == ["ok", "pair 🚀 and \\ud800 as text"]


def test_duplicate_keys_keep_the_first_value_on_both_paths(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text(
        '{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "first", "name": "second", "pid": 0, "tid": 7, '
        '"ts": 1, "dur": 1, "args": {"correlation": 1, "correlation": 2}}]}'
    )
    fast, lenient = both(path)
    assert_identical(fast, lenient)
    assert schema.to_polars(fast.events).select(pl.col("name").cast(pl.String), "correlation").row(0) == ("first", 1)


@pytest.mark.parametrize(
    "value",
    [
        "1e20",
        "1.5e-7",
        "123456789.123",
        "0.1",
        "1e16",
        "-0.0",
        "1.0",
        "3.14159265358979",
        "5e-324",
        "0.30000000000000004",
    ],
)
def test_numbers_in_string_fields_are_spelled_like_polars_spells_them(value: str) -> None:
    polars_text = pl.read_ndjson(f'{{"a": {value}}}'.encode(), schema={"a": pl.String})["a"][0]
    assert float_text(json.loads(value)) == polars_text


# --------------------------------------------------------------------------------------------
# What the fast path declines, and how the lenient path repairs it


def event_text(name_json: str, *, dur: str = "1", args: str = "{}") -> str:
    return (
        '{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "ok", "pid": 1, "tid": 1, "ts": 1, "dur": 1},\n'
        f'{{"ph": "X", "cat": "cpu_op", "name": {name_json}, "pid": 1, "tid": 1, "ts": 2, "dur": {dur}, '
        f'"args": {args}}}]}}'
    )


@pytest.mark.parametrize(
    ("raw", "name", "warning"),
    [
        pytest.param(
            event_text('"C:\\Users\\me\\data\\x.py \\u12"').encode(),
            "C:\\Users\\me\\data\\x.py \\u12",
            "escaped 5 stray backslashes",
            id="unescaped-backslash",
        ),
        pytest.param(event_text('"two\nlines"').encode(), "two\nlines", "raw line break", id="raw-newline"),
        pytest.param(event_text('"bell\x07"').encode(), "bell\x07", "not strict JSON", id="control-character"),
        pytest.param(event_text('"caf\xe9"').encode("latin-1"), "caf\ufffd", "invalid UTF-8", id="invalid-utf8"),
        pytest.param(
            event_text('"lone \\ud800 surrogate"').encode(), "lone \ufffd surrogate", "surrogate", id="lone-surrogate"
        ),
    ],
)
def test_lenient_path_repairs_strings_the_fast_path_declines(
    tmp_path: Path, raw: bytes, name: str, warning: str
) -> None:
    path = tmp_path / "t.json"
    path.write_bytes(raw)
    with pytest.raises(UnsupportedFormatError, match="fast JSON path declined"):
        read_kineto(path, parser="fast")
    result = read_kineto(path)
    df = schema.to_polars(result.events)
    assert df["name"].cast(pl.String).to_list() == ["ok", name]
    assert result.meta.properties["traceq.parser"] == "lenient"
    assert any(warning in w for w in result.meta.warnings), result.meta.warnings


@pytest.mark.parametrize("token", ["NaN", "N/A", "nan", "-Infinity", "undefined"])
def test_bare_non_json_numbers_read_as_null(tmp_path: Path, token: str) -> None:
    path = tmp_path / "t.json"
    path.write_text(event_text('"odd dur"', dur=token, args=f'{{"bytes": {token}}}'))
    result = read_kineto(path)
    df = schema.to_polars(result.events)
    assert df.select(pl.col("name").cast(pl.String), "start_ns", "end_ns", "bytes").rows() == [
        ("ok", 1000, 2000, None),
        ("odd dur", 2000, 2000, None),
    ]
    assert "1 X events have no dur; read as zero-length" in result.meta.warnings


def test_trailing_garbage_is_ignored_with_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text(event_text('"b"') + "\n\x00\x00 garbage")
    result = read_kineto(path)
    assert result.events.num_rows == 2
    assert any("trailing garbage" in w for w in result.meta.warnings)


def test_a_declined_fast_path_is_reported_in_the_warnings(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text(event_text('"C:\\path"'))
    warnings = read_kineto(path).meta.warnings
    assert warnings[0].startswith("the fast JSON path declined the file (an invalid backslash escape")
    assert warnings[0].endswith("it was read with the slower lenient parser")


def test_non_object_elements_are_skipped_and_counted(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text('[{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1}, 5, "x", null]')
    result = read_kineto(path)
    assert result.events.num_rows == 1
    counts = {c.category: (c.events, c.rows, dict(c.skipped)) for c in result.stats.counts}
    assert counts["(not an event object)"] == (3, 0, {"not a JSON object": 3})
    assert result.stats.events == 4


def test_a_gzip_trace_is_parsed_while_it_inflates_with_the_same_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Inflating 500 bytes at a time with 300-byte passes, most passes run into the end of what has
    # arrived and wait for more; the table must not change.
    plain = tmp_path / "t.json"
    plain.write_text(kineto_text(TRICKY_EVENTS * 20, schemaVersion=1), encoding="utf-8")
    packed = tmp_path / "t.json.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    monkeypatch.setattr(trace_bytes, "_READ_STEP_BYTES", 500)
    monkeypatch.setattr(fast_parser, "CHUNK_BYTES", 300)
    monkeypatch.setattr(fast_parser, "FIRST_CHUNK_BYTES", 300)
    monkeypatch.setattr(fast_parser, "_MORE_BYTES", 200)
    fast = read_kineto(packed, parser="fast")
    monkeypatch.undo()
    assert_identical(fast, read_kineto(packed, parser="lenient"))
    assert fast.events.num_rows == read_kineto(plain).events.num_rows


@pytest.mark.parametrize("defect_at", ["none", "end"])
def test_a_gzip_trace_whose_inflated_pages_were_given_back_reads_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, defect_at: str
) -> None:
    # Over a MiB inflated, read in small passes, the pages of parsed events are given back as the
    # parse goes.  The keys around the event array must still be read, and a defect near the end
    # (which makes the fast path decline after many releases) must still give the lenient
    # parser the whole file.
    events = TRICKY_EVENTS * 400
    if defect_at == "end":
        events = [*events, {"ph": "X", "cat": "cpu_op", "name": "C:\\zz", "pid": 1, "tid": 1, "ts": 9, "dur": 1}]
    text = kineto_text(events, schemaVersion=1, traceName="after the events")
    if defect_at == "end":
        text = text.replace("C:\\\\zz", "C:\\zz")  # an invalid escape, \z, in the last event
    plain = tmp_path / "t.json"
    plain.write_text(text, encoding="utf-8")
    packed = tmp_path / "t.json.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert len(plain.read_bytes()) > trace_bytes.MAP_MIN_BYTES
    monkeypatch.setattr(fast_parser, "CHUNK_BYTES", 64 << 10)
    monkeypatch.setattr(fast_parser, "FIRST_CHUNK_BYTES", 64 << 10)
    released: list[tuple[int, int]] = []
    real_release = trace_bytes.Inflating.release

    def counting(self: trace_bytes.Inflating, begin: int, end: int) -> None:
        released.append((begin, end))
        real_release(self, begin, end)

    monkeypatch.setattr(trace_bytes.Inflating, "release", counting)
    inflated = read_kineto(packed)
    assert released, "no pages were given back"
    read = read_kineto(plain)
    assert schema.to_polars(inflated.events).drop("source").equals(schema.to_polars(read.events).drop("source"))
    assert inflated.meta.properties.get("traceName") == read.meta.properties.get("traceName")
    assert inflated.meta.warnings == read.meta.warnings
    if defect_at == "end":
        assert inflated.meta.warnings[0].startswith("the fast JSON path declined the file")


@pytest.mark.parametrize("damage", ["truncated", "flipped"])
@pytest.mark.parametrize("inflater", ["isal", "zlib"])
def test_either_inflater_reads_the_same_table_and_reports_the_same_damage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, inflater: str, damage: str
) -> None:
    # ISA-L inflates when python-isal is installed (a dependency); the standard library's zlib
    # where it is not.  Both must give the same rows, and a damaged stream the same error.
    if inflater == "zlib":
        monkeypatch.setitem(sys.modules, "isal", None)  # as on a platform without isal's wheels
    text = kineto_text(TRICKY_EVENTS * 20, schemaVersion=1).encode()
    packed = tmp_path / "t.json.gz"
    packed.write_bytes(gzip.compress(text))
    plain = tmp_path / "t.json"
    plain.write_bytes(text)
    inflated, read = read_kineto(packed), read_kineto(plain)
    assert schema.to_polars(inflated.events).drop("source").equals(schema.to_polars(read.events).drop("source"))
    assert [(c.category, c.events, c.rows) for c in inflated.stats.counts] == [
        (c.category, c.events, c.rows) for c in read.stats.counts
    ]
    data = gzip.compress(text)
    if damage == "truncated":
        packed.write_bytes(data[: len(data) // 2])
    else:  # a flipped byte in the middle of the deflate stream
        middle = len(data) // 2
        packed.write_bytes(data[:middle] + bytes([data[middle] ^ 0xFF]) + data[middle + 1 :])
    with pytest.raises(CorruptTraceError, match=r"t\.json\.gz: gzip stream is damaged"):
        read_kineto(packed)


def test_a_gzip_stream_longer_than_its_trailer_says_is_read_whole(tmp_path: Path) -> None:
    # Two gzip members: the trailer's size is the last member's, far less than the whole.
    text = kineto_text(TRICKY_EVENTS, schemaVersion=1).encode()
    packed = tmp_path / "t.json.gz"
    packed.write_bytes(gzip.compress(text[:1000]) + gzip.compress(text[1000:]))
    assert_identical(read_kineto(packed, parser="fast"), read_kineto(packed, parser="lenient"))
    assert read_kineto(packed).events.num_rows > 0


def test_compacted_events_hold_no_text_that_points_into_the_file() -> None:
    # The parse gives back the pages of the file's bytes (mapped, or inflated from gzip: then they
    # read as zeros) once a pass is compacted, so no compacted column may be a string view into them.
    from traceq.importers.kineto.compact import COMPACT_SCHEMA

    assert not [name for name, dtype in COMPACT_SCHEMA.items() if dtype in (pl.String(), pl.Binary())]
