"""The report pipeline: a job of parts in, one :class:`~traceq.report.model.Report` out.

Every report is built here, the same way, from *parts* (:mod:`traceq.analyses.parts`): a trace
already in memory is the one-part job; a job given as several files is one part per file, each
read by a worker (:mod:`traceq.executors`: this process, a process pool or a Dask cluster), so no
process holds more than one file's events.

```
parts ─► summarise × N (where each part is read: load through the cache, assign its rank)
      ─► the driver: ranks checked and ordered, parts merged, MFU, clocks aligned, collectives matched
      ─► detail × the parts asked (read again: from memory, or a cache hit)
      ─► the driver: exposed waits, job summary, findings, timeline excerpt ─► Report
```

A file read twice comes back from the columnar cache (:mod:`traceq.cache`); with the cache off a
temporary one is used and removed afterwards, except on Dask, whose workers may not share the
driver's disk: there a file is imported again.  A single file is read once, into memory (where the
executor says), and reported as a one-part job.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path

import numpy as np
import polars as pl

from traceq import schema
from traceq.analyses.collectives import align_and_match, collective_calls, with_exposed_waits
from traceq.analyses.completeness import data_caveats, with_caveats
from traceq.analyses.findings_base import FIRE_SHARE
from traceq.analyses.job import per_rank_frame, summarise_job
from traceq.analyses.job_model import JobAnalysis
from traceq.analyses.mfu import ModelSpec, compute_mfu, job_gpus
from traceq.analyses.model import Analysis, Mfu
from traceq.analyses.options import Options
from traceq.analyses.parts import (
    DetailRequest,
    MergedParts,
    PartDetail,
    PartSummary,
    detail_part,
    detail_requests,
    forget_kept_analysis,
    job_calls,
    merge_parts,
    merged_findings,
    summarise_part,
)
from traceq.analyses.timeline import TimelineExcerpt, TimelineWindow, excerpt, select_window
from traceq.analyses.top_lists import kernel_name_count
from traceq.cache import Cache
from traceq.executors import ExecutorSpec, on_cluster, open_executor
from traceq.importers import Format
from traceq.loading import JobFile, expand_paths, job_order, load
from traceq.meta import SourceMeta
from traceq.read_progress import ANALYSING, set_stage
from traceq.report.model import Report, ReportSource
from traceq.stats import ImportStats
from traceq.trace import Trace, TraceMeta

Part = Trace | JobFile
"""A part of a job: a trace in memory, or one file of the job that a worker reads."""


def report_paths(
    paths: str | Path | Sequence[str | Path],
    options: Options,
    *,
    model: ModelSpec | None = None,
    gpus: int | None = None,
    peak_tflops: float | None = None,
    fmt: Format | None = None,
    cache: Cache | bool = True,
    executor: ExecutorSpec = None,
) -> Report:
    """The report of the trace or job that ``paths`` name (as :func:`traceq.load` reads them).

    One file (or a file given twice, which loading refuses) is loaded into memory and reported as one
    part; several files are reported file by file on ``executor``.  Raises what loading the files
    would raise (the first failing file in input order, a rank claimed twice), then what the report
    would.
    """
    files = expand_paths(paths)
    if len(files) < 2 or len({f.resolve() for f in files}) < len(files):
        trace = load(files, fmt=fmt, cache=cache, executor=executor)
        set_stage(ANALYSING)  # for the progress line (traceq.progress)
        return report_parts([trace], options, model, gpus, peak_tflops)
    with ExitStack() as stack:
        if cache is False and not on_cluster(executor):
            cache = Cache(stack.enter_context(tempfile.TemporaryDirectory(prefix="traceq-ranks-")))
        parts = [JobFile(path, i, len(files), fmt, cache) for i, path in enumerate(files)]
        return report_parts(parts, options, model, gpus, peak_tflops, executor=executor)


def report_parts(
    parts: Sequence[Part],
    options: Options,
    model: ModelSpec | None = None,
    gpus: int | None = None,
    peak_tflops: float | None = None,
    *,
    executor: ExecutorSpec = None,
) -> Report:
    """The report of a job made of ``parts`` (traces in memory run in this process; files where
    ``executor`` says).  ``model``, ``gpus`` and ``peak_tflops`` ask for MFU (``docs/mfu.md``)."""
    labels = [_label(p) for p in parts]
    in_memory = any(isinstance(p, Trace) for p in parts)
    with ExitStack() as rounds, open_executor(1 if in_memory else executor, labels) as tasks:
        rounds.callback(forget_kept_analysis)  # round two took it, or it is of no use now
        summaries = tasks.map(_summarise, [(label, (p, options)) for label, p in zip(labels, parts, strict=True)])
        set_stage(ANALYSING)  # every part read (once): the progress line says so
        order = job_order([s.sources for s in summaries])
        ordered = [summaries[i] for i in order]
        del summaries
        merged = merge_parts(ordered, options)
        sources = tuple(s for p in ordered for s in p.sources)
        utilisation = _mfu(merged.analysis, sources, model, gpus, peak_tflops)
        calls = table = alignment = None
        if merged.device_table.height >= 2:
            calls = collective_calls(job_calls(ordered), merged.device_table)
            alignment, table = align_and_match(calls, {s.path: s.clock_offset_ns for s in sources})
        window = select_window(merged.analysis)
        requests, rows_of = detail_requests(
            merged,
            table if table is not None else pl.DataFrame(),
            fire_share=FIRE_SHARE,
            mfu=utilisation,
            window=window,
        )
        asked = sorted(requests)
        answers = tasks.map(
            _detail,
            [(labels[order[k]], (parts[order[k]], options, requests[k])) for k in asked],
            doing="analysed",
            replay_warnings=False,  # the first round showed them
        )
    details = dict(zip(asked, answers, strict=True))
    job = None
    if calls is not None and table is not None and alignment is not None:
        if table.height:
            covered = np.zeros(table.height, np.int64)
            for k, rows in rows_of.items():
                covered[rows] = details[k].covered_ns
            table = with_exposed_waits(table, covered)
        job = summarise_job(
            table, per_rank_frame(merged.device_table, merged.analysis.devices), alignment, comm_calls=calls.height
        )
    return _report(
        merged,
        ordered,
        details=[details[k] for k in asked],
        mfu=utilisation,
        job=job,
        window=window,
        input_pattern=options.input_pattern,
    )


def _label(part: Part) -> Path:
    """What a part's errors name: its file."""
    if isinstance(part, JobFile):
        return part.path
    return Path(part.meta.sources[0].path) if part.meta.sources else Path("<trace>")


