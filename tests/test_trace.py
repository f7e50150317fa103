"""Trace objects: views, Parquet and SQLite round trips, directory and multi-file loading."""

from __future__ import annotations

import gzip
import json
import sqlite3
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest

import traceq
from traceq.errors import CorruptTraceError, DuplicateRankError, InputNotFoundError, UnsupportedFormatError

from .builders import api, kernel, memcpy, step, trace
from .earlier_seals import unsealed, write_blake2b_sealed


def _sample() -> traceq.Trace:
    return trace(
        step(0, 1000, 1),
        api("cudaLaunchKernel", 10, 20, corr=1),
        kernel(30, 200, corr=1),
        memcpy(250, 300, "DtoH", corr=2),
        api("cudaMemcpyAsync", 240, 260, corr=2),
    )


def test_views_select_their_kinds() -> None:
    t = _sample()
    assert t.kernels["kind"].to_list() == ["kernel"]
    assert sorted(t.api["name"].cast(pl.String).to_list()) == ["cudaLaunchKernel", "cudaMemcpyAsync"]
    assert t.gpu_activity.height == 2
    assert t.ranges["name"].cast(pl.String).to_list() == ["ProfilerStep#1"]
    assert t.kind_counts()["kernel"] == 1
    assert t.kind_counts()["python"] == 0


def test_parquet_round_trip_gives_an_equal_trace(tmp_path: Path) -> None:
    t = _sample()
    out = t.to_parquet(tmp_path / "events.parquet")
    back = traceq.load(out)
    one_value = [c for c in t.events.columns if t.events[c].n_unique() == 1]
    assert "rank" in one_value and back.events.select(one_value).estimated_size() < 16 * len(one_value)  # literals
    assert back.events.equals(t.events)
    assert back.events.schema == t.events.schema
    assert back.import_stats == t.import_stats
    assert back.meta == t.meta


def test_parquet_not_written_by_traceq_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.parquet"
    pl.DataFrame({"a": [1]}).write_parquet(path)
    with pytest.raises(UnsupportedFormatError, match="not written by traceq"):
        traceq.load(path)


def _flipped(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 0x10]) + data[at + 1 :]


