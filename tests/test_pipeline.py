"""Every report comes from one pipeline (traceq.pipeline): a job of parts, read where the executor says.

Every test compares the JSON of the pipeline on a job given as files (one part per file, no process
holding more than one file's events) and on the loaded job (one part in memory) with the report the
whole-table analyses give when composed by hand (``analyze``, ``compute_mfu``, ``analyze_job``,
``find_findings``, ``timeline_excerpt`` over the job's one event table), to the byte: on a tiny
hand-made job, the generator's three jobs in both formats, and the real multi-rank traces.  The
executors (``--jobs N``, Dask) are compared in ``tests/test_executors.py``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import traceq
import traceq.api
import traceq.loading
from tracegen import build_timeline, preset, write_kineto_ranks, write_nsys_per_rank
from traceq.analyses import Options, analyze
from traceq.analyses.completeness import data_caveats, with_caveats, work_coverage
from traceq.analyses.findings import find_findings
from traceq.analyses.mfu import ModelSpec, compute_mfu, job_gpus
from traceq.analyses.timeline import timeline_excerpt
from traceq.errors import DuplicateRankError, InvalidArgumentError, UnsupportedFormatError
from traceq.pipeline import report_parts
from traceq.report.model import Report, ReportSource
from traceq.report.render import renderer_for

from .builders import kernel, launch, nccl, trace
from .builders import step as step_range

JOBS = ("balanced_job", "straggler_job", "slow_link_job")


def whole_table(
    t: traceq.Trace,
    *,
    model: ModelSpec | None = None,
    peak_tflops: float | None = None,
    **options: Any,
) -> Report:
    """The report of ``t`` composed by hand from the whole-table analyses, not through the pipeline."""
    analysis = analyze(t.events, Options(**options))
    mfu = None
    if model is not None:
        gpus = job_gpus(t.meta.sources, analysis)
        mfu = compute_mfu(analysis, model, gpu_names=t.meta.gpus, gpus=gpus, peak_tflops=peak_tflops)
    job = traceq.api.job(t, analysis)
    caveats = data_caveats(analysis.devices, work_coverage(t.events).iter_rows(), t.import_stats)
    findings, withheld = with_caveats(find_findings(t.events, analysis, mfu=mfu, job=job), caveats, analysis.devices)
    return Report(
        source=ReportSource(files=t.meta.sources, import_stats=t.import_stats.counts),
        step_pattern=analysis.step_pattern,
        devices=analysis.devices,
        steps=analysis.steps,
        gaps=analysis.gaps,
        kernels=analysis.kernels,
        kernel_names=analysis.kernel_totals.height,
        operators=analysis.operators,
        phases=analysis.phases,
        findings=findings,
        caveats=caveats,
        withheld_findings=withheld,
        mfu=mfu,
        timeline=timeline_excerpt(t.events, analysis),
        job=job,
        gap_count=analysis.gap_count,
    )


def in_memory(files: list[Path], **options: Any) -> dict[str, Any]:
    """The report of the loaded job, composed by hand; checked against the pipeline's on the same
    loaded job (one part) on the way."""
    loaded = traceq.load(files)
    report: dict[str, Any] = whole_table(loaded, **options).to_dict()
    assert as_json(traceq.report(loaded, **options).to_dict()) == as_json(report)
    return report


def file_by_file(files: list[Path], **options: Any) -> dict[str, Any]:
    report: dict[str, Any] = traceq.report(files, executor=1, **options).to_dict()
    return report


def as_json(report: dict[str, Any]) -> str:
    return json.dumps(report, sort_keys=True)


# --- a tiny job, by hand ---------------------------------------------------------------------------


def tiny_rank(r: int, *, late_ns: int, gap_ns: int) -> list[dict[str, Any]]:
    """Two 100 µs steps: a gemm, a launch gap of ``gap_ns``, a gemm, then an all-reduce that this
    rank enters ``late_ns`` after 50 µs, ending at 90 µs on every rank; rank 0 computes 5 µs inside
    its wait (the part of the wait that is not exposed)."""
    rows: list[dict[str, Any]] = []
    for n in range(2):
        t = 100_000 * n
        corr = 10 * n
        rows += [
            step_range(t, t + 100_000, n, rank=r),
            launch(t, t + 2_000, corr + 1, rank=r),
            kernel(t + 5_000, t + 20_000, "gemm_a", corr=corr + 1, rank=r),
            launch(t + 20_000 + gap_ns - 3_000, t + 20_000 + gap_ns - 1_000, corr + 2, rank=r),
            kernel(t + 20_000 + gap_ns, t + 40_000, "gemm_b", corr=corr + 2, rank=r),
            launch(t + 41_000, t + 42_000, corr + 3, rank=r),
            nccl(t + 50_000 + late_ns, t + 90_000, corr=corr + 3, rank=r),
        ]
        if late_ns == 0:
            rows += [
                launch(t + 43_000, t + 44_000, corr + 4, rank=r),
                kernel(t + 55_000, t + 60_000, corr=corr + 4, rank=r),
            ]
    return rows


@pytest.fixture(scope="module")
def tiny_job(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Rank 0 on time; rank 1 20 µs late to every all-reduce (its GPU idles before it, in a launch
    gap).  Written as traceq Parquet, one file per rank."""
    folder = tmp_path_factory.mktemp("tiny")
    files = []
    for r, (late, gap) in enumerate([(0, 13_000), (20_000, 10_000)]):
        part = trace(*tiny_rank(r, late_ns=late, gap_ns=gap), source=f"rank{r}.trace", rank=r)
        files.append(part.to_parquet(folder / f"rank{r}.parquet"))
    return files


