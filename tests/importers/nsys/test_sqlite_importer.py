"""Specification of the Nsight Systems SQLite importer (traceq.importers.nsys.sqlite_importer).

Three layers: tiny exports written here with sqlite3 and the rows they must become; the error
contract (which file gets which error); and every real export under ../shared/sample_traces/nsys,
checked against counts computed independently with plain SQL.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracegen import build_timeline, preset, write_big_nsys_sqlite, write_nsys_per_rank, write_nsys_sqlite
from traceq import schema
from traceq.errors import CorruptTraceError, InputNotFoundError, UnsupportedFormatError, UnsupportedVersionError
from traceq.importers.nsys import column_reader, export_db
from traceq.importers.nsys.sqlite_importer import NOT_IMPORTED_TABLES, read_nsys_sqlite
from traceq.importers.result import ImportResult
from traceq.importers.time_sort import sort_by_time
from traceq.loading import load

SAMPLES = Path(__file__).resolve().parents[3] / ".." / "shared" / "sample_traces" / "nsys"
SAMPLE_NAMES = sorted(p.name for p in SAMPLES.glob("*.sqlite")) or ["(no samples)"]

MFU_2GPU = "nsysai_mfu_2gpu_before_nccl_2026.2.1.sqlite"
H100_2GPU = "nsysai_h100_2gpu_1s_2026.2.1.sqlite"
PIPIT_2022 = "pipit_saxpy-mpi-cuda_2022.2.1_a100.sqlite"
FLAMEOX_2025 = "flameox_smoke_cudagraph_2025.5.2_rtx3060.sqlite"
MOCK_2026 = "nsysai_mock_2026.1.1_rtx3080.sqlite"
NVFUSER_2024 = "nvfuser_matmul_2024.6.2_h200.sqlite"
MORDRED_2021 = ("mordred_report1a_2021_quadro6000.sqlite", "mordred_report1b_2021_quadro6000.sqlite")


# --------------------------------------------------------------------------------------------
# helpers


def make_export(path: Path, tables: dict[str, tuple[Sequence[str], Sequence[Sequence[Any]]]]) -> Path:
    """Write an SQLite file with ``{table: (columns, rows)}``, the way an nsys export looks."""
    conn = sqlite3.connect(path)
    for table, (columns, rows) in tables.items():
        conn.execute(f"CREATE TABLE {table} ({', '.join(columns)})")
        if rows:
            marks = ", ".join("?" for _ in columns)
            conn.executemany(f"INSERT INTO {table} VALUES ({marks})", rows)
    conn.commit()
    conn.close()
    return path


def frame(result: ImportResult) -> pl.DataFrame:
    return schema.to_polars(result.events)


def stats_by_category(result: ImportResult) -> dict[str, tuple[int, int, dict[str, int]]]:
    return {c.category: (c.events, c.rows, dict(c.skipped)) for c in result.stats.counts}


@pytest.fixture(params=["adbc", "adbc-chunked", "compiled", "compiled-chunked"])
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Run a test once per reader backend, and with ADBC and the compiled reader reading (and the
    sort writing) in chunks of two rows, so that every table of the tiny exports is split; all must
    agree.  The compiled reader reads the activity tables' integer columns, ADBC the rest."""
    if not request.param.startswith("compiled"):
        monkeypatch.setenv(column_reader.COMPILED_READER_ENV, "0")
    elif not column_reader.compiled_reader_available():
        pytest.skip("the compiled reader is not built or found no SQLite library; ADBC is tested")
    if request.param.endswith("-chunked"):
        monkeypatch.setattr(export_db, "CHUNK_ROWS", 2)
    yield request.param


# --------------------------------------------------------------------------------------------
# a tiny hand-built export (2024.5 layout) and the rows it must become

PROC = 4321  # pid
GPID = (1 << 48) | (PROC << 24)  # globalPid: VM 1, pid 4321
MAIN = GPID | PROC  # globalTid of the main thread (tid == pid)
WORKER = GPID | 4400  # another thread of the same process
NCCL_KERNEL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"

KERNEL_COLS = (
    "start", "end", "deviceId", "contextId", "greenContextId", "streamId", "correlationId", "globalPid",
    "demangledName", "shortName", "mangledName", "gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ",
    "registersPerThread", "staticSharedMemory", "dynamicSharedMemory", "launchType",
)  # fmt: skip
GPU_COLS = ("start", "end", "deviceId", "contextId", "streamId", "correlationId", "globalPid")


