"""ROCm traces on the fast path: HIP rows that write their numbers as strings (``"bytes": "616"``).

The compiled scanner reads a plain decimal string in a number field itself and leaves any other
spelling to the lenient path's own rule, so a ROCm trace is never declined for its strings.  Each
test reads a trace whose integer ``args`` are rewritten as strings and checks three things: the
fast path took it (``parser="fast"`` raises where the fast path declines), it equals what the
lenient parser reads, and it equals the table of the same trace with numbers written as numbers.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from tracegen.planned.scenarios import BY_NAME
from traceq import schema
from traceq.importers.kineto.importer import read_kineto

SHARED = (Path(__file__).resolve().parents[3] / ".." / "shared" / "sample_traces").resolve()
AMD = SHARED / "hta" / "amd_trace" / "mi250_minitoy_train_ROCm6_2_kineto.json.gz"


def with_string_numbers(doc: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """``doc`` with every integer value in an event's ``args`` written as a decimal string, and how
    many values were rewritten."""
    rewritten = 0
    for event in doc["traceEvents"]:
        args = event.get("args")
        if not isinstance(args, dict):
            continue
        for key, value in args.items():
            if type(value) is int:
                args[key] = str(value)
                rewritten += 1
    return doc, rewritten


def table(path: Path, parser: str) -> pl.DataFrame:
    result = read_kineto(path, parser=parser)  # type: ignore[arg-type]
    assert result.meta.properties["traceq.parser"] == parser
    return schema.to_polars(result.events)


def assert_read_on_the_fast_path_like_its_numeric_twin(original: Path, stringly: Path) -> None:
    fast = table(stringly, "fast")
    assert fast.equals(table(stringly, "lenient"))
    assert fast.drop("source").equals(table(original, "fast").drop("source"))
    assert read_kineto(stringly).meta.warnings == ()


@pytest.mark.real
def test_the_real_rocm_trace_is_read_on_the_fast_path() -> None:
    if not AMD.exists():
        pytest.skip(f"{AMD} is absent (the shared sample traces are not checked out)")
    result = read_kineto(AMD)
    assert result.meta.properties["traceq.parser"] == "fast"
    assert result.meta.warnings == ()
    assert schema.to_polars(result.events).equals(table(AMD, "lenient"))


@pytest.mark.real
def test_the_real_rocm_trace_with_its_integer_args_as_strings_stays_on_the_fast_path(tmp_path: Path) -> None:
    if not AMD.exists():
        pytest.skip(f"{AMD} is absent (the shared sample traces are not checked out)")
    doc, rewritten = with_string_numbers(json.loads(gzip.decompress(AMD.read_bytes())))
    assert rewritten > 400  # correlation, External id, device, stream, ... on most of its 220 events
    stringly = tmp_path / "rocm_strings.json"
    stringly.write_text(json.dumps(doc), encoding="utf-8")
    assert_read_on_the_fast_path_like_its_numeric_twin(AMD, stringly)


def test_a_built_hip_trace_with_string_numbers_stays_on_the_fast_path(tmp_path: Path) -> None:
    """The RCCL-on-ROCm scenario (hipLaunchKernel, Tensile gemms, RCCL's all-reduce), written as
    Kineto JSON, then with every integer argument a string -- ``bytes`` of its copies included."""
    job = BY_NAME["rccl_all_reduce"].build()
    original = job.write(tmp_path, "kineto")
    rank0 = original / "rank0.pt.trace.json.gz" if original.is_dir() else original
    doc, rewritten = with_string_numbers(json.loads(gzip.decompress(rank0.read_bytes())))
    assert rewritten > 100
    assert any(e.get("name", "").startswith("hip") for e in doc["traceEvents"])
    stringly = tmp_path / "hip_strings.json"
    stringly.write_text(json.dumps(doc, indent=1), encoding="utf-8")
    assert_read_on_the_fast_path_like_its_numeric_twin(rank0, stringly)


def test_odd_spellings_in_number_fields_are_read_as_the_lenient_parser_reads_them(tmp_path: Path) -> None:
    """Hex, padding, signs and leading zeros go to Python's rule; the table equals the lenient one."""
    spellings = ["616", " 616", "0x268", "+616", "0616", "-0", "6_16", "6.16", "", "x", "99999999999999999999"]
    events = [
        {
            "ph": "X",
            "cat": "gpu_memcpy",
            "name": "Memcpy HtoD (Host -> Device)",
            "pid": 2,
            "tid": 0,
            "ts": 1000.5 + i,
            "dur": "0.5",
            "args": {"device": 2, "stream": "0x0", "correlation": i, "bytes": text},
        }
        for i, text in enumerate(spellings)
    ]
    path = tmp_path / "spellings.json"
    path.write_text(json.dumps({"traceEvents": events}), encoding="utf-8")
    fast = table(path, "fast")
    assert fast.equals(table(path, "lenient"))
    assert fast["bytes"].to_list() == [616, 616, 616, 616, None, 0, 616, None, None, None, None]
    assert fast["end_ns"].to_list() == [s + 500 for s in fast["start_ns"].to_list()]
