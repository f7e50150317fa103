"""The Kineto importer's bounds: gzip bombs, whitespace and long strings, deep nesting, huge numbers.

Specification (``docs/importers.md``, "Limits"): a gzip file inflating past its limit is refused
with one error naming the file and the setting that raises the limit; below it, whitespace and long
strings are dropped as they inflate (``squeeze``), so what is kept is the trace's content, and the
events read are those of the same trace without the padding; a text value a field keeps is cut to
``MAX_TEXT_BYTES`` on both parsers alike; nesting deeper than ``MAX_NESTING`` is refused, never a
``RecursionError``.  Every bomb is built here, small, in ``tmp_path``.
"""

from __future__ import annotations

import gzip
import json
import random
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from traceq import schema
from traceq.errors import CorruptTraceError, InvalidArgumentError, LimitExceededError
from traceq.importers import detect_format
from traceq.importers.kineto import _scanner, lenient_parser, raw_frame, trace_bytes
from traceq.importers.kineto.importer import read_kineto

MIB = 1 << 20


def _kernel(i: int, **extra: Any) -> dict[str, Any]:
    args = {"device": 0, "stream": 7, "correlation": i, **extra.pop("args", {})}
    event = {"ph": "X", "cat": "kernel", "name": f"k{i % 3}", "pid": 0, "tid": "stream 7", "ts": 10.0 * i, "dur": 4.0}
    return {**event, **extra, "args": args}


EVENTS = [_kernel(i) for i in range(40)]


def _gzip_pieces(path: Path, pieces: list[bytes | tuple[bytes, int]]) -> Path:
    """A gzip file of ``pieces``; a ``(chunk, n)`` piece is ``chunk`` written ``n`` times (never held whole)."""
    with gzip.open(path, "wb", compresslevel=6) as fh:
        for piece in pieces:
            chunk, times = piece if isinstance(piece, tuple) else (piece, 1)
            for _ in range(times):
                fh.write(chunk)
    return path


def _events_of(path: Path, **kwargs: Any) -> pl.DataFrame:
    return schema.to_polars(read_kineto(path, **kwargs).events).drop("source")


def _reference(tmp_path: Path) -> pl.DataFrame:
    plain = tmp_path / "reference.json"
    plain.write_text(json.dumps({"traceEvents": EVENTS}))
    return _events_of(plain)


# --------------------------------------------------------------------------------------------
# Inflation limit


def test_a_gzip_bomb_is_refused_naming_the_file_and_the_setting_that_raises_the_limit(tmp_path: Path) -> None:
    bomb = _gzip_pieces(tmp_path / "bomb.json.gz", [b'{"traceEvents": [', (b" " * MIB, 80), b"]}"])
    assert bomb.stat().st_size < MIB // 4  # 80 MiB of inflated text in a small file
    with pytest.raises(LimitExceededError) as caught:
        read_kineto(bomb)
    message = caught.value.one_line()
    assert message.startswith(f"{bomb}: gzip content inflates to more than 64 MiB")
    assert "TRACEQ_MAX_INFLATE_RATIO=" in message
    assert "\n" not in message


def test_the_limit_is_a_ratio_of_the_compressed_size_and_at_least_64_mib() -> None:
    assert trace_bytes.inflate_limit(10, 100) == (64 * MIB, 100)
    assert trace_bytes.inflate_limit(10 * MIB, 100) == (1000 * MIB, 100)
    assert trace_bytes.inflate_limit(10 * MIB, 2.5) == (64 * MIB, 2.5)


def test_the_limit_is_raised_by_the_keyword_or_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = json.dumps({"traceEvents": EVENTS}).encode()
    padded = _gzip_pieces(tmp_path / "padded.json.gz", [text[:-2], (b" " * MIB, 70), text[-2:]])
    with pytest.raises(LimitExceededError):
        read_kineto(padded)
    reference = _reference(tmp_path)
    assert _events_of(padded, max_inflate_ratio=100_000).equals(reference)
    monkeypatch.setenv(trace_bytes.MAX_INFLATE_RATIO_ENV, "100000")
    assert _events_of(padded).equals(reference)
    monkeypatch.setenv(trace_bytes.MAX_INFLATE_RATIO_ENV, "lots")
    with pytest.raises(InvalidArgumentError, match="TRACEQ_MAX_INFLATE_RATIO is 'lots'"):
        read_kineto(padded)


