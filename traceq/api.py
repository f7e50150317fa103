"""The public Python API: a few functions that the CLI is a thin layer over.

```python
import traceq
t = traceq.load("step.sqlite")     # .nsys-rep, .json(.gz), a directory, several files, .parquet
a = traceq.analyze(t)              # step breakdown, every gap and its cause, top kernels
r = traceq.report(t)               # what `traceq report` renders (r.to_dict() is the JSON)
r = traceq.report("job/", executor=4)   # a job's ranks, file by file on 4 processes
d = traceq.diff("before/", "after.json")  # two runs compared: the step change decomposed (docs/diff.md)
c = traceq.check("after/", traceq.Budgets(max_idle=0.10), baseline="before/")  # c.passed: every budget held
traceq.sql(t, "SELECT cause, sum(dur_ns) FROM gaps GROUP BY cause")   # docs/sql.md
traceq.operators(t), traceq.phases(t)  # GPU time by launching operator, by phase (DataFrames)
```
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl

from traceq import schema
from traceq.analyses import DEFAULT_MAX_GAPS, DEFAULT_STEP_PATTERN, DEFAULT_TOP_KERNELS, Analysis, Options
from traceq.analyses import analyze as _analyze
from traceq.analyses.completeness import work_coverage
from traceq.analyses.job import analyze_job
from traceq.analyses.job_model import JobAnalysis
from traceq.analyses.mfu import ModelSpec, compute_mfu, job_gpus
from traceq.analyses.model import Mfu
from traceq.analyses.operator_table import operator_table_of
from traceq.analyses.operators import activity_operators as _activity_operators
from traceq.analyses.steps import compile_step_pattern, devices, step_index
from traceq.analyses.unlaunched import launch_coverage
from traceq.cache import Cache
from traceq.comm_kernels import check_patterns
from traceq.diff.check import Budgets, CheckResult, check_budgets
from traceq.diff.compare import diff_sides
from traceq.diff.model import Diff
from traceq.diff.sides import ALL_KERNELS, Side, SideSpec, read_side
from traceq.errors import InvalidArgumentError
from traceq.executors import ExecutorSpec
from traceq.exports.chrome import annotated_events, write_annotated
from traceq.exports.sqlite import write_tables
from traceq.exports.tables import Tables
from traceq.importers import Format
from traceq.loading import load
from traceq.pipeline import report_parts, report_paths
from traceq.report import notebook  # noqa: F401 -- registers how a Report shows in Jupyter
from traceq.report.model import Report
from traceq.trace import Trace, TraceMeta

__all__ = [
    "Analysis",
    "Budgets",
    "CheckResult",
    "Diff",
    "JobAnalysis",
    "ModelSpec",
    "Report",
    "Tables",
    "Trace",
    "TraceMeta",
    "activity_operators",
    "analyze",
    "annotate",
    "check",
    "diff",
    "events",
    "info",
    "job",
    "load",
    "mfu",
    "operators",
    "phases",
    "report",
    "sql",
    "tables",
    "to_sqlite",
]


def info(trace: Trace) -> dict[str, Any]:
    """A JSON-ready summary of a trace: its sources, per-kind row counts, import statistics, per
    source how many GPU activities have no launching call (``launch_coverage``: ``docs/importers.md``),
    and per process how many kernel launches have no GPU work in the trace (``work_coverage``:
    ``docs/findings.md``, "Incomplete data")."""
    return {
        "schema_version": schema.SCHEMA_VERSION,
        "sources": [s.to_dict() for s in trace.meta.sources],
        "rows": trace.events.height,
        "kinds": trace.kind_counts(),
        "import_stats": trace.import_stats.to_list(),
        "launch_coverage": launch_coverage(trace.events).to_dicts(),
        "work_coverage": work_coverage(trace.events).to_dicts(),
        "warnings": list(trace.meta.warnings),
    }


def _options(
    step_pattern: str,
    max_gaps: int,
    top_kernels: int,
    *,
    input_pattern: str | None,
    all_steps: bool,
    comm_patterns: Sequence[str],
    default_comm_patterns: bool,
    phase_patterns: Sequence[str] = (),
) -> Options:
    """The :class:`Options` of the keyword arguments, the user's regexes checked first."""
    if isinstance(comm_patterns, str):
        comm_patterns = (comm_patterns,)
    if isinstance(phase_patterns, str):
        phase_patterns = (phase_patterns,)
    check_patterns(comm_patterns, "comm pattern")
    check_patterns(phase_patterns, "phase pattern")
    if input_pattern is not None:
        check_patterns((input_pattern,), "input pattern")
    return Options(
        step_pattern,
        max_gaps,
        top_kernels,
        input_pattern=input_pattern,
        all_steps=all_steps,
        comm_patterns=tuple(comm_patterns),
        default_comm_patterns=default_comm_patterns,
        phase_patterns=tuple(phase_patterns),
    )


