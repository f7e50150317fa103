"""The benchmark scripts still run end to end, at the smallest sizes and without HTA.

Nothing is timed here: the numbers belong to ``bench/run.py`` and ``docs/performance.md``.  This
only keeps ``bench/make_big.py``, ``bench/probes.py`` and ``bench/run.py`` from rotting.
"""

from __future__ import annotations

import gzip
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "bench"


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    data = tmp_path_factory.mktemp("bench-data")
    done = subprocess.run(
        [sys.executable, str(BENCH / "run.py"), "--preset", "smoke", "--no-hta", "--data", str(data)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=900,
        check=False,
    )
    return data, done


def test_run_measures_every_file_of_the_smoke_preset(smoke_run: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    data, done = smoke_run
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads((data / "results-smoke.json").read_text())
    names = {f["name"] for f in results["files"]}
    assert {"kineto-pretty-2MB.json", "kineto-compact-2MB.json", "kineto-pretty-2MB.json.gz"} <= names
    assert "nsys-20krows.sqlite" in names
    for record in results["files"]:
        assert set(record["probes"]) == {"import", "1 core", "store", "cached", "report"}
        for name, measured in record["probes"].items():
            assert measured["error"] is None, (record["name"], name, measured["error"])
            assert measured["wall_s"] > 0 and measured["peak_rss_bytes"] > 0
        assert record["probes"]["cached"]["extra"]["rows"] == record["probes"]["import"]["extra"]["rows"] > 0
    assert "| kineto-compact-2MB.json | compact |" in done.stdout
    assert "### The columnar cache" in done.stdout


def test_the_run_measures_the_machines_speed_at_its_start_and_end(
    smoke_run: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    data, done = smoke_run
    speed = json.loads((data / "results-smoke.json").read_text())["machine"]["speed"]
    assert set(speed) == {"start", "end"}
    for when in speed.values():
        assert when["fresh_page_us"] > 0 and when["sha256_mb_s"] > 0
    start, end = speed["start"], speed["end"]
    assert (
        f"a fresh 4 KiB page {start['fresh_page_us']:.2f} and {end['fresh_page_us']:.2f} µs, "
        f"SHA-256 {start['sha256_mb_s']:,} and {end['sha256_mb_s']:,} MB/s." in done.stdout
    )


def test_a_results_file_saved_before_the_speed_was_measured_renders_without_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCH))
    run = importlib.import_module("run")
    info = {
        "cpu": "a CPU",
        "cores": 2,
        "memory_bytes": 1 << 30,
        "os": "Linux",
        "python": "3.11",
        "versions": {"traceq": "0.1.0"},
        "revision": "abc1234",
        "load_average": [0.5, 0.5, 0.5],
        "repeat": 1,
    }
    header = run.render_markdown([], info, "smoke", "python bench/run.py")
    assert "Load average at the start: 0.5, 0.5, 0.5.\n" in header
    info["speed"] = {
        "start": {"fresh_page_us": 2.5, "sha256_mb_s": 1800},
        "end": {"fresh_page_us": 3.0, "sha256_mb_s": 1750},
    }
    header = run.render_markdown([], info, "smoke", "python bench/run.py")
    assert "a fresh 4 KiB page 2.50 and 3.00 µs, SHA-256 1,800 and 1,750 MB/s.\n" in header


def test_the_three_kineto_layouts_hold_the_same_document(
    smoke_run: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    data, _ = smoke_run
    pretty = (data / "kineto-pretty-2MB.json").read_bytes()
    compact = (data / "kineto-compact-2MB.json").read_bytes()
    assert compact.count(b"\n") == 1 and len(compact) < len(pretty)
    assert json.loads(compact) == json.loads(pretty)
    assert gzip.decompress((data / "kineto-pretty-2MB.json.gz").read_bytes()) == pretty


def test_make_big_is_deterministic(tmp_path: Path) -> None:
    sizes = ["--kineto-mb", "2", "--nsys-rows", "0", "--real-mb", "0"]
    for folder in ("a", "b"):
        subprocess.run(
            [sys.executable, str(BENCH / "make_big.py"), "--data", str(tmp_path / folder), *sizes],
            check=True,
            capture_output=True,
            cwd=REPO,
            timeout=300,
        )
    for name in ("kineto-pretty-2MB.json", "kineto-compact-2MB.json", "kineto-pretty-2MB.json.gz"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name


def test_a_saved_run_renders_again_to_the_same_tables(smoke_run: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    data, done = smoke_run
    rendered = subprocess.run(
        [sys.executable, str(BENCH / "run.py"), "--render", str(data / "results-smoke.json")],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
        check=True,
    )
    assert "| kineto-compact-2MB.json | compact |" in rendered.stdout
    assert rendered.stdout in done.stdout  # the same tables as the run printed


def test_the_scaling_lines_recover_the_line_the_measurements_lie_on(monkeypatch: pytest.MonkeyPatch) -> None:
    # Imports on an exact line, 4 s/GB + 0.3 s, peaks 1.25 MiB per MB + 150 MiB: the two
    # least-squares lines printed under Scaling must give those numbers back.
    monkeypatch.syspath_prepend(str(BENCH))
    run = importlib.import_module("run")
    mib = 1 << 20
    results = [
        run.FileResult(
            name=f"kineto-pretty-{mb}MB.json",
            family="kineto",
            layout="pretty",
            origin="synthetic",
            bytes=mb * 1_000_000,
            json_bytes=mb * 1_000_000,
            probes={"import": run.Measured(wall_s=0.3 + 4e-3 * mb, peak_rss_bytes=round((150 + 1.25 * mb) * mib))},
        )
        for mb in (100, 400, 1000)
    ]
    text = run.scaling_table(results)
    assert "least squares: 4.00 s/GB + 0.30 s, R² = 1.000" in text
    assert "peak RSS: 1.25 MiB per MB of JSON + 150 MiB" in text


def test_the_diff_benchmark_runs_at_its_smallest_size(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH / "bench_diff.py"), "--mb", "1", "--repeats", "1", "--work-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rows = ("| report before |", "| report after |", "| diff |", "| compare |", "| render |", "| diff ÷ (report")
    for row in rows:
        assert row in done.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kineto-compact-1MB.json", "kineto-pretty-1MB.json"]