def test_a_trailer_that_understates_the_size_does_not_lift_the_limit(tmp_path: Path) -> None:
    # ISIZE says 100 bytes: the inflater's buffer is small, the rest is read aside -- and counted.
    bomb = _gzip_pieces(tmp_path / "liar.json.gz", [b'{"traceEvents": [', (b" " * MIB, 80), b"]}"])
    data = bytearray(bomb.read_bytes())
    data[-4:] = (100).to_bytes(4, "little")
    bomb.write_bytes(bytes(data))
    with pytest.raises(LimitExceededError):
        read_kineto(bomb)


def test_a_corrupt_deflate_stream_is_a_corrupt_trace(tmp_path: Path, samples: Path) -> None:
    data = bytearray((samples / "training_step.pt.trace.json.gz").read_bytes())
    data[100:200] = bytes(b ^ 0x55 for b in data[100:200])
    path = tmp_path / "broken.pt.trace.json.gz"
    path.write_bytes(bytes(data))
    with pytest.raises(zlib.error):
        gzip.decompress(bytes(data))  # what used to escape format detection as an internal error
    with pytest.raises(CorruptTraceError, match="gzip stream is damaged"):
        detect_format(path)
    with pytest.raises(CorruptTraceError, match="gzip stream is damaged"):
        read_kineto(path)


# --------------------------------------------------------------------------------------------
# Squeezing: whitespace and long strings as they inflate