def analyze(
    trace: Trace,
    *,
    step_pattern: str = DEFAULT_STEP_PATTERN,
    max_gaps: int = DEFAULT_MAX_GAPS,
    top_kernels: int = DEFAULT_TOP_KERNELS,
    input_pattern: str | None = None,
    all_steps: bool = False,
    comm_patterns: Sequence[str] = (),
    default_comm_patterns: bool = True,
    phase_patterns: Sequence[str] = (),
) -> Analysis:
    """Per device and step: compute, communication, exposed communication, idle time by cause.

    Definitions: ``docs/analyses.md``.  ``max_gaps`` bounds ``Analysis.gaps`` (longest first;
    ``Analysis.gap_table`` keeps every gap); ``top_kernels`` bounds ``Analysis.kernels``;
    ``input_pattern``, ``all_steps``, ``comm_patterns``, ``default_comm_patterns`` and
    ``phase_patterns`` as :func:`report`.  ``Analysis.operator_table`` and ``Analysis.phase_table``
    are :func:`operators` and :func:`phases`.
    """
    options = _options(
        step_pattern,
        max_gaps,
        top_kernels,
        input_pattern=input_pattern,
        all_steps=all_steps,
        comm_patterns=comm_patterns,
        default_comm_patterns=default_comm_patterns,
        phase_patterns=phase_patterns,
    )
    return _analyze(trace.events, options)


def events(trace: Trace, *, step_pattern: str = DEFAULT_STEP_PATTERN) -> pl.DataFrame:
    """The event table with two derived columns appended: ``dur_ns`` (``end_ns - start_ns``) and
    ``step`` (Int64: the step window each row starts in, CPU rows by their process's step ranges,
    GPU rows by their device's; null outside every window: ``docs/event-table.md``).  A new frame;
    ``trace.events`` itself is unchanged."""
    steps = step_index(trace.events, step_pattern)
    return trace.events.with_columns((pl.col("end_ns") - pl.col("start_ns")).alias("dur_ns"), steps)


def activity_operators(trace: Trace, *, step_pattern: str = DEFAULT_STEP_PATTERN) -> pl.DataFrame:
    """Every GPU activity (kernel, memcpy, memset) with the call that launched it and the operator
    and module it was launched from (``docs/analyses.md``, "Operators"; columns:
    :func:`traceq.analyses.operators.activity_operators`)."""
    return _activity_operators(trace.events, step_pattern=compile_step_pattern(step_pattern))


def operators(trace: Trace, *, step_pattern: str = DEFAULT_STEP_PATTERN) -> pl.DataFrame:
    """The operator table: per device and operator, the GPU work it launched, most GPU time first
    (``docs/analyses.md``, "Operators").

    Columns: rank, device, pid, source, op_name (String; null: work with no operator), calls,
    activities, kernels, gpu_ns, mean_ns, max_ns (Int64), share (Float64)."""
    return operator_table_of(trace.events, devices(trace.events), step_pattern=compile_step_pattern(step_pattern))