def test_a_tiny_job_gives_the_in_memory_report(tiny_job: list[Path]) -> None:
    got, want = file_by_file(tiny_job), in_memory(tiny_job)
    assert as_json(got) == as_json(want)
    # what the merge had to get right: findings computed on one rank that cite the other as "also"
    # over the threshold, whichever rank is the worst
    found = {f["id"]: f for f in got["findings"]}
    # Per-kernel overhead (launch idle, plus CPU idle in short gaps before kernels), by hand, per step
    # of 100 µs (launch latency 1 µs on both ranks: the smallest start-after-launch, gemm_b's):
    # rank 0: launch 3 (before gemm_a) + 3 (gemm_b) + 2 (nccl) = 8 µs; CPU 10 (before gemm_b's launch)
    #   + 1 (before nccl's) + 10 (after the all-reduce, into the next step's gemm_a) = 21 µs: 24.0%.
    # rank 1: launch 8 µs; CPU 7 + 1 + 10 (+0 in the last step, whose tail ends at no kernel): 21.0%
    #   (its late all-reduce waits 27 µs after its launch returned: queued work, dependency).
    assert "(rank 0, GPU 0)" in found["launch_bound"]["title"]
    assert found["launch_bound"]["evidence"][-1]["text"] == "Also rank 1, GPU 0: launch overhead 21.0% of step time"
    assert "(rank 0, GPU 0)" in found["exposed_comm"]["title"]
    assert found["exposed_comm"]["evidence"][-1]["text"].startswith("Also rank 1, GPU 0: exposed communication")
    # the collectives matched across ranks, and rank 0's wait less the compute it ran meanwhile
    job = got["job"]
    assert job["collectives_total"] == 2 and job["clock"]["method"] == "collective_end"
    assert [(r["wait_ns"], r["exposed_wait_ns"]) for r in job["ranks"]] == [(40_000, 30_000), (0, 0)]


def test_the_longest_gaps_and_top_kernels_are_merged_over_ranks(tiny_job: list[Path]) -> None:
    got = file_by_file(tiny_job, max_gaps=3, top_kernels=2)
    assert as_json(got) == as_json(in_memory(tiny_job, max_gaps=3, top_kernels=2))
    assert [(g["rank"], g["dur_ns"]) for g in got["gaps"]] == [(1, 30_000), (1, 30_000), (0, 15_000)]
    assert [(k["name"], k["count"]) for k in got["kernels"]] == [
        ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 4),
        ("gemm_a", 4),
    ]


def test_the_job_is_never_concatenated(tiny_job: list[Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """File by file, no whole event table is ever built (loading the job would need one)."""

    def refuse(parts: object) -> None:
        raise AssertionError("the whole job's table was built")

    monkeypatch.setattr(traceq.loading, "combine", refuse)
    assert file_by_file(tiny_job)["job"] is not None
    with pytest.raises(AssertionError, match="whole job"):
        traceq.load(tiny_job)


def test_text_and_html_count_every_gap(tiny_job: list[Path]) -> None:
    """The merged analysis keeps no gap table, but the renderers still say how many gaps there are."""
    got = traceq.report(tiny_job, executor=1, max_gaps=1)
    want = whole_table(traceq.load(tiny_job), max_gaps=1)
    # 7 idle intervals per rank: before the first kernel, 5 between activities, after the last
    assert got.gap_count == want.gap_count == traceq.analyze(traceq.load(tiny_job)).gap_table.height == 14
    for suffix in (".txt", ".html"):
        render = renderer_for(Path(f"r{suffix}"), cdn=True).render
        assert render(got) == render(want)


# --- the generator's jobs, both formats --------------------------------------------------------------


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], list[Path]]:
    root = tmp_path_factory.mktemp("jobs")
    out = {}
    for name in JOBS:
        timeline = build_timeline(preset(name))
        out[(name, "kineto")] = list(write_kineto_ranks(timeline, root / name / "kineto"))
        out[(name, "nsys")] = list(write_nsys_per_rank(timeline, root / name / "nsys"))
    return out


@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
@pytest.mark.parametrize("name", JOBS)
def test_generated_jobs_give_the_in_memory_report(
    generated: dict[tuple[str, str], list[Path]], name: str, fmt: str
) -> None:
    files = generated[(name, fmt)]
    got = file_by_file(files)
    assert as_json(got) == as_json(in_memory(files))
    assert got["job"]["verdict"] == {"balanced_job": "balanced", "straggler_job": "slow_rank"}.get(name, "slow_link")