def tiny_tables() -> dict[str, tuple[Sequence[str], Sequence[Sequence[Any]]]]:
    strings = [
        (1, "gemm_kernel(float const*, float*)"),
        (2, "gemm_kernel"),
        (3, "cudaLaunchKernel_v7000"),
        (4, "cudaStreamSynchronize_v3020"),
        (5, NCCL_KERNEL),
        (6, "ncclDevKernel_AllReduce_Sum_f32_RING_LL"),
        (7, "NCCL"),
        (8, "ncclAllReduce"),
        (9, "cuLaunchKernel"),
        (10, "cudaMemcpyAsync"),
    ]
    return {
        "StringIds": (("id INTEGER PRIMARY KEY", "value TEXT NOT NULL"), strings),
        "META_DATA_EXPORT": (
            ("name", "value"),
            [("EXPORT_PRODUCT_VERSION", "2024.5.1.113"), ("EXPORT_SCHEMA_VERSION", "3.13.2")],
        ),
        "CUPTI_ACTIVITY_KIND_KERNEL": (
            KERNEL_COLS,
            [
                (1000, 1500, 0, 1, 0, 7, 11, GPID, 1, 2, None, 4, 2, 1, 128, 1, 1, 32, 1024, 512, 1),
                (2000, 2600, 0, 1, 0, 13, 12, GPID, 5, 6, None, 1, 1, 1, 256, 1, 1, 64, 0, 4096, 1),
                (3000, 2900, 0, 1, 0, 7, 13, GPID, 1, 2, None, 1, 1, 1, 32, 1, 1, 16, 0, 0, 1),  # end < start
            ],
        ),
        "CUPTI_ACTIVITY_KIND_MEMCPY": (
            (*GPU_COLS, "bytes", "copyKind", "name"),  # "name": the column NVIDIA's examples add by hand
            [(100, 300, 0, 1, 7, 10, GPID, 4096, 1, None), (400, 450, 0, 1, 7, 14, GPID, 64, 12, None)],
        ),
        "CUPTI_ACTIVITY_KIND_MEMSET": ((*GPU_COLS, "bytes", "value"), [(500, 520, 0, 1, 7, 15, GPID, 256, 0)]),
        "CUPTI_ACTIVITY_KIND_RUNTIME": (
            ("start", "end", "eventClass", "globalTid", "correlationId", "nameId", "returnValue"),
            [
                (90, 95, 0, MAIN, 10, 10, 0),
                (900, 950, 0, MAIN, 11, 3, 0),
                (905, 940, 1, MAIN, 11, 9, 0),  # the driver call under cudaLaunchKernel
                (1900, 1950, 0, WORKER, 12, 3, 0),
                (2650, 2900, 0, MAIN, 20, 4, 0),
                (2640, 2910, 67, MAIN, 20, 4, 0),  # backtrace duplicate of the sync call
            ],
        ),
        "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION": (
            (*GPU_COLS, "syncType"),
            [(2700, 2890, 0, 1, 13, 20, GPID, 3), (3100, 3200, 0, 1, 7, 99, GPID, 1)],  # 99: no API row
        ),
        "NVTX_EVENTS": (
            ("start", "end", "eventType", "text", "textId", "globalTid", "domainId", "category"),
            [
                (10, None, 75, None, 7, MAIN, 1, None),  # domain 1 of this process is "NCCL"
                (20, None, 39, "worker", None, WORKER, 0, None),  # thread name
                (800, 3000, 59, "step", None, MAIN, 0, None),
                (1800, 1990, 59, None, 8, WORKER, 1, None),
                (2500, 2500, 34, "checkpoint", None, MAIN, 0, None),
                (2600, None, 60, "never ended", None, MAIN, 0, None),
            ],
        ),
        "TARGET_INFO_GPU": (
            ("id", "name", "smCount", "totalMemory", "computeMajor", "computeMinor", "clockRate", "memoryBandwidth"),
            [(0, "NVIDIA H100 80GB HBM3", 132, 85_000_000_000, 9, 0, 1_980_000_000, 3_350_000_000_000)],
        ),
        "TARGET_INFO_SESSION_START_TIME": (
            ("utcEpochNs", "utcTime", "systemClockNs"),
            [(1_700_000_000_000_000_000, "x", 50)],
        ),
        "MPI_RANKS": (("globalTid", "rank"), [(MAIN, 3)]),
        "OSRT_API": (("start", "end", "globalTid", "nameId"), [(1, 2, MAIN, 3), (3, 4, MAIN, 3)]),
    }


COLUMNS = ("kind", "start_ns", "end_ns", "name", "pid", "tid", "device", "stream", "correlation", "category")
API, KERNEL, COPY, SET, SYNC, NVTX = (
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
    "NVTX_EVENTS",
)
EXPECTED_ROWS = [
    ("cuda_api", 90, 95, "cudaMemcpyAsync", PROC, PROC, None, None, 10, API),
    ("memcpy", 100, 300, "[CUDA memcpy HtoD]", PROC, None, 0, 7, 10, COPY),
    ("memcpy", 400, 450, "[CUDA memcpy Unified DtoH]", PROC, None, 0, 7, 14, COPY),
    ("memset", 500, 520, "[CUDA memset]", PROC, None, 0, 7, 15, SET),
    ("range", 800, 3000, "step", PROC, PROC, None, None, None, NVTX),
    ("cuda_api", 900, 950, "cudaLaunchKernel", PROC, PROC, None, None, 11, API),
    ("cuda_api", 905, 940, "cuLaunchKernel", PROC, PROC, None, None, 11, API),
    ("kernel", 1000, 1500, "gemm_kernel(float const*, float*)", PROC, None, 0, 7, 11, KERNEL),
    ("range", 1800, 1990, "ncclAllReduce", PROC, 4400, None, None, None, NVTX),
    ("cuda_api", 1900, 1950, "cudaLaunchKernel", PROC, 4400, None, None, 12, API),
    ("kernel", 2000, 2600, NCCL_KERNEL, PROC, None, 0, 13, 12, KERNEL),
    ("instant", 2500, 2500, "checkpoint", PROC, PROC, None, None, None, NVTX),
    ("cuda_api", 2650, 2900, "cudaStreamSynchronize", PROC, PROC, None, None, 20, API),
    ("gpu_sync", 2700, 2890, "cudaStreamSynchronize", PROC, None, 0, 13, 20, SYNC),
    ("gpu_sync", 3100, 3200, "[CUDA synchronization]", PROC, None, 0, 7, 99, SYNC),
]


@pytest.fixture
def tiny(tmp_path: Path, backend: str) -> tuple[Path, ImportResult]:
    path = make_export(tmp_path / "tiny.sqlite", tiny_tables())
    return path, read_nsys_sqlite(path)


def test_tiny_export_becomes_exactly_these_rows(tiny: tuple[Path, ImportResult]) -> None:
    _, result = tiny
    df = frame(result)
    assert df.select(COLUMNS).rows() == EXPECTED_ROWS