def phases(
    trace: Trace,
    *,
    phase_patterns: Sequence[str] = (),
    step_pattern: str = DEFAULT_STEP_PATTERN,
    input_pattern: str | None = None,
    comm_patterns: Sequence[str] = (),
    default_comm_patterns: bool = True,
) -> pl.DataFrame:
    """The phase table: per device and phase, its step time, GPU work projected by launch, idle by
    cause and exposed communication (``docs/analyses.md``, "Phases"); the columns of every device
    sum to its totals.

    Columns: rank, device, pid, source, phase (String), ranges, activities, dur_ns, compute_ns,
    comm_ns, exposed_comm_ns, idle_ns, ``idle_<cause>_ns`` (Int64).  ``phase_patterns``: regexes
    naming the phase ranges (default: every CPU range that is no step, operator or module range)."""
    return analyze(
        trace,
        step_pattern=step_pattern,
        input_pattern=input_pattern,
        comm_patterns=comm_patterns,
        default_comm_patterns=default_comm_patterns,
        phase_patterns=phase_patterns,
    ).phase_table


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
    input_pattern: str | None = None,
    all_steps: bool = False,
    comm_patterns: Sequence[str] = (),
    default_comm_patterns: bool = True,
    phase_patterns: Sequence[str] = (),
    model: ModelSpec | None = None,
    gpus: int | None = None,
    peak_tflops: float | None = None,
    fmt: Format | None = None,
    cache: Cache | bool = True,
    executor: ExecutorSpec = None,
) -> Report:
    """The report every renderer draws: the step breakdown, the findings, MFU when ``model`` is
        given, a timeline excerpt, and the cross-rank job analysis with two or more devices;
        ``.to_dict()`` is the JSON report.

        ``trace`` is a loaded :class:`Trace`, or what :func:`load` takes: a file, a directory, several
        files.  Several files (a job's ranks) are reported **file by file** (:mod:`traceq.pipeline`):
        each file is read and summarised by a worker on ``executor`` (as :func:`load`'s), and no process
        holds more than one file's events; the report is the same as that of the loaded job.  ``fmt``,
        ``cache`` and ``executor`` say how to read files, so they are for paths only.

        ``input_pattern``: a regex naming the user's own data-loading ranges (besides PyTorch's
        DataLoader); ``all_steps``: keep warm-up steps in the steady state; ``comm_patterns``: regexes of
        more communication kernels, added to :data:`traceq.comm_kernels.DEFAULT_COMM_PATTERNS`, or
        replacing them with ``default_comm_patterns=False``; ``phase_patterns``: regexes naming the CPU
    ranges, ops or Python frames that are phases (``docs/analyses.md``, "Phases").  A pattern that is
        no valid regex raises :class:`~traceq.errors.InvalidArgumentError` before anything is read.
    """
    options = _options(
        step_pattern,
        max_gaps,
        top_kernels,
        input_pattern=input_pattern,
        all_steps=all_steps,
        comm_patterns=comm_patterns,
        default_comm_patterns=default_comm_patterns,
        phase_patterns=phase_patterns,
    )
    if not isinstance(trace, Trace):
        return report_paths(
            trace, options, model=model, gpus=gpus, peak_tflops=peak_tflops, fmt=fmt, cache=cache, executor=executor
        )
    if fmt is not None or cache is not True or executor is not None:
        raise InvalidArgumentError(
            "fmt, cache and executor say how to read files; this trace is loaded already",
            hint="pass the paths instead of the Trace, or load them with traceq.load(..., executor=...)",
        )
    return report_parts([trace], options, model, gpus, peak_tflops)


def diff(
    before: SideSpec,
    after: SideSpec,
    *,
    step_pattern: str = DEFAULT_STEP_PATTERN,
    input_pattern: str | None = None,
    all_steps: bool = False,
    comm_patterns: Sequence[str] = (),
    default_comm_patterns: bool = True,
    model: ModelSpec | None = None,
    gpus: int | None = None,
    peak_tflops: float | None = None,
    fmt: Format | None = None,
    cache: Cache | bool = True,
    executor: ExecutorSpec = None,
) -> Diff:
    """``after`` compared with ``before`` (``docs/diff.md``): the change of the steady step time
    decomposed exactly into compute, exposed communication and idle by cause, per device, the kernels
    matched by name, launches and syncs, findings, MFU and a verdict; ``.to_dict()`` is the JSON diff.

    Each side is what :func:`report` takes (a file, a directory, several files, a :class:`Trace`),
    reported with every kernel name, or a saved JSON report (a path, a :class:`Report`, or its
    payload), compared as it is.  The options are :func:`report`'s, the same for both sides.
    """
    options = _options(
        step_pattern,
        DEFAULT_MAX_GAPS,
        ALL_KERNELS,
        input_pattern=input_pattern,
        all_steps=all_steps,
        comm_patterns=comm_patterns,
        default_comm_patterns=default_comm_patterns,
    )
    sides = _sides(
        [(before, "before"), (after, "after")],
        options,
        model=model,
        gpus=gpus,
        peak_tflops=peak_tflops,
        fmt=fmt,
        cache=cache,
        executor=executor,
    )
    return diff_sides(sides[0], sides[1], model_given=model is not None)