@pytest.mark.parametrize(
    "where",
    ["between events", "inside an event", "before the event array", "after the event array", "in the array form"],
)
def test_whitespace_anywhere_is_dropped_as_it_inflates_and_the_events_are_the_same(tmp_path: Path, where: str) -> None:
    body = ",".join(json.dumps(e) for e in EVENTS).encode()
    blank = (b" \n\t" * (MIB // 3), 40)  # 40 MiB of whitespace
    cut = body.index(b"}") - 1  # inside the first event, after a value
    pieces: dict[str, list[bytes | tuple[bytes, int]]] = {
        "between events": [b'{"traceEvents": [', body[: cut + 2], blank, body[cut + 2 :], b"]}"],
        "inside an event": [b'{"traceEvents": [', body[:cut], blank, body[cut:], b"]}"],
        "before the event array": [b'{"schemaVersion": 1,', blank, b'"traceEvents": [', body, b"]}"],
        "after the event array": [b'{"traceEvents": [', body, b"]", blank, b"}"],
        "in the array form": [b"[", body, blank, b"]"],
    }
    path = _gzip_pieces(tmp_path / "padded.json.gz", pieces[where])
    events = _events_of(path, max_inflate_ratio=100_000)
    assert events.equals(_reference(tmp_path))


def test_an_inflated_file_keeps_its_content_not_its_padding(tmp_path: Path) -> None:
    text = json.dumps({"traceEvents": EVENTS}).encode()
    padded = _gzip_pieces(tmp_path / "padded.json.gz", [text[:-2], (b" " * MIB, 48), text[-2:]])
    inflating = trace_bytes.open_trace(padded, max_inflate_ratio=100_000)
    assert isinstance(inflating, trace_bytes.Inflating)
    kept = inflating.inflated()
    assert len(kept) == len(text) + trace_bytes.MAX_BLANK_RUN_BYTES  # 48 MiB in, 64 KiB of it kept


def test_a_long_string_in_a_field_not_read_streams_through_and_changes_nothing(tmp_path: Path) -> None:
    body = [json.dumps(e).encode() for e in EVENTS]
    long_args = b'{"ph": "i", "name": "note", "ts": 1, "pid": 0, "tid": 1, "args": {"junk": "'
    pieces: list[bytes | tuple[bytes, int]] = [b'{"traceEvents": [', b",".join(body), b",", long_args]
    pieces += [(b'ab\\"c\xc3\xa9' * (MIB // 8), 24), b'"}}]}']  # 24 MiB of a string, escapes and UTF-8 in it
    path = _gzip_pieces(tmp_path / "long.json.gz", pieces)
    result = read_kineto(path, max_inflate_ratio=100_000)
    events = schema.to_polars(result.events)
    assert events.filter(pl.col("kind") == "kernel").height == len(EVENTS)
    assert events.filter(pl.col("name") == "note").height == 1
    assert any("1 strings longer than 8 MiB were cut" in w for w in result.meta.warnings)


@pytest.mark.parametrize("gzipped", [False, True], ids=["plain", "gzip"])
@pytest.mark.parametrize("parser", ["fast", "lenient"])
def test_a_long_name_is_cut_to_max_text_bytes_the_same_way_on_both_parsers(
    tmp_path: Path, gzipped: bool, parser: str
) -> None:
    name = "é" + "x" * raw_frame.MAX_TEXT_BYTES  # the cut falls inside nothing; 2 + 1 MiB bytes
    escaped = "a" + "\\u00e9" * 10 + "é" * raw_frame.MAX_TEXT_BYTES  # escapes; the cut falls inside an é
    events = [_kernel(0, name=name), _kernel(1, name=escaped)]
    text = json.dumps({"traceEvents": events}, ensure_ascii=False).replace("\\\\u00e9", "\\u00e9").encode()
    path = tmp_path / ("long.json.gz" if gzipped else "long.json")
    path.write_bytes(gzip.compress(text) if gzipped else text)
    result = read_kineto(path, parser=parser)  # type: ignore[arg-type]
    names = schema.to_polars(result.events)["name"].cast(pl.String).to_list()
    assert names == [raw_frame.cut_text(name), raw_frame.cut_text("a" + "é" * 10 + "é" * raw_frame.MAX_TEXT_BYTES)]
    assert all(len(n.encode()) <= raw_frame.MAX_TEXT_BYTES for n in names)
    assert len(names[1].encode()) == raw_frame.MAX_TEXT_BYTES - 1  # cut before the é that did not fit
    assert any("2 text values longer than 1 MiB were cut" in w for w in result.meta.warnings)


def test_the_limits_of_the_scanner_and_the_parsers_agree() -> None:
    assert _scanner.MAX_TEXT_BYTES == raw_frame.MAX_TEXT_BYTES
    # Squeezing never changes a kept value: a string keeps six times what a field keeps (an escape
    # is at most six bytes for one), and some.
    assert trace_bytes.MAX_STRING_BYTES > 6 * raw_frame.MAX_TEXT_BYTES + 12


def _squeezed_by_model(data: bytes, max_blank: int, max_string: int) -> tuple[bytes, int]:
    """What squeeze keeps, one byte at a time, as its docstring says (and the strings it cuts)."""
    out, cut, i = bytearray(), 0, 0
    in_string = dropping = escape = high = False
    run = length = hex_left = value = 0
    while i < len(data):
        c = data[i]
        if not in_string:
            run = run + 1 if c in b" \t\r\n" else 0
            if run <= max_blank:
                out.append(c)
            if c == 0x22:
                in_string, length, escape, high, dropping, hex_left = True, 0, False, False, False, 0
            i += 1
        elif dropping:
            if escape:
                escape = False
            elif c == 0x5C:
                escape = True
            elif c == 0x22:
                out.append(c)
                in_string, run = False, 0
            i += 1
        elif c != 0x22 and length >= max_string and not (escape or high or hex_left) and c & 0xC0 != 0x80:
            dropping, cut = True, cut + 1
        else:
            out.append(c)
            i += 1
            if escape:
                escape, length = False, length + 1
                if c == ord("u"):
                    hex_left, value = 4, 0
                else:
                    high = False
            elif c == 0x22:
                in_string, run = False, 0
            elif c == 0x5C:
                escape, hex_left, length = True, 0, length + 1
            else:
                length += 1
                digit = int(chr(c), 16) if hex_left and chr(c) in "0123456789abcdefABCDEF" else -1
                if digit < 0:
                    hex_left, high = 0, False
                else:
                    value, hex_left = value * 16 + digit, hex_left - 1
                    if hex_left == 0:
                        high = 0xD800 <= value <= 0xDBFF
    return bytes(out), cut


_PIECES = (b" ", b"\n", b"\t", b'"', b"\\", b"a", b"\xc3\xa9", b"\xe2\x82\xac", b"\\u", b"D83D", b"\\uDE00", b"{", b",")


@pytest.mark.parametrize("seed", range(6))
def test_squeeze_keeps_what_its_model_keeps_however_the_text_is_split(seed: int) -> None:
    # Small limits (the byte-by-byte machine) and limits of 64 and more (also the 64-byte blocks),
    # on text split at random points into the calls an inflater makes.
    rng = random.Random(seed)
    for _ in range(1500):
        data = b"".join(rng.choice(_PIECES) * rng.choice((1, 1, 2, 5, 20, 70, 150)) for _ in range(rng.randint(0, 80)))
        max_blank = rng.choice((16, 20, 64, 65, 100, 130))
        max_string = rng.choice((16, 25, 64, 70, 130, 300))
        buf, state, kept, read = bytearray(len(data)), bytearray(64), 0, 0
        splits = sorted(rng.sample(range(len(data) + 1), min(5, len(data) + 1)))
        for end in [*splits, len(data)]:
            buf[kept : kept + end - read] = data[read:end]
            kept = _scanner.squeeze(buf, kept, kept + end - read, state, max_blank, max_string)
            read = max(read, end)
        cut = int.from_bytes(state[40:48], "little")
        assert (bytes(buf[:kept]), cut) == _squeezed_by_model(data, max_blank, max_string), (
            data,
            max_blank,
            max_string,
        )


def test_a_whitespace_bomb_below_the_limit_takes_the_memory_of_its_content(tmp_path: Path) -> None:
    # In a fresh interpreter, so that its peak resident memory is this import's: 256 MiB of
    # whitespace between two events costs what the two events cost, not 256 MiB.
    text = json.dumps({"traceEvents": EVENTS}).encode()
    bomb = _gzip_pieces(tmp_path / "bomb.json.gz", [text[:-2], (b" " * MIB, 256), text[-2:]])
    small = tmp_path / "small.json.gz"
    small.write_bytes(gzip.compress(text))
    script = (
        "import resource, sys\n"
        "from pathlib import Path\n"
        "from traceq.importers.kineto.importer import read_kineto\n"
        "read_kineto(Path(sys.argv[1]), max_inflate_ratio=1e6)\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n"
    )

    def peak_kib(path: Path) -> int:
        run = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True, check=True)
        return int(run.stdout.split()[-1])

    assert peak_kib(bomb) - peak_kib(small) < 64 * 1024  # KiB: well below the 256 MiB it inflates to


# --------------------------------------------------------------------------------------------
# The lenient parser's bounds


@pytest.mark.parametrize("depth", [600, 5000, 100_000])
def test_nesting_deeper_than_the_limit_is_refused_not_a_recursion_error(tmp_path: Path, depth: int) -> None:
    path = tmp_path / "deep.json"
    path.write_text(
        '{"traceEvents": [{"ph": "X", "ts": 1, "dur": 1, "args": {"a": ' + "[" * depth + "]" * depth + "}}]}"
    )
    with pytest.raises(LimitExceededError, match=f"nested more than {lenient_parser.MAX_NESTING} levels"):
        read_kineto(path)


def test_nesting_below_the_limit_is_read_by_the_lenient_parser(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text(
        '{"traceEvents": [{"ph": "X", "name": "k", "ts": 1, "dur": 1, "args": {"a": ' + "[" * 400 + "]" * 400 + "}}]}"
    )
    result = read_kineto(path)
    assert result.events.num_rows == 1
    assert result.meta.properties["traceq.parser"] == "lenient"  # the scanner stops at 256 levels


@pytest.mark.parametrize(
    ("text", "depth"),
    [
        (json.dumps({"traceEvents": [{"name": "[" * 2000, "args": {"x": "{" * 2000}}]}), 4),
        ('{"a": "[[[[\\"[[["}', 1),  # an escaped quote does not end the string
        ('["\\\\", [[]]]', 3),  # an escaped backslash does not escape the quote after it
        ("[" * 5000, lenient_parser.MAX_NESTING + 1),  # counted no further than the limit and one
        ('"\\', 0),
    ],
)
def test_nesting_is_counted_outside_strings_the_same_over_bytes_and_text(text: str, depth: int) -> None:
    # Over bytes: the compiled count; over text: the regular-expression one (no compiled module).
    assert lenient_parser.nesting_depth(text.encode()) == depth
    assert lenient_parser.nesting_depth(text) == depth


@pytest.mark.parametrize("field", ["ts", "pid", "id"])
def test_an_integer_too_long_for_python_is_read_as_its_text_or_out_of_range(tmp_path: Path, field: str) -> None:
    digits = "9" * 5000
    event = {"ph": "X", "name": "k", "ts": 1, "dur": 1, "pid": 1, "tid": 1}
    text = json.dumps({"traceEvents": [event, {**event, "name": "NaN-bearing", "dur": float("nan")}]})
    text = text.replace(f'"{field}": 1,', f'"{field}": {digits},', 1)  # NaN: the fast path declines
    path = tmp_path / "long-int.json"
    path.write_text(text)
    result = read_kineto(path)
    assert result.meta.properties["traceq.parser"] == "lenient"
    assert result.events.num_rows >= 1