def test_mfu_and_small_top_lists_give_the_in_memory_report(generated: dict[tuple[str, str], list[Path]]) -> None:
    files = generated[("straggler_job", "kineto")]
    options: dict[str, Any] = {
        "model": ModelSpec(flops_per_step=4e14, tokens_per_step=8192),
        "peak_tflops": 989.0,
        "max_gaps": 5,
        "top_kernels": 3,
        "step_pattern": r"^ProfilerStep#[23]$",
    }
    got = file_by_file(files, **options)
    assert as_json(got) == as_json(in_memory(files, **options))
    assert got["mfu"]["gpus"] == 4 and len(got["steps"]) == 4 * 2


def test_without_the_cache_the_report_is_the_same(generated: dict[tuple[str, str], list[Path]]) -> None:
    files = generated[("slow_link_job", "nsys")]
    assert as_json(file_by_file(files, cache=False)) == as_json(in_memory(files))


# --- the real multi-rank traces --------------------------------------------------------------------


@pytest.mark.real
def test_the_sampled_rank_pair_gives_the_in_memory_report(shared_traces: Path) -> None:
    files = sorted((shared_traces / "hta" / "trace_filter").glob("sampled_rank-*.json.gz"))
    got = file_by_file(files)
    assert as_json(got) == as_json(in_memory(files))
    assert got["job"]["verdict"] == "skewed"


@pytest.mark.real
@pytest.mark.parametrize(
    "names",
    [
        # two exports of two processes each: four devices, no rank numbers
        ["nsysai_h100_2gpu_1s_2026.2.1.sqlite", "nsysai_mfu_2gpu_before_nccl_2026.2.1.sqlite"],
        # four single-GPU captures: findings whose worst device is in one file and "also" in others
        [
            "pipit_saxpy-mpi-cuda_2022.2.1_a100.sqlite",
            "mordred_report1a_2021_quadro6000.sqlite",
            "mordred_report1b_2021_quadro6000.sqlite",
            "flameox_smoke_cudagraph_2025.5.2_rtx3060.sqlite",
        ],
    ],
)
def test_real_nsys_exports_give_the_in_memory_report(shared_traces: Path, names: list[str]) -> None:
    files = [shared_traces / "nsys" / n for n in names]
    got = file_by_file(files, max_gaps=10, top_kernels=5)
    assert as_json(got) == as_json(in_memory(files, max_gaps=10, top_kernels=5))
    assert got["findings"]


@pytest.mark.real
def test_a_single_multi_process_export_as_a_file_part_is_the_loaded_one(shared_traces: Path) -> None:
    """One file of two processes, read as a file part by a worker: the same report."""
    files = [shared_traces / "nsys" / "nsysai_mfu_2gpu_before_nccl_2026.2.1.sqlite"]
    options = Options(max_gaps=10, top_kernels=5)
    got = report_parts([traceq.loading.JobFile(files[0], 0, 1)], options, executor=1).to_dict()
    assert as_json(got) == as_json(in_memory(files, max_gaps=10, top_kernels=5))
    assert len(got["job"]["ranks"]) == 2


# --- errors and arguments --------------------------------------------------------------------------


def test_a_rank_claimed_twice_is_the_loaders_error(tiny_job: list[Path], tmp_path: Path) -> None:
    twin = trace(*tiny_rank(1, late_ns=0, gap_ns=10_000), source="other.trace", rank=1).to_parquet(
        tmp_path / "x.parquet"
    )
    files = [*tiny_job, twin]
    with pytest.raises(DuplicateRankError) as loading:
        traceq.load(files)
    with pytest.raises(DuplicateRankError) as reporting:
        file_by_file(files)
    assert str(reporting.value) == str(loading.value)


def test_the_first_failing_file_is_the_loaders_error(tiny_job: list[Path], tmp_path: Path) -> None:
    empty = tmp_path / "rank5.pt.trace.json"
    empty.write_bytes(b"")
    with pytest.raises(UnsupportedFormatError, match="file is empty"):
        file_by_file([*tiny_job, empty])


def test_loading_options_need_paths(tiny_job: list[Path]) -> None:
    with pytest.raises(InvalidArgumentError, match="loaded already"):
        traceq.report(traceq.load(tiny_job), executor=2)


def test_one_file_or_a_file_twice_is_reported_from_the_loaded_trace(tiny_job: list[Path]) -> None:
    """One file, or a file given twice (which loading refuses or folds), is loaded as one part."""
    assert as_json(traceq.report(tiny_job[:1]).to_dict()) == as_json(in_memory(tiny_job[:1]))
    twice = [tiny_job[0], tiny_job[0], tiny_job[1]]
    assert as_json(traceq.report(twice).to_dict()) == as_json(in_memory(twice))