def test_tiny_export_extra_columns(tiny: tuple[Path, ImportResult]) -> None:
    path, result = tiny
    df = frame(result)
    kernels = df.filter(pl.col("kind") == "kernel")
    assert kernels.select(
        "grid_x", "grid_y", "grid_z", "block_x", "registers_per_thread", "shared_memory_bytes", "is_comm", "context"
    ).rows() == [(4, 2, 1, 128, 32, 1536, False, 1), (1, 1, 1, 256, 64, 4096, True, 1)]
    memcpys = df.filter(pl.col("kind") == "memcpy")
    assert memcpys["copy_kind"].cast(pl.String).to_list() == ["HtoD", "DtoH"]
    assert memcpys["bytes"].to_list() == [4096, 64]
    assert df.filter(pl.col("kind") == "memset")["bytes"].to_list() == [256]
    # The matched sync takes its kind from cudaStreamSynchronize; the unmatched one falls back on
    # syncType, read with the ≤2024.5 numbering (1 = cudaDeviceSynchronize).
    assert df.filter(pl.col("kind") == "gpu_sync")["sync_kind"].cast(pl.String).to_list() == [
        "stream_synchronize",
        "context_synchronize",
    ]
    ranges = df.filter(pl.col("kind").is_in(["range", "instant"]))
    assert ranges["domain"].cast(pl.String).to_list() == [None, "NCCL", None]
    assert df["rank"].unique().to_list() == [3]  # MPI_RANKS maps the process
    assert df["source"].cast(pl.String).unique().to_list() == [str(path)]
    assert df.filter(pl.col("kind") != "kernel")["is_comm"].sum() == 0


def test_tiny_export_accounts_for_every_row(tiny: tuple[Path, ImportResult]) -> None:
    _, result = tiny
    assert stats_by_category(result) == {
        "CUPTI_ACTIVITY_KIND_KERNEL": (3, 2, {"invalid interval": 1}),
        "CUPTI_ACTIVITY_KIND_MEMCPY": (2, 2, {}),
        "CUPTI_ACTIVITY_KIND_MEMSET": (1, 1, {}),
        "CUPTI_ACTIVITY_KIND_RUNTIME": (6, 5, {"eventClass 67 (CUDA backtrace duplicate)": 1}),
        "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION": (2, 2, {}),
        "NVTX_EVENTS": (6, 3, {"metadata": 2, "unterminated range": 1}),
        "OSRT_API": (2, 0, {"table not imported": 2}),
    }


def test_tiny_export_meta(tiny: tuple[Path, ImportResult]) -> None:
    path, result = tiny
    meta = result.meta
    assert (meta.path, meta.format, meta.format_version, meta.producer) == (
        str(path),
        "nsys-sqlite",
        "2024.5.1.113",
        "Nsight Systems",
    )
    assert meta.properties["schema_version"] == "3.13.2"
    assert meta.clock_offset_ns == 1_700_000_000_000_000_000 - 50
    assert meta.rank == 3
    (gpu,) = meta.gpus
    assert (gpu.device, gpu.name, gpu.sm_count, gpu.compute_capability, gpu.clock_hz) == (
        0,
        "NVIDIA H100 80GB HBM3",
        132,
        "9.0",
        1_980_000_000,
    )
    assert gpu.memory_bytes == 85_000_000_000
    assert gpu.memory_bandwidth_bytes_per_s == 3_350_000_000_000
    assert meta.warnings == ()


def test_early_2021_gpu_table_and_time_normalized_exports(tmp_path: Path) -> None:
    path = make_export(
        tmp_path / "early.sqlite",
        {
            "EXPORT_META_DATA": (
                ("name", "value"),
                [("EXPORT_PRODUCT_VERSION", "2021.2.1.58"), ("EXPORT_PARAM_TIME_NORMALIZE", "true")],
            ),
            "StringIds": (("id", "value"), [(1, "k")]),
            "CUPTI_ACTIVITY_KIND_KERNEL": ((*GPU_COLS, "shortName"), [(5, 9, 1, 1, 7, 1, GPID, 1)]),
            "TARGET_INFO_CUDA_GPU": (("deviceId", "name", "smCount"), [(1, "Tesla V100-SXM2-16GB", 80)]),
            "TARGET_INFO_SESSION_START_TIME": (("utcEpochNs",), [(1_600_000_000_000_000_000,)]),
            "ANALYSIS_DETAILS": (("startTime",), [(0,)]),
        },
    )
    meta = read_nsys_sqlite(path).meta
    assert [(g.device, g.name, g.sm_count, g.compute_capability) for g in meta.gpus] == [
        (1, "Tesla V100-SXM2-16GB", 80, None)
    ]
    # Normalized timestamps no longer sit on the clock the session start was recorded on.
    assert meta.clock_offset_ns is None
    assert meta.properties["clock_offset"] == "unknown: export was time-normalized or time-shifted"


def test_versioned_table_names_resolve_to_the_highest_suffix(tmp_path: Path, backend: str) -> None:
    cols = ("start", "end", "deviceId", "streamId", "correlationId", "globalPid", "shortName")
    path = make_export(
        tmp_path / "v.sqlite",
        {
            "StringIds": (("id", "value"), [(1, "old"), (2, "new")]),
            "CUPTI_ACTIVITY_KIND_KERNEL_V2": (cols, [(1, 2, 0, 7, 1, GPID, 1)]),
            "CUPTI_ACTIVITY_KIND_KERNEL_V3": (cols, [(5, 9, 0, 7, 1, GPID, 2), (6, 9, 0, 7, 2, GPID, 2)]),
        },
    )
    result = read_nsys_sqlite(path)
    assert frame(result).select("name", "category").rows() == [("new", "CUPTI_ACTIVITY_KIND_KERNEL")] * 2
    assert stats_by_category(result)["CUPTI_ACTIVITY_KIND_KERNEL"] == (2, 2, {})
    assert "CUPTI_ACTIVITY_KIND_KERNEL -> CUPTI_ACTIVITY_KIND_KERNEL_V3" in result.meta.properties["resolved_tables"]


