"""The columnar cache: hits, misses, invalidation, damaged entries, unwritable directories, and
results identical with and without it."""

from __future__ import annotations

import errno
import json
import os
import pickle
import shutil
import subprocess
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import traceq
from traceq import cache as cache_module
from traceq import fingerprints, schema
from traceq import loading as loading_module
from traceq.cache import CACHE_DIR_ENV, ENTRY_LITERALS_KEY, ENTRY_METADATA_KEY, Cache, CacheWarning, default_cache_dir
from traceq.cli import cli
from traceq.trace import Trace

from .earlier_seals import unsealed, write_blake2b_sealed
from .permissions import run_unprivileged


def kineto_trace(kernel_name: str = "gemm_a") -> str:
    """A tiny Kineto trace: one step, one launch, one kernel (names of equal length keep the size)."""
    events: list[dict[str, Any]] = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#2", "pid": 7, "tid": 8, "ts": 0, "dur": 100},
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaLaunchKernel",
            "pid": 7,
            "tid": 8,
            "ts": 10,
            "dur": 5,
            "args": {"correlation": 1},
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": kernel_name,
            "pid": 0,
            "tid": 7,
            "ts": 20,
            "dur": 50,
            "args": {"correlation": 1, "device": 0, "stream": 7},
        },
    ]
    return json.dumps({"schemaVersion": 1, "traceEvents": events}, indent=1)


@pytest.fixture()
def source(tmp_path: Path) -> Path:
    path = tmp_path / "run" / "step.pt.trace.json"
    path.parent.mkdir()
    path.write_text(kineto_trace(), encoding="utf-8")
    return path


