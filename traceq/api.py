"""The public Python API: a few functions that the CLI is a thin layer over.

```python
import traceq
t = traceq.load("step.sqlite")     # .nsys-rep, .json(.gz), a directory, several files, .parquet
a = traceq.analyze(t)              # step breakdown, gaps and their causes, top kernels
r = traceq.report(t)               # what `traceq report` renders (r.to_dict() is the JSON)
r = traceq.report("job/")          # the same for a job's ranks, built rank by rank
```
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from traceq import schema
from traceq.analyses import DEFAULT_MAX_GAPS, DEFAULT_STEP_PATTERN, DEFAULT_TOP_KERNELS, Analysis
from traceq.analyses import analyze as _analyze
from traceq.analyses.collectives import analyze_job
from traceq.analyses.findings import find_findings
from traceq.analyses.mfu import ModelSpec, compute_mfu, job_gpus
from traceq.analyses.model import JobAnalysis, Mfu
from traceq.cache import Cache
from traceq.errors import InvalidArgumentError
from traceq.importers import Format
from traceq.report.by_rank import report_by_rank
from traceq.report.model import Report
from traceq.report.timeline import timeline_excerpt
from traceq.trace import Trace, TraceMeta, expand_paths, load

__all__ = [
    "Analysis",
    "JobAnalysis",
    "ModelSpec",
    "Report",
    "Trace",
    "TraceMeta",
    "analyze",
    "info",
    "job",
    "load",
    "mfu",
    "report",
]


def info(trace: Trace) -> dict[str, Any]:
    """A JSON-ready summary of a trace: its sources, per-kind row counts and import statistics."""
    return {
        "schema_version": schema.SCHEMA_VERSION,
        "sources": [s.to_dict() for s in trace.meta.sources],
        "rows": trace.events.height,
        "kinds": trace.kind_counts(),
        "import_stats": trace.import_stats.to_list(),
        "warnings": list(trace.meta.warnings),
    }


def analyze(
    trace: Trace,
    *,
    step_pattern: str = DEFAULT_STEP_PATTERN,
    max_gaps: int = DEFAULT_MAX_GAPS,
    top_kernels: int = DEFAULT_TOP_KERNELS,
) -> Analysis:
    """Per device and step: compute, communication, exposed communication, idle time by cause.

    Definitions: ``docs/analyses.md``.  ``max_gaps`` bounds ``Analysis.gaps`` (longest first;
    ``Analysis.gap_table`` keeps every gap); ``top_kernels`` bounds ``Analysis.kernels``.
    """
    return _analyze(trace.events, step_pattern=step_pattern, max_gaps=max_gaps, top_kernels=top_kernels)


def job(trace: Trace, analysis: Analysis) -> JobAnalysis | None:
    """The whole job across ranks (``docs/multi-rank.md``): clock alignment, collectives matched across
    ranks with their arrival skew and waits, per-rank summaries, and slow rank vs slow link.  None
    when the trace has fewer than two devices (a device is one process on one GPU).
    """
    anchors = {s.path: s.clock_offset_ns for s in trace.meta.sources}
    return analyze_job(trace.events, analysis, anchors=anchors)


def mfu(
    trace: Trace, analysis: Analysis, model: ModelSpec, *, gpus: int | None = None, peak_tflops: float | None = None
) -> Mfu:
    """MFU (and HFU) per step from the model description (``docs/mfu.md``).

    ``gpus`` is the number of GPUs that share ``model.tokens_per_step``; by default the job's world
    size where the trace states it, else the number of devices in the trace.
    """
    if gpus is None:
        gpus = job_gpus(trace.meta.sources, analysis)
    return compute_mfu(analysis, model, gpu_names=trace.meta.gpus, gpus=gpus, peak_tflops=peak_tflops)


def report(
    trace: Trace | str | Path | Sequence[str | Path],
    *,
    step_pattern: str = DEFAULT_STEP_PATTERN,
    max_gaps: int = DEFAULT_MAX_GAPS,
    top_kernels: int = DEFAULT_TOP_KERNELS,
    model: ModelSpec | None = None,
    gpus: int | None = None,
    peak_tflops: float | None = None,
    fmt: Format | None = None,
    cache: Cache | bool = True,
    jobs: int | None = None,
    client: Any = None,
    scheduler: str | None = None,
) -> Report:
    """The report object every renderer draws: the analysis, the findings, MFU when ``model`` is
    given, a timeline excerpt, and the cross-rank job analysis with two or more devices;
    ``.to_dict()`` is the JSON report.

    ``trace`` is a loaded :class:`Trace`, or what :func:`load` takes: a file, a directory, several
    files.  Several files (a job's ranks) are reported **rank by rank**
    (:mod:`traceq.report.by_rank`): each file is loaded and summarised by a worker, and no process
    holds more than one rank's table; the report is the same as that of the loaded trace.  ``fmt``,
    ``cache``, ``jobs``, ``client`` and ``scheduler`` are :func:`load`'s, for paths only.
    """
    if not isinstance(trace, Trace):
        files = expand_paths(trace)
        if len(files) < 2 or len({f.resolve() for f in files}) < len(files):  # one rank, or a file given twice
            trace = load(files, fmt=fmt, cache=cache, jobs=jobs, client=client, scheduler=scheduler)
        else:
            return report_by_rank(
                files,
                fmt=fmt,
                cache=cache,
                jobs=jobs,
                client=client,
                scheduler=scheduler,
                step_pattern=step_pattern,
                max_gaps=max_gaps,
                top_kernels=top_kernels,
                model=model,
                gpus=gpus,
                peak_tflops=peak_tflops,
            )
    elif fmt is not None or cache is not True or jobs is not None or client is not None or scheduler is not None:
        raise InvalidArgumentError(
            "fmt, cache, jobs, client and scheduler say how to load files; this trace is loaded already",
            hint="pass the paths instead of the Trace, or load them with traceq.load(..., jobs=...)",
        )
    analysis = analyze(trace, step_pattern=step_pattern, max_gaps=max_gaps, top_kernels=top_kernels)
    utilisation = None if model is None else mfu(trace, analysis, model, gpus=gpus, peak_tflops=peak_tflops)
    whole_job = job(trace, analysis)
    return Report.build(
        trace,
        analysis,
        findings=find_findings(trace.events, analysis, mfu=utilisation, job=whole_job),
        mfu=utilisation,
        timeline=timeline_excerpt(trace.events, analysis),
        job=whole_job,
    )