def test_text_that_is_not_utf8_does_not_break_the_import(tmp_path: Path, backend: str) -> None:
    path = make_export(tmp_path / "bad.sqlite", {"NVTX_EVENTS": (("start", "end", "eventType", "text"), [])})
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO NVTX_EVENTS VALUES (1, 5, 59, CAST(x'41ff42' AS TEXT))")
    conn.commit()
    conn.close()
    result = read_nsys_sqlite(path)
    assert frame(result)["name"].cast(pl.String).to_list() == ["A\ufffdB"]
    assert "1 text values were not valid UTF-8; each invalid byte reads as U+FFFD" in result.meta.warnings


def test_export_without_gpu_activity_loads_with_a_warning(tmp_path: Path, backend: str) -> None:
    path = make_export(
        tmp_path / "empty.sqlite",
        {"StringIds": (("id", "value"), []), "CUPTI_ACTIVITY_KIND_KERNEL": (("start", "end", "shortName"), [])},
    )
    result = read_nsys_sqlite(path)
    assert result.events.num_rows == 0
    assert result.events.schema == schema.arrow_schema()
    assert "no GPU activity in this capture (no kernels, memcpys or memsets)" in result.meta.warnings
    assert result.meta.format_version is None
    assert result.meta.properties["schema_version"].startswith("unknown (pre-2022")


# --------------------------------------------------------------------------------------------
# errors: one clear line, the right type


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputNotFoundError, match="no such file"):
        read_nsys_sqlite(tmp_path / "nope.sqlite")
    assert list(tmp_path.iterdir()) == []  # read-only open never creates the file