@pytest.fixture()
def imports(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The sources that were really imported (not served from the cache), in order."""
    seen: list[Path] = []
    real = loading_module.read_file

    def counting(path: Path, fmt: Any = None, **options: Any) -> Any:
        seen.append(path)
        return real(path, fmt, **options)

    monkeypatch.setattr(loading_module, "read_file", counting)
    return seen


def entries(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.parquet")) if directory.is_dir() else []


def assert_same(a: Trace, b: Trace) -> None:
    assert a.events.equals(b.events)
    assert a.events.schema == b.events.schema == schema.POLARS_SCHEMA
    assert a.import_stats == b.import_stats
    assert a.meta == b.meta


def kernel_names(t: Trace) -> list[str]:
    return t.kernels["name"].cast(pl.String).to_list()


# --------------------------------------------------------------------------------------------
# hit and miss


def test_a_miss_imports_and_stores_and_a_hit_does_not_import(source: Path, tmp_path: Path, imports: list[Path]) -> None:
    store = Cache(tmp_path / "cache")
    first = traceq.load(source, cache=store)
    assert imports == [source]
    assert len(entries(store.directory)) == 1
    second = traceq.load(source, cache=store)
    assert imports == [source]  # served from the entry
    assert_same(first, second)
    assert_same(second, traceq.load(source, cache=False))


def test_load_uses_the_directory_named_by_the_environment(
    source: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "env-cache"))
    traceq.load(source)
    assert len(entries(tmp_path / "env-cache")) == 1


def test_cache_false_reads_and_writes_nothing(
    source: Path, private_cache_dir: Path, imports: list[Path], tmp_path: Path
) -> None:
    traceq.load(source)  # fills the default cache
    traceq.load(source, cache=False)
    assert imports == [source, source]
    before = entries(private_cache_dir)
    other = tmp_path / "other.json"
    shutil.copy(source, other)
    traceq.load(other, cache=False)
    assert entries(private_cache_dir) == before


def test_the_entry_is_a_traceq_parquet_file_that_load_reads(source: Path, tmp_path: Path) -> None:
    store = Cache(tmp_path / "cache")
    original = traceq.load(source, cache=store)
    (entry,) = entries(store.directory)
    assert entry.name.endswith("-step.pt.trace.json.parquet")
    assert pq.read_metadata(entry).metadata[b"traceq"]  # the metadata of Trace.to_parquet
    key = json.loads(pq.read_metadata(entry).metadata[ENTRY_METADATA_KEY])
    assert key["path"] == str(source.resolve()) and key["schema_version"] == schema.SCHEMA_VERSION
    assert_same(traceq.load(entry), original)


def test_a_hit_has_the_columns_of_one_value_as_literals_and_does_not_decode_them(
    source: Path, tmp_path: Path, imports: list[Path]
) -> None:
    store = Cache(tmp_path / "cache")
    imported = traceq.load(source, cache=store)
    rows = imported.events.rows(named=True)
    one_value = {c: rows[0][c] for c in imported.events.columns if len({r[c] for r in rows}) == 1}
    (entry,) = entries(store.directory)
    literals = json.loads(pq.read_metadata(entry).metadata[ENTRY_LITERALS_KEY])
    assert literals == {"columns": imported.events.columns, "values": one_value}
    assert {"rank", "source", "domain", "graph_id"} <= set(one_value)
    served = traceq.load(source, cache=store)
    assert imports == [source]
    assert served.events.select(list(one_value)).estimated_size() < 16 * len(one_value)  # no rows held
    assert_same(served, imported)
    assert pq.read_table(entry).column_names == imported.events.columns  # every column stored all the same


def test_an_entry_that_does_not_name_its_literal_columns_is_damaged(
    source: Path, tmp_path: Path, imports: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Cache(tmp_path / "cache")
    with monkeypatch.context() as patched:
        patched.setattr(cache_module, "ENTRY_LITERALS_KEY", b"traceq.cache.other")
        imported = traceq.load(source, cache=store)
    with pytest.warns(CacheWarning, match=r"is damaged \(it cannot be read: KeyError\); discarded it"):
        again = traceq.load(source, cache=store)
    assert imports == [source, source]
    assert_same(again, imported)


def test_a_hit_through_another_spelling_of_the_path_names_the_path_as_given(
    source: Path, tmp_path: Path, imports: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Cache(tmp_path / "cache")
    traceq.load(source.resolve(), cache=store)
    monkeypatch.chdir(source.parent)
    relative = Path(source.name)
    served = traceq.load(relative, cache=store)
    assert imports == [source.resolve()]
    assert_same(served, traceq.load(relative, cache=False))
    assert served.events["source"].unique().to_list() == [source.name]


def test_a_directory_of_ranks_is_cached_file_by_file(samples: Path, tmp_path: Path, imports: list[Path]) -> None:
    store = Cache(tmp_path / "cache")
    first = traceq.load(samples / "ranks", cache=store)
    assert len(imports) == 4 and len(entries(store.directory)) == 4
    second = traceq.load(samples / "ranks", cache=store)
    assert len(imports) == 4
    assert_same(first, second)


def test_parquet_inputs_are_not_cached(source: Path, tmp_path: Path) -> None:
    parquet = traceq.load(source, cache=False).to_parquet(tmp_path / "t.parquet")
    store = Cache(tmp_path / "cache")
    traceq.load(parquet, cache=store)
    assert entries(store.directory) == []


# --------------------------------------------------------------------------------------------
# invalidation


def test_a_content_change_with_the_same_size_and_mtime_is_a_miss(
    source: Path, tmp_path: Path, imports: list[Path]
) -> None:
    store = Cache(tmp_path / "cache")
    assert kernel_names(traceq.load(source, cache=store)) == ["gemm_a"]
    before = source.stat()
    source.write_text(kineto_trace("gemm_b"), encoding="utf-8")
    os.utime(source, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (source.stat().st_size, source.stat().st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    assert kernel_names(traceq.load(source, cache=store)) == ["gemm_b"]
    assert len(imports) == 2
    assert kernel_names(traceq.load(source, cache=store)) == ["gemm_b"]  # the entry was rewritten
    assert len(imports) == 2 and len(entries(store.directory)) == 1


def test_a_change_in_the_tail_of_a_large_file_is_a_miss(tmp_path: Path) -> None:
    path = tmp_path / "big.bin"
    path.write_bytes(b"x" * (3 * fingerprints.HASHED_SPAN_BYTES))
    store = Cache(tmp_path / "cache")
    before = store.key(path, "kineto-json")
    with path.open("r+b") as fh:
        fh.seek(-1, os.SEEK_END)
        fh.write(b"y")
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, before.mtime_ns if before else 0))
    after = store.key(path, "kineto-json")
    assert before is not None and after is not None
    assert (after.size, after.mtime_ns) == (before.size, before.mtime_ns)
    assert after.head_tail_sha256 != before.head_tail_sha256


def test_a_touched_source_is_a_miss_without_a_warning(source: Path, tmp_path: Path, imports: list[Path]) -> None:
    store = Cache(tmp_path / "cache")
    traceq.load(source, cache=store)
    stat = source.stat()
    os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a stale entry is the cache working, not a problem
        traceq.load(source, cache=store)
    assert len(imports) == 2


def test_an_entry_sealed_with_blake2b_is_checked_and_served(source: Path, tmp_path: Path, imports: list[Path]) -> None:
    store = Cache(tmp_path / "cache")
    fresh = traceq.load(source, cache=store)
    (entry,) = entries(store.directory)
    assert b"traceq.cache.sha256" in (pq.read_metadata(entry).metadata or {})
    table, metadata = unsealed(entry, ENTRY_METADATA_KEY)
    write_blake2b_sealed(entry, table, metadata, ENTRY_METADATA_KEY)  # as traceq sealed entries before
    assert_same(traceq.load(source, cache=store), fresh)
    assert imports == [source]
    data = entry.read_bytes()
    entry.write_bytes(data[:4] + bytes([data[4] ^ 1]) + data[5:])
    with pytest.warns(CacheWarning, match=r"its content does not match its digest"):
        assert_same(traceq.load(source, cache=store), fresh)


def test_an_entry_of_an_earlier_traceq_is_a_miss_without_a_warning_and_rewritten(
    source: Path, tmp_path: Path, imports: list[Path]
) -> None:
    # Entries sealed with blake2b, with a key of blake2b digests: any entry an earlier traceq made
    # (its code digest differs anyway).
    store = Cache(tmp_path / "cache")
    fresh = traceq.load(source, cache=store)
    (entry,) = entries(store.directory)
    table, metadata = unsealed(entry, ENTRY_METADATA_KEY)
    key = json.loads(metadata[ENTRY_METADATA_KEY])
    earlier_key = {name.replace("sha256", "blake2b"): value for name, value in key.items()}
    metadata[ENTRY_METADATA_KEY] = json.dumps(earlier_key).encode()
    write_blake2b_sealed(entry, table, metadata, ENTRY_METADATA_KEY)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert_same(traceq.load(source, cache=store), fresh)
    assert imports == [source, source]
    assert b"traceq.cache.sha256" in (pq.read_metadata(entry).metadata or {})  # rewritten by this traceq
    assert_same(traceq.load(source, cache=store), fresh)
    assert imports == [source, source]


@pytest.mark.parametrize(
    "change",
    [
        lambda mp: mp.setattr(schema, "SCHEMA_VERSION", schema.SCHEMA_VERSION + 1),
        lambda mp: mp.setattr(cache_module, "_traceq_version", lambda: "999.0"),
        lambda mp: mp.setattr(cache_module, "traceq_code_sha256", lambda: "0" * 64),
    ],
    ids=["schema-version", "traceq-version", "traceq-code"],
)
def test_another_schema_or_traceq_version_is_a_miss(
    source: Path,
    tmp_path: Path,
    imports: list[Path],
    monkeypatch: pytest.MonkeyPatch,
    change: Callable[[pytest.MonkeyPatch], None],
) -> None:
    store = Cache(tmp_path / "cache")
    traceq.load(source, cache=store)
    change(monkeypatch)
    again = traceq.load(source, cache=store)
    assert len(imports) == 2
    assert_same(again, traceq.load(source, cache=False))


def test_another_input_format_is_a_miss(tmp_path: Path, imports: list[Path]) -> None:
    store = Cache(tmp_path / "cache")
    source = tmp_path / "t.json"
    source.write_text(kineto_trace(), encoding="utf-8")
    traceq.load(source, cache=store)
    key = store.key(source, "kineto-json")
    other = store.key(source, "nsys-sqlite")
    assert key is not None and other is not None
    assert store.get(key) is not None and store.get(other) is None


def test_a_source_that_changes_while_it_is_imported_is_not_stored(source: Path, tmp_path: Path) -> None:
    store = Cache(tmp_path / "cache")
    key = store.key(source, "kineto-json")
    assert key is not None
    trace = traceq.load(source, cache=False)
    source.write_text(kineto_trace("gemm_b") + " ", encoding="utf-8")
    assert store.put(key, trace.events, trace.file_metadata()) is None
    assert entries(store.directory) == []


# --------------------------------------------------------------------------------------------
# damaged entries are misses, never errors


def _truncate(entry: Path) -> None:
    entry.write_bytes(entry.read_bytes()[: entry.stat().st_size // 2])


def _flip_middle(entry: Path) -> None:
    data = bytearray(entry.read_bytes())
    for i in range(len(data) // 3, len(data) // 3 + 64):
        data[i] ^= 0xFF
    entry.write_bytes(bytes(data))


def _foreign_parquet(entry: Path) -> None:
    pl.DataFrame({"a": [1, 2]}).write_parquet(entry)


def _key_without_payload(entry: Path) -> None:
    """The right key, but no traceq payload: the entry decodes to nothing."""
    table = pq.read_table(entry)
    metadata = {ENTRY_METADATA_KEY: pq.read_metadata(entry).metadata[ENTRY_METADATA_KEY]}
    pq.write_table(table.replace_schema_metadata(metadata), entry)


def _key_with_wrong_columns(entry: Path) -> None:
    metadata = pq.read_metadata(entry).metadata
    pq.write_table(pa.table({"start_ns": [1]}).replace_schema_metadata(metadata), entry)


@pytest.mark.parametrize(
    "damage",
    [
        lambda p: p.write_bytes(b""),
        lambda p: p.write_bytes(b"not parquet at all" * 100),
        _truncate,
        _flip_middle,
        _foreign_parquet,
        _key_without_payload,
        _key_with_wrong_columns,
    ],
    ids=["empty", "garbage", "truncated", "flipped-bytes", "foreign-parquet", "no-payload", "wrong-columns"],
)
def test_a_damaged_entry_is_reimported_and_rewritten(
    source: Path, tmp_path: Path, imports: list[Path], damage: Callable[[Path], object]
) -> None:
    store = Cache(tmp_path / "cache")
    fresh = traceq.load(source, cache=store)
    (entry,) = entries(store.directory)
    damage(entry)
    with pytest.warns(CacheWarning, match=r"is damaged \(.*\); discarded it, the source is imported again"):
        assert_same(traceq.load(source, cache=store), fresh)
    assert len(imports) == 2
    assert_same(traceq.load(source, cache=store), fresh)  # rewritten: a hit again
    assert len(imports) == 2


# --------------------------------------------------------------------------------------------
# a cache directory that cannot be written degrades to no cache, with one warning


def test_a_read_only_cache_dir_warns_and_carries_on(source: Path, tmp_path: Path) -> None:
    directory = tmp_path / "ro"
    directory.mkdir()
    directory.chmod(0o500)
    load = f"import traceq; traceq.load({str(source)!r}, cache=traceq.cache.Cache({str(directory)!r}))"
    try:  # in a process where permissions hold (for root too): see tests/permissions.py
        done = run_unprivileged([sys.executable, "-W", "always", "-c", load], cwd=tmp_path)
    finally:
        directory.chmod(0o700)
    assert done.returncode == 0, done.stderr
    assert "CacheWarning: cache directory" in done.stderr and "cannot be written (Permission denied)" in done.stderr
    assert list(directory.iterdir()) == []


@pytest.mark.parametrize("code", [errno.EROFS, errno.ENOSPC, errno.EACCES])
def test_a_failing_write_warns_once_and_leaves_no_temporary_file(
    source: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    store = Cache(tmp_path / "cache")
    real_write = pl.DataFrame.write_parquet

    def failing(frame: pl.DataFrame, where: Any, **kw: Any) -> None:
        real_write(frame.head(1), where, **kw)  # half written, then the disk gives up
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(pl.DataFrame, "write_parquet", failing)
    with pytest.warns(CacheWarning) as caught:
        loaded = traceq.load(source, cache=store)
        traceq.load(source, cache=store)  # the same Cache: no second warning, no second try
    assert len(caught) == 1 and os.strerror(code) in str(caught[0].message)
    assert_same(loaded, traceq.load(source, cache=False))
    assert list(store.directory.iterdir()) == []


def test_a_failed_rewrite_keeps_the_previous_entry_whole(
    source: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Cache(tmp_path / "cache")
    traceq.load(source, cache=store)
    (entry,) = entries(store.directory)
    before = entry.read_bytes()
    stat = source.stat()
    os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))  # forces a rewrite

    def failing(frame: pl.DataFrame, where: Any, **kw: Any) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(pl.DataFrame, "write_parquet", failing)
    with pytest.warns(CacheWarning):
        traceq.load(source, cache=store)
    assert entries(store.directory) == [entry] and entry.read_bytes() == before


def test_a_cache_dir_that_cannot_be_created_warns(source: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.warns(CacheWarning):
        loaded = traceq.load(source, cache=Cache(blocker / "cache"))
    assert_same(loaded, traceq.load(source, cache=False))


def test_default_cache_dir_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "mine"))
    assert default_cache_dir() == tmp_path / "mine"
    monkeypatch.delenv(CACHE_DIR_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "traceq"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_cache_dir() == tmp_path / "home" / ".cache" / "traceq"


# --------------------------------------------------------------------------------------------
# the command line


def run(*args: str | Path) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, [str(a) for a in args])
    return result.exit_code, result.stdout, result.stderr


def test_cli_cache_dir_and_no_cache(source: Path, tmp_path: Path, private_cache_dir: Path) -> None:
    code, out, err = run("info", "--json", "--cache-dir", tmp_path / "c", source)
    assert code == 0 and err == ""
    assert len(entries(tmp_path / "c")) == 1 and entries(private_cache_dir) == []
    code, cached, _ = run("info", "--json", "--cache-dir", tmp_path / "c", source)
    assert code == 0 and json.loads(cached) == json.loads(out)
    code, fresh, _ = run("info", "--json", "--no-cache", source)
    assert code == 0 and json.loads(fresh) == json.loads(out)
    assert entries(private_cache_dir) == []
    run("events", source)
    assert len(entries(private_cache_dir)) == 1  # the default: $TRACEQ_CACHE_DIR


def test_cli_refuses_cache_dir_with_no_cache(source: Path, tmp_path: Path) -> None:
    code, _, err = run("info", "--no-cache", "--cache-dir", tmp_path / "c", source)
    assert code == 2 and "--cache-dir or --no-cache, not both" in err


def test_cli_unwritable_cache_is_a_one_line_warning_not_an_error(source: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    code, out, err = run("info", "--cache-dir", blocker / "cache", source)
    assert code == 0 and "rows" in out
    assert err.startswith("traceq: warning: cache directory") and err.count("\n") == 1


# --------------------------------------------------------------------------------------------
# writing behind: a first run does not wait for its entry


def test_a_write_behind_cache_stores_the_entry_when_wait_is_called(source: Path, tmp_path: Path) -> None:
    store = Cache(tmp_path / "cache", write_behind=True)
    loaded = traceq.load(source, cache=store)
    assert entries(store.directory) == []  # nothing beside the caller's own work (its report)
    store.wait()
    (entry,) = entries(store.directory)
    assert_same(traceq.load(source, cache=Cache(store.directory)), loaded)
    assert entry.stat().st_size > 0
    store.wait()  # nothing left to write
    assert entries(store.directory) == [entry]


def test_an_entry_nobody_waits_for_is_written_when_the_interpreter_exits(source: Path, tmp_path: Path) -> None:
    code = (
        "import sys, traceq; from traceq.cache import Cache; "
        f"traceq.load({str(source)!r}, cache=Cache({str(tmp_path / 'c')!r}, write_behind=True))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert len(entries(tmp_path / "c")) == 1


def test_a_write_behind_failure_is_one_warning_given_by_wait(source: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    store = Cache(blocker / "cache", write_behind=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing is said while the trace is loaded
        traceq.load(source, cache=store)
    with pytest.warns(CacheWarning, match="cannot be written") as caught:
        store.wait()
    assert len(caught) == 1
    store.wait()  # said once


def test_a_copy_sent_to_a_worker_process_writes_at_once(tmp_path: Path) -> None:
    store = Cache(tmp_path / "cache", verify="full", write_behind=True)
    copy = pickle.loads(pickle.dumps(store))
    assert (copy.directory, copy.verify, copy.write_behind) == (store.directory, "full", False)


def test_the_cli_writes_the_entry_behind_and_has_it_before_it_exits(source: Path, tmp_path: Path) -> None:
    code, _out, err = run("report", "--no-html", "--cache-dir", tmp_path / "c", source)
    assert code == 0 and err == "", err
    assert len(entries(tmp_path / "c")) == 1


def test_the_cli_reports_a_cache_written_behind_that_fails_in_one_line(source: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    code, out, err = run("report", "--no-html", "--cache-dir", blocker / "cache", source)
    assert code == 0 and out
    assert err.startswith("traceq: warning: cache directory") and err.count("\n") == 1


# --------------------------------------------------------------------------------------------
# identical results with and without the cache


SHIPPED = ["training_step.pt.trace.json.gz", "training_step.nsys.sqlite", "ranks"]
REAL = [
    "nsys/mordred_report1a_2021_quadro6000.sqlite",
    "nsys/nsysai_h100_2gpu_1s_2026.2.1.sqlite",
    "nsys/flameox_smoke_cudagraph_2025.5.2_rtx3060.sqlite",
    "kineto/02522842/resnet50_autograd_api_num_workers_0/worker0.pt.trace.json.gz",
    "hta/negative_queue_length_values_check/rank0.json.gz",
    "hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
]


def assert_cache_changes_nothing(path: Path, directory: Path, imports: list[Path], *, report: bool) -> None:
    fresh = traceq.load(path, cache=False)
    stored = traceq.load(path, cache=Cache(directory))
    imported = len(imports)
    served = traceq.load(path, cache=Cache(directory))
    assert len(imports) == imported  # the third load was served entirely from the cache
    assert_same(stored, fresh)
    assert_same(served, fresh)
    assert traceq.info(served) == traceq.info(fresh)
    if report:
        assert traceq.report(served).to_dict() == traceq.report(fresh).to_dict()


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_samples_are_identical_through_the_cache(
    samples: Path, name: str, tmp_path: Path, imports: list[Path]
) -> None:
    assert_cache_changes_nothing(samples / name, tmp_path / "cache", imports, report=True)


@pytest.mark.real
@pytest.mark.parametrize("name", REAL)
def test_real_traces_are_identical_through_the_cache(
    shared_traces: Path, name: str, tmp_path: Path, imports: list[Path]
) -> None:
    assert_cache_changes_nothing(shared_traces / name, tmp_path / "cache", imports, report=False)