def _read(label: Path, part: Part) -> Trace:
    """The part's trace; a file is read at ``label``, the path its task was given (on Dask, the
    absolute path: workers may not share the driver's working directory)."""
    return replace(part, path=label).read() if isinstance(part, JobFile) else part


def _summarise(label: Path, part: Part, options: Options) -> PartSummary:
    """Round one, where the part is read: the part loaded (and cached), summarised."""
    trace = _read(label, part)
    return summarise_part(trace.events, trace.meta.sources, trace.import_stats.counts, options)


def _detail(label: Path, part: Part, options: Options, request: DetailRequest) -> PartDetail:
    """Round two, where the part is read again: its request answered."""
    return detail_part(_read(label, part).events, request, options)


def _mfu(
    analysis: Analysis,
    sources: tuple[SourceMeta, ...],
    model: ModelSpec | None,
    gpus: int | None,
    peak_tflops: float | None,
) -> Mfu | None:
    if model is None:
        return None
    return compute_mfu(
        analysis,
        model,
        gpu_names=TraceMeta(sources).gpus,
        gpus=job_gpus(sources, analysis) if gpus is None else gpus,
        peak_tflops=peak_tflops,
    )


def _report(
    merged: MergedParts,
    parts: Sequence[PartSummary],
    *,
    details: Sequence[PartDetail],
    mfu: Mfu | None,
    job: JobAnalysis | None,
    window: TimelineWindow | None,
    input_pattern: str | None = None,
) -> Report:
    analysis = merged.analysis
    import_stats = ImportStats.of(c for p in parts for c in p.import_stats)
    caveats = data_caveats(analysis.devices, [row for p in parts for row in p.coverage], import_stats)
    findings, withheld = with_caveats(
        merged_findings(merged, [f for d in details for f in d.findings], job), caveats, analysis.devices
    )
    return Report(
        source=ReportSource(files=tuple(s for p in parts for s in p.sources), import_stats=import_stats.counts),
        step_pattern=analysis.step_pattern,
        devices=analysis.devices,
        steps=analysis.steps,
        gaps=analysis.gaps,
        kernels=analysis.kernels,
        kernel_names=kernel_name_count(analysis.kernel_totals),
        operators=analysis.operators,
        phases=analysis.phases,
        findings=findings,
        caveats=caveats,
        withheld_findings=withheld,
        mfu=mfu,
        timeline=None if window is None else _timeline(details, analysis, window, input_pattern),
        job=job,
        gap_count=analysis.gap_count,
    )


def _timeline(
    details: Sequence[PartDetail], analysis: Analysis, window: TimelineWindow, input_pattern: str | None
) -> TimelineExcerpt:
    """The timeline excerpt from the parts' rows in its window (``details`` in job order); the CPU
    rows show the user's ``--input-pattern`` ranges as data loading, as the attribution does."""
    activity = [d.activity for d in details if d.activity is not None]
    gaps = [d.gaps for d in details if d.gaps is not None]
    events = pl.concat(activity, how="vertical") if activity else schema.empty_frame()
    gap_table = pl.concat(gaps, how="vertical") if gaps else analysis.gap_table
    return excerpt(events, gap_table, window, input_pattern=input_pattern)


__all__ = ["Part", "report_parts", "report_paths"]
