"""The cache cannot lie: a damaged entry is never served (its digest covers every byte of it), and
what the source fingerprint covers -- sampled by default, every byte with ``verify="full"``."""

from __future__ import annotations

import json
import os
import shutil
import warnings
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import traceq
from traceq import cache as cache_module
from traceq import fingerprints
from traceq import loading as loading_module
from traceq.cache import CACHE_VERIFY_ENV, Cache, CacheWarning
from traceq.cli import cli
from traceq.errors import InvalidArgumentError
from traceq.importers import detect_format

from .conftest import SAMPLES

SHIPPED = ["training_step.pt.trace.json.gz", "training_step.nsys.sqlite"]
FLIP_EVERY_BYTES = 97


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


def flipped(data: bytes, at: int) -> bytes:
    """``data`` with one bit of byte ``at`` flipped (which bit varies with ``at``)."""
    changed = bytearray(data)
    changed[at] ^= 1 << (at % 8)
    return bytes(changed)


def get_recording(store: Cache, key: cache_module.SourceKey) -> tuple[Any, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        hit = store.get(key)
    return hit, [str(w.message) for w in caught if issubclass(w.category, CacheWarning)]


# --------------------------------------------------------------------------------------------
# damaged entries


@pytest.mark.parametrize("name", SHIPPED)
def test_a_bit_flipped_at_every_97th_byte_of_an_entry_is_never_served(name: str, tmp_path: Path) -> None:
    source = tmp_path / name
    shutil.copy(SAMPLES / name, source)
    store = Cache(tmp_path / "cache")
    fresh = traceq.load(source, cache=store)
    key = store.key(source, detect_format(source))
    assert key is not None
    entry = store.entry_path(key)
    whole = entry.read_bytes()
    original = store.get(key)
    assert original is not None and original.events.equals(fresh.events)  # the entry as written is served
    offsets = range(0, len(whole), FLIP_EVERY_BYTES)
    served: list[int] = []
    for at in offsets:
        entry.write_bytes(flipped(whole, at))  # a fresh copy, one flip
        hit, said = get_recording(store, key)
        if hit is not None:
            served.append(at)  # never: but were one served, it would have to be the same table
            assert hit.events.equals(original.events) and hit.metadata == original.metadata
            continue
        assert len(said) == 1 and "is damaged" in said[0], (at, said)
        assert not entry.exists(), "a damaged entry is discarded"
    assert served == [], f"{len(served)} of {len(offsets)} flipped entries were served"


@pytest.mark.parametrize("where", ["first byte", "middle", "in the footer", "last byte"])
def test_a_flipped_entry_is_reimported_to_the_same_table_with_one_warning(
    where: str, tmp_path: Path, imports: list[Path]
) -> None:
    source = tmp_path / SHIPPED[0]
    shutil.copy(SAMPLES / SHIPPED[0], source)
    store = Cache(tmp_path / "cache")
    fresh = traceq.load(source, cache=False)
    traceq.load(source, cache=store)
    (entry,) = store.directory.glob("*.parquet")
    whole = entry.read_bytes()
    at = {"first byte": 0, "middle": len(whole) // 2, "in the footer": len(whole) - 200, "last byte": len(whole) - 1}
    entry.write_bytes(flipped(whole, at[where]))
    with pytest.warns(CacheWarning, match="is damaged") as caught:
        again = traceq.load(source, cache=store)
    assert len([w for w in caught if issubclass(w.category, CacheWarning)]) == 1
    assert again.events.equals(fresh.events) and again.import_stats == fresh.import_stats and again.meta == fresh.meta
    assert len(imports) == 3  # fresh, stored, and again after the flip
    traceq.load(source, cache=store)  # the entry was written again, whole
    assert len(imports) == 3


def test_the_cli_says_so_in_one_warning_line_and_prints_what_a_fresh_import_gives(tmp_path: Path) -> None:
    source = tmp_path / SHIPPED[1]
    shutil.copy(SAMPLES / SHIPPED[1], source)
    args = ["info", "--json", "--cache-dir", str(tmp_path / "cache"), str(source)]
    first = CliRunner().invoke(cli, args)
    (entry,) = (tmp_path / "cache").glob("*.parquet")
    entry.write_bytes(flipped(entry.read_bytes(), entry.stat().st_size // 3))
    second = CliRunner().invoke(cli, args)
    assert second.exit_code == 0
    assert json.loads(second.stdout) == json.loads(first.stdout)
    assert second.stderr.count("\n") == 1
    assert second.stderr.startswith(f"traceq: warning: cache entry {entry} of {source} is damaged (")
    assert second.stderr.endswith("); discarded it, the source is imported again\n")


# --------------------------------------------------------------------------------------------
# the source fingerprint: sampled by default, every byte on request


def big_trace(path: Path, kernel_name: str) -> int:
    """A Kineto trace over 2 MiB with one kernel in its middle; returns the offset of the kernel's
    name, at least a MiB from either end (where the sampled fingerprint does not look)."""
    filler = [
        {"ph": "X", "cat": "cpu_op", "name": f"aten::op_{i:05d}", "pid": 7, "tid": 8, "ts": 200 + i, "dur": 1}
        for i in range(24_000)
    ]
    kernel = {
        "ph": "X",
        "cat": "kernel",
        "name": kernel_name,
        "pid": 0,
        "tid": 7,
        "ts": 150,
        "dur": 20,
        "args": {"correlation": 1, "device": 0, "stream": 7},
    }
    events = [*filler[:12_000], kernel, *filler[12_000:]]
    text = json.dumps({"schemaVersion": 1, "traceEvents": events}, indent=1)
    path.write_text(text, encoding="utf-8")
    at = text.index(kernel_name)
    assert min(at, len(text) - at) > fingerprints.HASHED_SPAN_BYTES
    return at


def edit_the_middle_keeping_size_and_mtime(path: Path, at: int, new: bytes) -> None:
    before = path.stat()
    with path.open("r+b") as fh:
        fh.seek(at)
        fh.write(new)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (path.stat().st_size, path.stat().st_mtime_ns) == (before.st_size, before.st_mtime_ns)


def kernel_names(t: traceq.Trace) -> list[str]:
    return [str(n) for n in t.kernels["name"].to_list()]


def test_a_middle_edit_with_size_and_mtime_restored_is_not_seen_by_the_sampled_default(tmp_path: Path) -> None:
    # Documented (docs/performance.md, traceq/cache.py): the default reads the size, the mtime and
    # the first and last MiB only; this is the edit it cannot see.
    source = tmp_path / "big.pt.trace.json"
    at = big_trace(source, "gemm_a")
    store = Cache(tmp_path / "cache")
    assert store.verify == "sampled"
    assert kernel_names(traceq.load(source, cache=store)) == ["gemm_a"]
    edit_the_middle_keeping_size_and_mtime(source, at, b"gemm_b")
    assert kernel_names(traceq.load(source, cache=store)) == ["gemm_a"]  # stale, as documented
    assert kernel_names(traceq.load(source, cache=False)) == ["gemm_b"]


def test_the_full_check_sees_a_middle_edit_with_size_and_mtime_restored(tmp_path: Path, imports: list[Path]) -> None:
    source = tmp_path / "big.pt.trace.json"
    at = big_trace(source, "gemm_a")
    store = Cache(tmp_path / "cache", verify="full")
    assert kernel_names(traceq.load(source, cache=store)) == ["gemm_a"]
    assert kernel_names(traceq.load(source, cache=store)) == ["gemm_a"] and len(imports) == 1  # a hit
    edit_the_middle_keeping_size_and_mtime(source, at, b"gemm_b")
    assert kernel_names(traceq.load(source, cache=store)) == ["gemm_b"]
    assert len(imports) == 2


def test_the_full_check_from_the_command_line_and_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "big.pt.trace.json"
    at = big_trace(source, "gemm_a")

    def kernels(*options: str) -> list[str]:
        result = CliRunner().invoke(cli, ["events", *options, "--kind", "kernel", "--format", "json", str(source)])
        assert result.exit_code == 0, result.output
        return [row["name"] for row in json.loads(result.stdout)]

    assert kernels() == ["gemm_a"]
    edit_the_middle_keeping_size_and_mtime(source, at, b"gemm_b")
    assert kernels() == ["gemm_a"]  # the sampled default: stale
    assert kernels("--cache-verify", "full") == ["gemm_b"]
    edit_the_middle_keeping_size_and_mtime(source, at, b"gemm_c")
    monkeypatch.setenv(CACHE_VERIFY_ENV, "full")
    assert kernels() == ["gemm_c"]
    assert kernels("--cache-verify", "sampled") == ["gemm_c"]  # the entry now holds gemm_c


def test_an_entry_made_without_the_full_digest_is_remade_once_when_it_is_asked_for(
    tmp_path: Path, imports: list[Path]
) -> None:
    source = tmp_path / "t.pt.trace.json.gz"
    shutil.copy(SAMPLES / SHIPPED[0], source)
    traceq.load(source, cache=Cache(tmp_path / "cache"))
    full = Cache(tmp_path / "cache", verify="full")
    traceq.load(source, cache=full)
    traceq.load(source, cache=full)
    traceq.load(source, cache=Cache(tmp_path / "cache"))  # and the sampled check still takes it
    assert len(imports) == 2


def test_a_bad_verification_mode_is_one_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(InvalidArgumentError, match="verify='every' is not one of sampled, full"):
        Cache(tmp_path, verify="every")  # type: ignore[arg-type]
    monkeypatch.setenv(CACHE_VERIFY_ENV, "fulll")
    result = CliRunner().invoke(cli, ["info", str(SAMPLES / SHIPPED[0])])
    assert result.exit_code == 2
    assert result.stderr == (
        "traceq: error: TRACEQ_CACHE_VERIFY='fulll' is not a cache verification mode. "
        "Set it to one of sampled, full, or unset it.\n"
    )
    result = CliRunner().invoke(cli, ["info", "--no-cache", "--cache-verify", "full", str(SAMPLES / SHIPPED[0])])
    assert result.exit_code == 2 and result.stderr == "traceq: error: pass --cache-verify or --no-cache, not both.\n"