def check(
    trace: SideSpec,
    budgets: Budgets,
    *,
    baseline: SideSpec | None = None,
    step_pattern: str = DEFAULT_STEP_PATTERN,
    input_pattern: str | None = None,
    all_steps: bool = False,
    comm_patterns: Sequence[str] = (),
    default_comm_patterns: bool = True,
    model: ModelSpec | None = None,
    gpus: int | None = None,
    peak_tflops: float | None = None,
    fmt: Format | None = None,
    cache: Cache | bool = True,
    executor: ExecutorSpec = None,
) -> CheckResult:
    """``budgets`` checked on ``trace`` (``docs/diff.md``, "Budgets"); ``max_regression`` compares
    its median steady step with ``baseline``'s.  ``trace`` and ``baseline`` are what :func:`diff`
    takes as a side; the options are :func:`report`'s.  ``.passed`` says whether every budget held.
    Raises :class:`InvalidArgumentError` for no budget, or one that cannot be checked (``max_regression``
    without a baseline, ``min_mfu`` without the MFU)."""
    if budgets.empty:
        raise InvalidArgumentError(
            "no budget to check", hint="give one (--max-idle 10%, --max-step-ms 120, ...) or a --budget file"
        )
    if budgets.max_regression is not None and baseline is None:
        raise InvalidArgumentError(
            "max_regression compares with a baseline, and none was given",
            hint="pass --baseline BEFORE (a trace or a saved JSON report)",
        )
    options = _options(
        step_pattern,
        DEFAULT_MAX_GAPS,
        DEFAULT_TOP_KERNELS,
        input_pattern=input_pattern,
        all_steps=all_steps,
        comm_patterns=comm_patterns,
        default_comm_patterns=default_comm_patterns,
    )
    roles = [(trace, "trace"), *([(baseline, "baseline")] if baseline is not None else [])]
    sides = _sides(
        roles, options, model=model, gpus=gpus, peak_tflops=peak_tflops, fmt=fmt, cache=cache, executor=executor
    )
    base = sides[1] if len(sides) > 1 else None
    return check_budgets(
        sides[0].report,
        budgets,
        baseline=base.report if base is not None else None,
        names=(sides[0].name, base.name if base is not None else None),
    )


def _sides(
    roles: Sequence[tuple[SideSpec, str]],
    options: Options,
    *,
    model: ModelSpec | None,
    gpus: int | None,
    peak_tflops: float | None,
    fmt: Format | None,
    cache: Cache | bool,
    executor: ExecutorSpec,
) -> list[Side]:
    """Each ``(spec, role)`` read as a side of a diff or a check, with the same options."""
    return [
        read_side(
            spec,
            role,
            options,
            model=model,
            gpus=gpus,
            peak_tflops=peak_tflops,
            fmt=fmt,
            cache=cache,
            executor=executor,
        )
        for spec, role in roles
    ]


def tables(
    trace: Trace,
    *,
    step_pattern: str = DEFAULT_STEP_PATTERN,
    input_pattern: str | None = None,
    all_steps: bool = False,
    comm_patterns: Sequence[str] = (),
    default_comm_patterns: bool = True,
    phase_patterns: Sequence[str] = (),
) -> Tables:
    """The named tables of ``trace`` (``docs/sql.md``: ``events``, ``kernels``, ``api``, ``ranges``,
    ``gaps``, ``steps``, ``devices``, ...), each built once, on first use: ``.frame(name)`` is a
    polars DataFrame, ``.sql(query)`` runs polars' SQL over them.  The options are :func:`analyze`'s.
    """
    options = _options(
        step_pattern,
        DEFAULT_MAX_GAPS,
        DEFAULT_TOP_KERNELS,
        input_pattern=input_pattern,
        all_steps=all_steps,
        comm_patterns=comm_patterns,
        default_comm_patterns=default_comm_patterns,
        phase_patterns=phase_patterns,
    )
    return Tables(trace.events, options, metadata=trace.metadata_tables())


def sql(trace: Trace, query: str, **options: Any) -> pl.DataFrame:
    """``query`` (polars' SQL) over the named tables of ``trace`` (:func:`tables`, which takes the
    same keyword options).  A query that fails raises :class:`~traceq.errors.InvalidArgumentError`."""
    return tables(trace, **options).sql(query)


def to_sqlite(trace: Trace, path: str | Path, **options: Any) -> Path:
    """Write the named tables of ``trace`` (:func:`tables`, same keyword options) into a new SQLite
    file ``path`` (``docs/sql.md``: ``events`` indexed by time, kind and name; ``kernels``, ``api``
    and ``ranges`` views over it).  :meth:`Trace.to_sqlite` writes the event table alone."""
    out = Path(path)
    write_tables(out, tables(trace, **options))
    return out


def annotate(trace: Trace, **options: Any) -> str:
    """The annotated Chrome trace of ``trace`` as JSON text (``docs/perfetto.md``): its events, an
    idle-by-cause track and a step track per device, the findings as instant events.  The
    options are :func:`report`'s analysis options; the trace must hold one source."""
    result = report(trace, **options)
    known = ("step_pattern", "input_pattern", "all_steps", "comm_patterns", "default_comm_patterns", "phase_patterns")
    analysis = analyze(trace, **{k: v for k, v in options.items() if k in known})
    return annotated_events(trace.events, trace.meta.sources, analysis, result.findings)


def write_annotated_trace(path: Path, document: str, *, compress: bool | None = None) -> None:
    """Write :func:`annotate`'s document to ``path``, gzip-compressed where ``compress`` (default:
    where ``path`` ends in ``.gz``)."""
    write_annotated(path, document, compress=path.name.lower().endswith(".gz") if compress is None else compress)
