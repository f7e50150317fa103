"""The report of a multi-file job, built rank by rank: no process holds more than one rank's table.

```
files ─► summarise × N (a worker: load the file through the cache, assign its rank, PartSummary)
      ─► the driver: ranks checked and ordered, parts merged, clocks aligned, collectives matched
      ─► detail × the parts asked (a worker: load the file again, a cache hit; PartDetail)
      ─► the driver: exposed waits, job, findings, timeline ─► Report
```

:func:`report_by_rank` gives the :class:`~traceq.report.model.Report` that ``traceq.report`` of
the loaded trace gives (the same JSON, to the byte), but a worker holds one file's import at a
time and the driver only the summaries (:mod:`traceq.analyses.by_rank` says what they hold and
why the numbers are the same).  Both rounds run on one executor of :mod:`traceq.parallel` (the
process pool, the driver itself with ``jobs=1``, or a Dask cluster).  The second round reads each
file's table back from the columnar cache (:mod:`traceq.cache`); with the cache off it uses a
temporary one, removed afterwards, except on Dask, whose workers may not share the driver's
disk: there a file is imported again.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from traceq import schema
from traceq.analyses.by_rank import (
    DetailRequest,
    PartDetail,
    PartSummary,
    detail_part,
    detail_requests,
    job_calls,
    merge_parts,
    merged_findings,
    summarise_part,
)
from traceq.analyses.collectives import (
    align_and_match,
    collective_calls,
    per_rank_frame,
    summarise_job,
    with_exposed_waits,
)
from traceq.analyses.findings import FIRE_SHARE
from traceq.analyses.mfu import ModelSpec, compute_mfu, job_gpus
from traceq.analyses.model import Analysis
from traceq.cache import Cache
from traceq.parallel import file_tasks
from traceq.report.model import Report, TimelineExcerpt
from traceq.report.timeline import DEFAULT_MAX_DEVICES, timeline_excerpt
from traceq.stats import ImportStats
from traceq.trace import Trace, TraceMeta, assign_rank, job_order, load

if TYPE_CHECKING:
    import distributed

    from traceq.importers import Format


@dataclass(frozen=True)
class _Options:
    """What every task needs besides its file: how to load it and how to analyse it."""

    fmt: Format | None
    load_kwargs: dict[str, Any]
    step_pattern: str
    max_gaps: int
    several: bool
    """Whether the job has several files (``traceq.load`` assigns ranks only then)."""


def report_by_rank(
    files: Sequence[str | Path],
    *,
    fmt: Format | None = None,
    cache: Cache | bool = True,
    jobs: int | None = None,
    client: distributed.Client | None = None,
    scheduler: str | None = None,
    step_pattern: str,
    max_gaps: int,
    top_kernels: int,
    model: ModelSpec | None = None,
    gpus: int | None = None,
    peak_tflops: float | None = None,
) -> Report:
    """The report of the job made of ``files`` (trace files, directories expanded, each file once),
    equal to ``traceq.report(traceq.load(files))`` with the same options, built rank by rank.

    ``fmt``, ``cache``, ``jobs``, ``client`` and ``scheduler`` are ``traceq.load``'s; the others
    ``traceq.report``'s.  Raises what loading the files would raise (the first failing file in
    input order, a rank claimed twice), then what the report would.
    """
    paths = [Path(f) for f in files]
    with ExitStack() as stack:
        if cache is False and client is None and scheduler is None:
            cache = Cache(stack.enter_context(tempfile.TemporaryDirectory(prefix="traceq-ranks-")))
        options = _Options(fmt, {"cache": cache}, step_pattern, max_gaps, several=len(paths) > 1)
        tasks = stack.enter_context(file_tasks(paths, jobs=jobs, client=client, scheduler=scheduler))
        summaries = tasks.map(_summarise, [(p, (i, options)) for i, p in enumerate(paths)])
        order = job_order([s.sources for s in summaries])
        parts = [summaries[i] for i in order]
        del summaries
        merged = merge_parts(parts, step_pattern=step_pattern, max_gaps=max_gaps, top_kernels=top_kernels)
        analysis = merged.analysis
        sources = tuple(s for p in parts for s in p.sources)
        utilisation = None
        if model is not None:
            utilisation = compute_mfu(
                analysis,
                model,
                gpu_names=TraceMeta(sources).gpus,
                gpus=job_gpus(sources, analysis) if gpus is None else gpus,
                peak_tflops=peak_tflops,
            )
        calls = table = alignment = None
        if merged.device_table.height >= 2:
            calls = collective_calls(job_calls(parts), merged.device_table)
            alignment, table = align_and_match(calls, {s.path: s.clock_offset_ns for s in sources})
        probe = timeline_excerpt(schema.empty_frame(), analysis)  # the window, from the analysis alone
        requests, rows_of = detail_requests(
            merged,
            table if table is not None else pl.DataFrame(),
            fire_share=FIRE_SHARE,
            mfu=utilisation,
            window=None if probe is None else (probe.start_ns, probe.end_ns),
            window_devices=DEFAULT_MAX_DEVICES,
        )
        asked = sorted(requests)
        answers = tasks.map(
            _detail,
            [(paths[order[k]], (order[k], options, requests[k])) for k in asked],
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
            table,
            per_rank_frame(merged.device_table, analysis.devices),
            alignment,
            comm_calls=calls.height,
        )
    return Report.assemble(
        sources,
        ImportStats.of(c for p in parts for c in p.import_stats).counts,
        analysis,
        findings=merged_findings(merged, [f for d in answers for f in d.findings], mfu=utilisation, job=job),
        mfu=utilisation,
        timeline=_timeline([details[k] for k in asked], merged.analysis, probe is not None),
        job=job,
    )


def _timeline(details: Sequence[PartDetail], analysis: Analysis, wanted: bool) -> TimelineExcerpt | None:
    """The timeline excerpt from the parts' rows in its window (``details`` in job order)."""
    if not wanted:
        return None
    activity = [d.activity for d in details if d.activity is not None]
    gaps = [d.gaps for d in details if d.gaps is not None]
    events = pl.concat(activity, how="vertical") if activity else schema.empty_frame()
    gap_table = pl.concat(gaps, how="vertical") if gaps else analysis.gap_table
    return timeline_excerpt(events, replace(analysis, gap_table=gap_table))


def _load_part(path: Path, position: int, options: _Options) -> Trace:
    trace = load([path], fmt=options.fmt, **options.load_kwargs)
    return assign_rank(trace, position) if options.several else trace


def _summarise(path: Path, position: int, options: _Options) -> PartSummary:
    """Round one, on a worker: one file loaded (and cached), summarised."""
    trace = _load_part(path, position, options)
    return summarise_part(trace, step_pattern=options.step_pattern, max_gaps=options.max_gaps)


def _detail(path: Path, position: int, options: _Options, request: DetailRequest) -> PartDetail:
    """Round two, on a worker: the file loaded again, its request answered."""
    trace = _load_part(path, position, options)
    return detail_part(trace.events, request, step_pattern=options.step_pattern, max_gaps=options.max_gaps)