def test_a_damaged_traceq_parquet_file_is_a_corrupt_input_naming_it_never_served(tmp_path: Path, samples: Path) -> None:
    # Flip one bit at a time across the file: each copy is read as the same trace or refused as a
    # damaged file (CorruptTraceError, the bad-input exit code) -- never "a traceq bug" (exit 3)
    # nor another exception; the pages' checksums catch flips in the data.
    original = traceq.load(samples / "training_step.pt.trace.json.gz", cache=False)
    data = original.to_parquet(tmp_path / "good.parquet").read_bytes()
    path = tmp_path / "damaged.parquet"
    refused = 0
    for at in range(0, len(data), max(1, len(data) // 150)):
        path.write_bytes(_flipped(data, at))
        try:
            back = traceq.load(path)
        except CorruptTraceError as exc:
            assert exc.exit_code == 65 and exc.one_line().startswith(f"{path}: ") and "\n" not in exc.one_line()
            refused += 1
            continue
        except UnsupportedFormatError:  # the flip hit the magic number or the schema version
            refused += 1
            continue
        page_data = back.events.equals(original.events)
        assert page_data, f"a flip at byte {at} was served as a different table"
    assert refused > 100


def test_a_traceq_parquet_file_is_sealed_with_sha256(tmp_path: Path) -> None:
    out = _sample().to_parquet(tmp_path / "events.parquet")
    stored = pq.read_metadata(out).metadata or {}
    assert len(stored[b"traceq.sha256"]) == 32 and b"traceq.blake2b" not in stored


def test_a_file_sealed_with_blake2b_by_an_earlier_traceq_reads_and_its_damage_is_refused(tmp_path: Path) -> None:
    t = _sample()
    table, metadata = unsealed(t.to_parquet(tmp_path / "now.parquet"), b"traceq")
    earlier = tmp_path / "earlier.parquet"
    write_blake2b_sealed(earlier, table, metadata, b"traceq")
    back = traceq.load(earlier)
    assert back.events.equals(t.events) and back.import_stats == t.import_stats and back.meta == t.meta
    data = earlier.read_bytes()
    footer = len(data) - 8 - int.from_bytes(data[-8:-4], "little")
    # A column's statistics, in the footer: no page checksum covers them, only the seal.
    statistics = data.index(b"ProfilerStep#1", footer)
    earlier.write_bytes(_flipped(data, statistics))
    with pytest.raises(CorruptTraceError, match="does not match its digest"):
        traceq.load(earlier)


def test_sqlite_export_holds_every_row_and_the_statistics(tmp_path: Path) -> None:
    t = _sample()
    out = t.to_sqlite(tmp_path / "events.db")
    with sqlite3.connect(out) as db:
        assert db.execute("select count(*) from events").fetchone() == (t.events.height,)
        names = {r[0] for r in db.execute("select name from events where kind = 'cuda_api'")}
        assert names == {"cudaLaunchKernel", "cudaMemcpyAsync"}
        assert db.execute("select sum(events) from import_stats").fetchone() == (t.events.height,)
        assert db.execute("select path from sources").fetchone() == ("test.trace",)


def test_missing_path_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputNotFoundError, match="no such file"):
        traceq.load(tmp_path / "nope.json")


def test_directory_without_traces_is_an_input_error(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(InputNotFoundError, match="directory holds no trace files"):
        traceq.load(tmp_path)


def test_a_text_file_is_not_a_trace(tmp_path: Path) -> None:
    path = tmp_path / "notes.json"
    path.write_text("hello world")
    with pytest.raises(UnsupportedFormatError, match="not a trace format"):
        traceq.load(path)


def test_an_empty_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "empty.json"
    path.write_bytes(b"")
    with pytest.raises(UnsupportedFormatError, match="file is empty"):
        traceq.load(path)


def _kineto(path: Path, rank: int | None, pid: int = 42) -> Path:
    events = [
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaLaunchKernel",
            "pid": pid,
            "tid": pid,
            "ts": 10.0,
            "dur": 5.0,
            "args": {"correlation": 1},
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": "gemm",
            "pid": 0,
            "tid": 7,
            "ts": 20.0,
            "dur": 30.0,
            "args": {"correlation": 1, "device": 0, "stream": 7},
        },
    ]
    doc: dict[str, object] = {"schemaVersion": 1, "traceEvents": events}
    if rank is not None:
        doc["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": 2}
    with gzip.open(path, "wt") as fh:
        json.dump(doc, fh)
    return path


def test_directory_of_ranks_loads_in_rank_order_with_rank_and_source_set(tmp_path: Path) -> None:
    _kineto(tmp_path / "b.pt.trace.json.gz", rank=0)
    _kineto(tmp_path / "a.pt.trace.json.gz", rank=1)
    t = traceq.load(tmp_path)
    assert t.meta.ranks == (0, 1)
    by_rank = t.events.group_by("rank", "source").len().sort("rank")
    assert by_rank["rank"].to_list() == [0, 1]
    assert [Path(s).name for s in by_rank["source"].cast(pl.String)] == ["b.pt.trace.json.gz", "a.pt.trace.json.gz"]


def test_rank_falls_back_to_the_file_name_then_to_position(tmp_path: Path) -> None:
    named = _kineto(tmp_path / "job_rank-3.json.gz", rank=None)
    anonymous = _kineto(tmp_path / "other.json.gz", rank=None)
    t = traceq.load([named, anonymous])
    assert t.meta.ranks == (1, 3)
    assert any("assumed rank 1 from its position" in w for w in t.meta.warnings)


def test_two_files_claiming_one_rank_are_refused_naming_both(tmp_path: Path) -> None:
    a = _kineto(tmp_path / "a.json.gz", rank=0)
    b = _kineto(tmp_path / "b.json.gz", rank=0)
    with pytest.raises(DuplicateRankError, match=r"a\.json\.gz.*b\.json\.gz"):
        traceq.load([a, b])


ROUND_TRIP = [
    "training_step.nsys.sqlite",
    "training_step.pt.trace.json.gz",
    "ranks",
]
REAL_ROUND_TRIP = [
    "nsys/nsysai_mfu_2gpu_before_nccl_2026.2.1.sqlite",
    "nsys/mordred_report1a_2021_quadro6000.sqlite",
    "hta/nccl_parser_config/nccl_data.json.gz",
    "kineto/be239c04/resnet50_num_workers_4/worker0.1623212756351.pt.trace.json.gz",
    "hta/trace_filter",
]


def _assert_round_trip(original: traceq.Trace, tmp_path: Path) -> None:
    back = traceq.load(original.to_parquet(tmp_path / "t.parquet"))
    assert back.events.schema == original.events.schema
    assert back.events.equals(original.events)
    assert back.import_stats == original.import_stats
    assert back.meta == original.meta


@pytest.mark.parametrize("name", ROUND_TRIP)
def test_samples_round_trip_through_parquet_unchanged(samples: Path, name: str, tmp_path: Path) -> None:
    _assert_round_trip(traceq.load(samples / name), tmp_path)


@pytest.mark.real
@pytest.mark.parametrize("relative", REAL_ROUND_TRIP)
def test_real_traces_round_trip_through_parquet_unchanged(shared_traces: Path, relative: str, tmp_path: Path) -> None:
    _assert_round_trip(traceq.load(shared_traces / relative), tmp_path)