def test_sqlite_file_that_is_not_an_nsys_export(tmp_path: Path) -> None:
    path = make_export(tmp_path / "foo.sqlite", {"foo": (("a", "b"), [(1, 2)])})
    with pytest.raises(UnsupportedFormatError, match="not an Nsight Systems export") as info:
        read_nsys_sqlite(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize(
    "content",
    [b"SQLite format 3\x00" + b"\x01" * 5000, b"definitely not a database" * 100],
    ids=["bad-pages", "not-sqlite"],
)
def test_unreadable_sqlite_file_is_corrupt(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "broken.sqlite"
    path.write_bytes(content)
    with pytest.raises(CorruptTraceError, match="cannot be read as SQLite") as info:
        read_nsys_sqlite(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("name", "sql"),
    [("AB\xff", "CREATE TABLE AB\xff (a)"), ("StringIds", "CREATE TABLE StringIds \xff (a)")],
    ids=["table-name", "syntax"],
)
def test_a_schema_with_bytes_that_are_not_utf8_is_corrupt(tmp_path: Path, name: str, sql: str) -> None:
    # SQLite's error quotes the damaged schema; Python decoding that message used to raise
    # UnicodeDecodeError, an internal error.
    path = make_export(tmp_path / "schema.sqlite", tiny_tables())
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA writable_schema=ON")
    name_hex, sql_hex = name.encode("latin-1").hex(), sql.encode("latin-1").hex()
    conn.execute(
        f"UPDATE sqlite_master SET name = CAST(x'{name_hex}' AS TEXT), sql = CAST(x'{sql_hex}' AS TEXT) "
        "WHERE name = 'StringIds'"
    )
    conn.commit()
    conn.close()
    with pytest.raises(CorruptTraceError, match="not UTF-8") as info:
        read_nsys_sqlite(path)
    assert str(info.value).startswith(f"{path}: cannot be read as SQLite") and "\n" not in str(info.value)


@pytest.mark.real
def test_truncated_real_export_is_corrupt(tmp_path: Path, samples: Path) -> None:
    path = tmp_path / "truncated.sqlite"
    path.write_bytes((samples / H100_2GPU).read_bytes()[:65536])
    with pytest.raises(CorruptTraceError, match="malformed"):
        read_nsys_sqlite(path)


def test_kernel_table_without_start_end_is_an_unsupported_version(tmp_path: Path) -> None:
    path = make_export(
        tmp_path / "old.sqlite",
        {
            "EXPORT_META_DATA": (("name", "value"), [("EXPORT_PRODUCT_VERSION", "2020.1.1.1")]),
            "StringIds": (("id", "value"), []),
            "CUPTI_ACTIVITY_KIND_KERNEL": (("timestamp", "duration", "shortName"), []),
        },
    )
    with pytest.raises(UnsupportedVersionError, match=r"lacks required columns start, end.*nsys 2020\.1\.1\.1"):
        read_nsys_sqlite(path)


def test_import_never_writes(tmp_path: Path) -> None:
    path = make_export(tmp_path / "tiny.sqlite", tiny_tables())
    before = (path.read_bytes(), path.stat().st_mtime_ns)
    read_nsys_sqlite(path)
    assert (path.read_bytes(), path.stat().st_mtime_ns) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tiny.sqlite"]  # no journal, no WAL


def test_odd_file_names_open_through_the_uri(tmp_path: Path) -> None:
    folder = tmp_path / "a dir ?#%x"
    folder.mkdir()
    path = make_export(folder / "my report#1.sqlite", tiny_tables())
    assert read_nsys_sqlite(path).events.num_rows == len(EXPECTED_ROWS)


# --------------------------------------------------------------------------------------------
# every real export: independent SQL counts


@pytest.fixture
def samples() -> Path:
    if not SAMPLES.is_dir():
        pytest.skip(f"../shared/sample_traces not present ({SAMPLES.resolve()}); real-trace tests need it")
    return SAMPLES


@pytest.fixture(params=SAMPLE_NAMES)
def sample(request: pytest.FixtureRequest, samples: Path) -> Path:
    path = samples / str(request.param)
    if not path.is_file():
        pytest.skip(f"no nsys sample exports in {samples}")
    return path


_RESULTS: dict[Path, ImportResult] = {}


def imported(path: Path) -> ImportResult:
    """Each real export is imported once per test session."""
    if path not in _RESULTS:
        _RESULTS[path] = read_nsys_sqlite(path)
    return _RESULTS[path]


def sql_count(path: Path, sql: str) -> int:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return int(conn.execute(sql).fetchone()[0])
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return 0
        raise
    finally:
        conn.close()


def sql_tables(path: Path) -> set[str]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return {n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    finally:
        conn.close()


INDEPENDENT_COUNTS = {
    ("kernel", "CUPTI_ACTIVITY_KIND_KERNEL"): "SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL",
    ("kernel", "CUPTI_ACTIVITY_KIND_GRAPH_TRACE"): "SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE",
    ("memcpy", "CUPTI_ACTIVITY_KIND_MEMCPY"): "SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY",
    ("memset", "CUPTI_ACTIVITY_KIND_MEMSET"): "SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_MEMSET",
    ("gpu_sync", "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"): "SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
    ("cuda_api", "CUPTI_ACTIVITY_KIND_RUNTIME"): (
        "SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE eventClass IN (0, 1)"
    ),
    ("range", "NVTX_EVENTS"): 'SELECT COUNT(*) FROM NVTX_EVENTS WHERE eventType IN (59, 60) AND "end" IS NOT NULL',
    ("instant", "NVTX_EVENTS"): "SELECT COUNT(*) FROM NVTX_EVENTS WHERE eventType = 34",
}


@pytest.mark.real
def test_real_export_row_counts_match_plain_sql(sample: Path) -> None:
    df = frame(imported(sample))
    got = {(k, c): n for k, c, n in df.group_by("kind", "category").len().iter_rows()}
    for key, sql in INDEPENDENT_COUNTS.items():
        assert got.get(key, 0) == sql_count(sample, sql), key
    assert df.height == sum(sql_count(sample, sql) for sql in INDEPENDENT_COUNTS.values())


@pytest.mark.real
def test_real_export_stats_account_for_every_table_row(sample: Path) -> None:
    result = imported(sample)
    df = frame(result)
    rows_by_category = dict(df.group_by(pl.col("category").cast(pl.String)).len().iter_rows())
    tables = sql_tables(sample)
    for count in result.stats.counts:
        assert count.source == str(sample)
        assert count.events == count.rows + sum(count.skipped.values())
        assert count.category in tables
        assert count.events == sql_count(sample, f"SELECT COUNT(*) FROM {count.category}")
        assert count.rows == rows_by_category.get(count.category, 0)
    # Every not-imported event table with rows shows up, and nothing else is silently dropped.
    expected_ignored = {
        t for t in NOT_IMPORTED_TABLES if t in tables and sql_count(sample, f"SELECT COUNT(*) FROM {t}")
    }
    ignored = {c.category for c in result.stats.counts if c.skipped.get("table not imported")}
    assert ignored == expected_ignored


@pytest.mark.real
def test_real_export_satisfies_the_event_table_contract(sample: Path) -> None:
    result = imported(sample)
    df = frame(result)
    schema.validate(df)
    assert df.filter(pl.col("end_ns") < pl.col("start_ns")).height == 0
    assert df.select("start_ns", "end_ns").rows() == sorted(df.select("start_ns", "end_ns").rows())
    assert df["source"].cast(pl.String).unique().to_list() in ([str(sample)], [])
    gpu = df.filter(pl.col("kind").is_in(["kernel", "memcpy", "memset", "gpu_sync"]))
    assert gpu["tid"].null_count() == gpu.height and gpu["device"].null_count() == 0
    cpu = df.filter(pl.col("kind").is_in(["cuda_api", "range", "instant"]))
    assert cpu["device"].null_count() == cpu.height and cpu["tid"].null_count() == 0
    api = df.filter(pl.col("kind") == "cuda_api")["name"].cast(pl.String)
    assert not api.str.contains(r"_v\d{4,}$").any()  # nsys's CUDA-version suffix is stripped
    assert result.meta.producer == "Nsight Systems" and result.meta.format == "nsys-sqlite"


@pytest.mark.real
def test_real_export_is_opened_read_only(sample: Path) -> None:
    before = (
        hashlib.sha256(sample.read_bytes()).hexdigest(),
        sample.stat().st_mtime_ns,
        sorted(sample.parent.iterdir()),
    )
    read_nsys_sqlite(sample)
    after = (
        hashlib.sha256(sample.read_bytes()).hexdigest(),
        sample.stat().st_mtime_ns,
        sorted(sample.parent.iterdir()),
    )
    assert after == before


@pytest.mark.real
def test_real_export_is_the_same_read_in_small_chunks(sample: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    whole = read_nsys_sqlite(sample)
    monkeypatch.setattr(export_db, "CHUNK_ROWS", 1000)
    chunked = read_nsys_sqlite(sample)
    assert chunked.events.schema == whole.events.schema
    assert as_strings(chunked).equals(as_strings(whole))
    assert (chunked.stats, chunked.meta) == (whole.stats, whole.meta)


def as_strings(result: ImportResult) -> pl.DataFrame:
    """The rows with Categorical and Enum columns as strings (chunk layouts and dictionaries aside)."""
    return frame(result).with_columns(pl.col(pl.Categorical, pl.Enum).cast(pl.String))


# --------------------------------------------------------------------------------------------
# reading in chunks


def test_read_chunks_equals_one_read(tmp_path: Path) -> None:
    rows = [(i, i + 5, None if i < 4 else i % 3, f"t{i}" if i % 2 else None) for i in range(20)]
    path = make_export(tmp_path / "t.sqlite", {"T": (("start", "end", "streamId", "text"), rows)})
    conn = sqlite3.connect(path)
    conn.execute("DELETE FROM T WHERE start IN (6, 7, 13)")  # rowid gaps
    conn.commit()
    conn.close()
    spec = {"start": export_db.INT, "streamId": export_db.INT, "absent": export_db.INT}
    db = export_db.open_export(path)
    try:
        pieces = list(db.read_chunks("T", spec, chunk_rows=3))
        whole = db.read("T", spec)
    finally:
        db.close()
    assert len(pieces) > 4
    assert all(p.schema == whole.schema for p in pieces)
    assert pl.concat(pieces).equals(whole)
    assert whole["start"].to_list() == [i for i in range(20) if i not in (6, 7, 13)]


def test_unresolved_names_are_counted_over_all_chunks(tmp_path: Path, backend: str) -> None:
    kernels = [
        (10 * i, 10 * i + 5, 0, 1, 0, 7, i, GPID, 50 + i, 50 + i, None, 1, 1, 1, 1, 1, 1, 8, 0, 0, 1) for i in range(7)
    ]
    path = make_export(
        tmp_path / "names.sqlite",
        {"StringIds": (("id INTEGER PRIMARY KEY", "value TEXT"), [(1, "x")]), KERNEL: (KERNEL_COLS, kernels)},
    )
    result = read_nsys_sqlite(path)
    assert "7 kernels have no name in StringIds" in result.meta.warnings
    assert sum("have no name" in w for w in result.meta.warnings) == 1
    assert frame(result)["name"].cast(pl.String).unique().to_list() == ["[unresolved kernel name]"]


@given(
    st.lists(
        st.lists(st.tuples(st.integers(0, 6), st.integers(0, 3)), max_size=9),
        min_size=1,
        max_size=4,
    ),
    st.integers(1, 5),
)
@settings(max_examples=60, deadline=None)
def test_sort_by_time_is_a_stable_sort_by_start_then_end(tables: list[list[tuple[int, int]]], chunk: int) -> None:
    parts = [
        pl.DataFrame(
            {
                "start_ns": [s for s, _ in rows],
                "end_ns": [s + d for s, d in rows],
                "tag": [f"{t}.{i}" for i in range(len(rows))],
                "none": [None] * len(rows),
                "same": ["/a.json"] * len(rows),
            },
            schema={
                "start_ns": pl.Int64,
                "end_ns": pl.Int64,
                "tag": pl.String,
                "none": pl.Int32,
                "same": pl.Categorical,
            },
        )
        for t, rows in enumerate(tables)
    ]
    expected = pl.concat(parts).sort("start_ns", "end_ns", maintain_order=True)
    table = sort_by_time(list(parts), chunk_rows=chunk)
    if table.height > 1:  # the columns of one value are literal columns: held once, not per row
        assert table.select("none", "same").estimated_size() < 64  # (before equals() makes their rows)
    assert table.equals(expected)


def test_sort_by_time_leaves_the_parts_literal_columns_unmade() -> None:
    # An importer's pieces may hold literal columns already (an nsys piece's one thread, kind,
    # source): a column the sorted table holds as a literal is never read from the pieces.
    rows = pl.DataFrame({"start_ns": range(999, -1, -1), "end_ns": range(1000, 0, -1)})
    parts = [rows.with_columns(pl.lit(7, pl.Int64).alias("tid")) for _ in range(2)]
    assert all(part.select("tid").estimated_size() < 64 for part in parts)
    table = sort_by_time(list(parts))
    assert table["start_ns"].to_list() == sorted([*range(1000), *range(1000)]) and table["tid"].to_list() == [7] * 2000
    assert all(part.select("tid").estimated_size() < 64 for part in parts)  # not made 1000-row arrays


def test_big_synthetic_export_repeats_its_base_steps(tmp_path: Path) -> None:
    base = read_nsys_sqlite(write_big_nsys_sqlite(tmp_path / "base.sqlite", 1, base_steps=2, layers=1))
    big = read_nsys_sqlite(write_big_nsys_sqlite(tmp_path / "big.sqlite", 3000, base_steps=2, layers=1))
    counts = {k: n for k, n in frame(base).group_by("kind").len().iter_rows()}
    copies = big.events.num_rows // base.events.num_rows
    assert copies > 1 and big.events.num_rows == copies * base.events.num_rows
    assert {k: n for k, n in frame(big).group_by("kind").len().iter_rows()} == {
        k: copies * n for k, n in counts.items()
    }
    df = frame(big)
    steps = df.filter(pl.col("name").cast(pl.String).str.starts_with("ProfilerStep#"))
    assert steps["name"].cast(pl.String).to_list() == [f"ProfilerStep#{2 + i}" for i in range(2 * copies)]
    api = df.filter(pl.col("kind") == "cuda_api")
    assert api["correlation"].n_unique() == api.height  # ids stay unique across the copies
    assert df.filter(pl.col("kind") == "gpu_sync")["name"].cast(pl.String).str.starts_with("cuda").all()


# --------------------------------------------------------------------------------------------
# real exports: what each one is known for


@pytest.mark.real
def test_two_process_export_links_api_and_gpu_rows_within_each_process(samples: Path) -> None:
    path = samples / MFU_2GPU
    df = frame(imported(path))
    api = df.filter(pl.col("kind") == "cuda_api").select("pid", "correlation", api_name="name")
    kernels = df.filter(pl.col("kind") == "kernel")
    linked = kernels.join(api.unique(["pid", "correlation"]), on=["pid", "correlation"], how="inner")
    by_sql = sql_count(
        path,
        "SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN CUPTI_ACTIVITY_KIND_RUNTIME r "
        "ON r.correlationId = k.correlationId AND (r.globalTid >> 24) = (k.globalPid >> 24) "
        "AND r.eventClass IN (0, 1)",
    )
    assert linked.height == by_sql == 3986
    # correlationIds repeat across the two processes: matching on them alone would pair wrongly.
    assert kernels.join(api, on="correlation", how="inner").height > linked.height
    # One process per GPU; each process's kernels are on its own device only.
    devices_per_process = kernels.group_by("pid").agg(pl.col("device").unique())["device"].to_list()
    assert sorted(devices_per_process) == [[0], [1]]


@pytest.mark.real
def test_nccl_kernels_are_communication(samples: Path) -> None:
    df = frame(imported(samples / MFU_2GPU))
    comm = df.filter(pl.col("is_comm"))
    assert comm.height == 66
    assert comm["name"].cast(pl.String).str.starts_with("ncclDevKernel_SendRecv").all()
    assert sorted(comm.group_by("device").len().rows()) == [(0, 33), (1, 33)]
    assert df.filter(pl.col("kind") == "range")["domain"].null_count() == df.filter(pl.col("kind") == "range").height
    assert any("domainId 1" in w for w in imported(samples / MFU_2GPU).meta.warnings)


@pytest.mark.real
def test_sync_rows_are_classified_by_the_correlated_api_call(samples: Path) -> None:
    syncs = frame(imported(samples / MFU_2GPU)).filter(pl.col("kind") == "gpu_sync")
    counts = dict(syncs.group_by(pl.col("sync_kind").cast(pl.String)).len().iter_rows())
    assert counts == {"stream_synchronize": 33, "stream_wait_event": 200, "event_query": 133}
    assert set(syncs["name"].cast(pl.String)) == {"cudaStreamSynchronize", "cudaStreamWaitEvent", "cudaEventQuery"}


@pytest.mark.real
@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (MORDRED_2021[0], {"context_synchronize": 9, "event_synchronize": 6}),
        (FLAMEOX_2025, {"stream_synchronize": 2}),
        (NVFUSER_2024, {"stream_synchronize": 1}),
        (H100_2GPU, {"stream_wait_event": 236, "stream_synchronize": 8}),
    ],
)
def test_sync_classification_survives_the_syncType_renumbering(
    samples: Path, name: str, expected: dict[str, int]
) -> None:
    syncs = frame(imported(samples / name)).filter(pl.col("kind") == "gpu_sync")
    assert dict(syncs.group_by(pl.col("sync_kind").cast(pl.String)).len().iter_rows()) == expected


@pytest.mark.real
def test_2022_export_skips_backtrace_duplicates_and_tolerates_extra_columns(samples: Path) -> None:
    result = imported(samples / PIPIT_2022)
    events, rows, skipped = stats_by_category(result)["CUPTI_ACTIVITY_KIND_RUNTIME"]
    assert (events, rows, skipped) == (95, 57, {"eventClass 67 (CUDA backtrace duplicate)": 38})
    df = frame(result)
    assert df.filter(pl.col("kind") == "memcpy").height == 15  # MEMCPY has the extra `name` column too
    ranges = df.filter(pl.col("kind") == "range")
    assert ranges.height == 22 and not ranges["name"].cast(pl.String).str.starts_with("[unnamed").any()
    assert ranges.filter(pl.col("domain") == "MPI").height == 17  # registered strings (textId) in domain MPI
    assert result.meta.format_version == "2022.2.1.31"
    assert result.meta.properties["metadata_table"] == "EXPORT_META_DATA"


@pytest.mark.real
@pytest.mark.parametrize("name", MORDRED_2021)
def test_2021_exports_without_metadata_load(samples: Path, name: str) -> None:
    result = imported(samples / name)
    assert result.meta.format_version is None
    assert result.meta.properties["schema_version"].startswith("unknown (pre-2022")
    assert result.meta.clock_offset_ns is None
    assert [g.name for g in result.meta.gpus] == ["Quadro RTX 6000"]
    copy_kinds = frame(result).filter(pl.col("kind") == "memcpy")["copy_kind"].cast(pl.String).unique().sort()
    assert copy_kinds.to_list() == ["DtoH", "HtoD"]


@pytest.mark.real
def test_graph_trace_rows_are_whole_graph_kernels(samples: Path) -> None:
    df = frame(imported(samples / FLAMEOX_2025))
    graphs = df.filter(pl.col("category") == "CUPTI_ACTIVITY_KIND_GRAPH_TRACE")
    assert (
        graphs.select(pl.col("kind").cast(pl.String), pl.col("name").cast(pl.String), "graph_id").rows()
        == [("kernel", "[CUDA graph 1]", 1)] * 2
    )
    launches = df.filter(pl.col("kind") == "cuda_api").join(graphs, on=["pid", "correlation"], how="inner")
    assert launches["name"].cast(pl.String).to_list() == ["cudaGraphLaunch"] * 2


@pytest.mark.real
def test_api_names_lose_the_cuda_version_suffix_but_keep_real_v2_names(samples: Path) -> None:
    names = set(frame(imported(samples / NVFUSER_2024)).filter(pl.col("kind") == "cuda_api")["name"].cast(pl.String))
    # StringIds: cudaLaunchKernel_v7000, cudaGetDeviceProperties_v2_v12000, cuGetProcAddress_v2 (driver)
    assert {"cudaLaunchKernel", "cudaGetDeviceProperties_v2", "cuGetProcAddress_v2"} <= names


@pytest.mark.real
def test_memcpy_directions_and_names(samples: Path) -> None:
    memcpys = frame(imported(samples / H100_2GPU)).filter(pl.col("kind") == "memcpy")
    got = {(k, n): c for k, n, c in memcpys.group_by("copy_kind", "name").len().iter_rows()}
    assert got == {
        ("HtoD", "[CUDA memcpy HtoD]"): 450,
        ("DtoD", "[CUDA memcpy DtoD]"): 450,
        ("DtoH", "[CUDA memcpy DtoH]"): 4,
    }


@pytest.mark.real
def test_meta_of_a_complete_modern_export(samples: Path) -> None:
    path = samples / MOCK_2026
    meta = imported(path).meta
    utc = sql_count(path, "SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME")
    system_clock = sql_count(path, "SELECT systemClockNs FROM TARGET_INFO_SESSION_START_TIME")
    assert meta.clock_offset_ns == utc - system_clock
    assert meta.format_version == "2026.1.1.204"
    assert meta.properties["schema_version"] == "3.24.14"
    (gpu,) = meta.gpus
    assert (gpu.name, gpu.sm_count, gpu.compute_capability) == ("NVIDIA GeForce RTX 3080", 68, "8.6")


@pytest.mark.real
def test_clock_offset_before_2026_uses_the_analysis_start(samples: Path) -> None:
    path = samples / FLAMEOX_2025
    utc = sql_count(path, "SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME")
    start = sql_count(path, "SELECT startTime FROM ANALYSIS_DETAILS")
    assert imported(path).meta.clock_offset_ns == utc - start


@pytest.mark.real
def test_export_without_gpu_table_lists_the_devices_it_saw(samples: Path) -> None:
    meta = imported(samples / MFU_2GPU).meta
    assert [g.device for g in meta.gpus] == [0, 1] and all(g.name is None for g in meta.gpus)
    assert meta.properties["derived_from"] == "mfu_h1002_nsys.sqlite"


# --------------------------------------------------------------------------------------------
# the rank in the captured environment (META_DATA_CAPTURE), as one nsys per rank records it


def with_env(*variables: str, process: int = 0) -> dict[str, tuple[Sequence[str], Sequence[Sequence[Any]]]]:
    """The tiny export without MPI ranks, its launched process's environment holding ``variables``
    (``NAME="value"``, as nsys writes them) beside other capture settings."""
    tables = tiny_tables()
    del tables["MPI_RANKS"]
    rows = [("CUDA_TRACE_SCOPE", "ProcessTree"), ("PROCESS_0:COMMAND", "python3"), ("RANK", "7")]
    rows += [(f"PROCESS_{process}:ENVIRONMENT_VARIABLE", v) for v in ('PATH="/usr/bin:/bin"', *variables)]
    tables["META_DATA_CAPTURE"] = (("name", "value"), rows)
    return tables


def test_the_launched_process_environment_gives_the_rank(tmp_path: Path, backend: str) -> None:
    path = make_export(tmp_path / "a.sqlite", with_env('RANK="5"', 'LOCAL_RANK="1"', 'WORLD_SIZE="8"'))
    result = read_nsys_sqlite(path)
    assert (result.meta.rank, result.meta.world_size, result.meta.properties["local_rank"]) == (5, 8, "1")
    assert frame(result)["rank"].unique().to_list() == [5]  # every row, as Kineto's distributedInfo does


@pytest.mark.parametrize(
    ("tables", "why"),
    [
        (lambda: {**tiny_tables(), "META_DATA_CAPTURE": with_env('RANK="5"')["META_DATA_CAPTURE"]}, "MPI_RANKS wins"),
        (lambda: with_env('RANK="five"'), "not an integer"),
        (lambda: with_env("WORLD_SIZE=8"), "not set"),
    ],
)
def test_no_rank_from_the_environment(tmp_path: Path, tables: Any, why: str) -> None:
    result = read_nsys_sqlite(make_export(tmp_path / "a.sqlite", tables()))
    assert result.meta.rank == (3 if why == "MPI_RANKS wins" else None), why
    assert result.meta.world_size is None, why


def test_processes_that_disagree_give_no_rank(tmp_path: Path) -> None:
    tables = with_env('RANK="5"')
    columns, rows = tables["META_DATA_CAPTURE"]
    tables["META_DATA_CAPTURE"] = (columns, [*rows, ("PROCESS_1:ENVIRONMENT_VARIABLE", 'RANK="6"')])
    assert read_nsys_sqlite(make_export(tmp_path / "a.sqlite", tables)).meta.rank is None


def test_an_export_of_several_processes_ignores_the_launchers_rank(tmp_path: Path) -> None:
    """``nsys profile torchrun ...`` records torchrun's environment: a RANK there (a node's, set by a
    cluster launcher) says nothing of the four ranks torchrun starts."""
    path = write_nsys_sqlite(build_timeline(preset("balanced_job")), tmp_path / "node.sqlite")
    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO META_DATA_CAPTURE VALUES ('PROCESS_0:ENVIRONMENT_VARIABLE', 'RANK=\"1\"')")
    result = read_nsys_sqlite(path)
    assert result.meta.rank is None and frame(result)["rank"].null_count() == frame(result).height
    assert result.meta.properties["env_rank"] == "1 (not used: the export holds several processes or MPI ranks)"


def test_per_rank_exports_named_without_ranks_load_in_rank_order(tmp_path: Path) -> None:
    """One export per rank, named by host: the ranks come from each file's RANK, not its position."""
    timeline = build_timeline(preset("straggler_job"))
    files = write_nsys_per_rank(timeline, tmp_path, pattern="node-{rank}.sqlite")
    for f, host in zip(files, "dcba", strict=True):  # file order is now the reverse of rank order
        f.rename(tmp_path / f"node-{host}.sqlite")
    trace = load(tmp_path, cache=False)
    assert [(Path(s.path).name, s.rank, s.world_size) for s in trace.meta.sources] == [
        ("node-d.sqlite", 0, 4),
        ("node-c.sqlite", 1, 4),
        ("node-b.sqlite", 2, 4),
        ("node-a.sqlite", 3, 4),
    ]
    assert trace.meta.warnings == ()
