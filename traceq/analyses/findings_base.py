"""What every findings rule shares: the thresholds, the per-device context, and the two kinds of rule.

The context (:class:`FindingContext`) holds, once for all rules, the event table joined to devices:
per device its step windows and breakdown totals (:class:`DeviceTotals`), its kernels with their
class (:mod:`traceq.analyses.kernel_classes`) and its gaps (``Analysis.gap_table``).

Most rules are a :class:`RankedRule`: a *cost* in ns per device, divided by the device's step time
(the sum of its step windows), ranks the devices (:func:`ranking`); the rule fires on the worst
device when that share reaches :data:`FIRE_SHARE` (:func:`worst_of`), and its ``explain`` writes the
finding for that device (:meth:`WorstDevice.finding` adds the other devices over the threshold to
the evidence).  Ranking and explaining are apart so that a job read part by part
(:mod:`traceq.analyses.parts`) ranks every device of every part and explains on the part that holds
the worst one.  A :class:`JobRule` reads the whole job instead (the cross-rank analysis).
``docs/findings.md`` documents each rule.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
import polars as pl

from traceq import intervals as iv
from traceq.analyses.column_arrays import column_array
from traceq.analyses.job_model import JobAnalysis
from traceq.analyses.kernel_classes import with_kernel_class
from traceq.analyses.memo import per_frame
from traceq.analyses.model import Analysis, DeviceRef, Evidence, Finding, Mfu, Regime
from traceq.analyses.steps import DEVICE_KEY, device_activity, only_dev, with_dev
from traceq.analyses.steps import devices as device_table
from traceq.sorted_search import is_sorted
from traceq.units import capitalised, device_label, format_share

FIRE_SHARE: Final = 0.05
"""A rule fires when its cost reaches 5% of step time on some device: so it always fires at 10%
and never below 2% (the issue's guarantee)."""

SEVERITY_BANDS: Final = (("high", 0.25), ("medium", 0.10), ("low", 0.0))
"""Severity by the trigger share: high from 25%, medium from 10%, low below."""

MAX_EXTRA_DEVICES: Final = 3
"""Other devices over the threshold listed as evidence beside the worst one."""


def severity(share: float) -> str:
    """``high``, ``medium`` or ``low`` for a trigger share (see :data:`SEVERITY_BANDS`)."""
    return next(name for name, floor in SEVERITY_BANDS if share >= floor)


@dataclass(frozen=True)
class DeviceTotals:
    """One device (``dev`` indexes the context's frames) and its breakdown over its steady step
    windows (``DeviceBreakdown.steady``: warm-up left out), with its regime."""

    dev: int
    rank: int | None
    device: int
    pid: int | None
    source: str
    windows: int
    """Step windows (the activity window counts as one)."""
    dur_ns: int
    compute_ns: int
    comm_ns: int
    exposed_comm_ns: int
    idle_ns: int
    idle_by_cause_ns: Mapping[str, int]
    regime: Regime | None = None

    @property
    def ref(self) -> DeviceRef:
        return DeviceRef(source=self.source, pid=self.pid, rank=self.rank, device=self.device)

    @property
    def title_label(self) -> str:
        """:attr:`label` for the start of a sentence: ``Rank 0, GPU 0``."""
        return capitalised(self.label)

    @property
    def label(self) -> str:
        """``rank 0, GPU 0``; ``GPU 0, pid 4321`` when the trace names no rank."""
        return device_label(self.rank, self.device, pid=self.pid)


@dataclass(frozen=True)
class FindingContext:
    """The inputs of every rule, computed once.

    Frames (all with a ``dev`` column, UInt32):

    * ``windows``: dev, step, name, start_ns, end_ns (the step windows, sorted);
    * ``kernels``: dev, name (Categorical), start_ns, end_ns, dur_ns, is_comm, correlation,
      kernel_class (Categorical), in_steps_ns (every kernel row on a known device, in start order
      within each device; cast names to strings after aggregating, not before);
    * ``gaps``: ``Analysis.gap_table`` with its dev.

    ``job`` is the cross-rank analysis (:func:`traceq.analyses.job.analyze_job`, whose
    ``ranks`` are indexed by the same ``dev``) when the caller computed it; rules that need it and
    find None compute it from ``events`` (clocks then aligned without the sources' anchors).
    """

    events: pl.DataFrame
    analysis: Analysis
    devices: tuple[DeviceTotals, ...]
    windows: pl.DataFrame
    kernels: pl.DataFrame
    gaps: pl.DataFrame
    mfu: Mfu | None = None
    job: JobAnalysis | None = None
    _window_iv: dict[int, iv.Intervals] = field(default_factory=dict, repr=False, compare=False)

    def device_rows(self, d: DeviceTotals, kinds: tuple[str, ...], *columns: str) -> pl.DataFrame:
        """The event rows of ``kinds`` on device ``d`` (its source, process and GPU): the listed
        ``columns`` (default: all), copying only those."""
        wanted = list(dict.fromkeys((*(columns or self.events.columns), "kind", "source", "pid", "device")))
        return (
            self.events.select(wanted)
            .filter(
                pl.col("kind").is_in(kinds)
                & (pl.col("source") == d.source)  # Categorical against one string: no cast per row
                & pl.col("pid").eq_missing(d.pid)
                & (pl.col("device") == d.device)
            )
            .select(list(columns) or self.events.columns)
        )

    def window_intervals(self, dev: int) -> iv.Intervals:
        """The step windows of ``dev`` as intervals."""
        if dev not in self._window_iv:
            self._window_iv[dev] = iv.Intervals.from_frame(self.windows.filter(pl.col("dev") == dev))
        return self._window_iv[dev]


def build_context(
    events: pl.DataFrame, analysis: Analysis, mfu: Mfu | None = None, job: JobAnalysis | None = None
) -> FindingContext:
    """Join the event table to the analysis' devices once, for all rules."""
    table = device_table(events)
    windows = analysis.windows.filter(pl.col("steady")).select("dev", "step", "name", "start_ns", "end_ns")
    key = ["source", "pid", "device"]
    totals = {(d.source, d.pid, d.device): d for d in analysis.devices}
    infos = []
    for row in table.sort("dev").iter_rows(named=True):
        d = totals[(row["source"], row["pid"], row["device"])]
        infos.append(
            DeviceTotals(
                dev=int(row["dev"]),
                rank=row["rank"],
                device=int(row["device"]),
                pid=row["pid"],
                source=row["source"],
                windows=d.steady.windows,
                dur_ns=d.steady.dur_ns,
                compute_ns=d.steady.compute_ns,
                comm_ns=d.steady.comm_ns,
                exposed_comm_ns=d.steady.exposed_comm_ns,
                idle_ns=d.steady.idle_ns,
                idle_by_cause_ns=d.steady.idle_by_cause_ns,
                regime=d.regime,
            )
        )
    on_device = table.select("dev", *key)
    gaps = _in_steady(analysis.gap_table.join(on_device, on=key, how="inner", nulls_equal=True), windows)
    return FindingContext(
        events=events,
        analysis=analysis,
        devices=tuple(infos),
        windows=windows,
        kernels=_in_step_windows(classified_kernels(events), windows),
        gaps=gaps,
        mfu=mfu,
        job=job,
    )


def _in_steady(gaps: pl.DataFrame, windows: pl.DataFrame) -> pl.DataFrame:
    """``gaps`` with ``in_steps_ns`` measured against the steady windows (warm-up left out)."""
    inside = np.zeros(gaps.height, np.int64)
    devs = gaps.get_column("dev").to_numpy()
    spans = iv.Intervals.from_frame(gaps)
    for (dev,), win in windows.partition_by("dev", as_dict=True).items():
        on = devs == dev
        if on.any():
            inside[on] = iv.overlap_with_windows(
                iv.Intervals(spans.start_ns[on], spans.end_ns[on]), iv.Intervals.from_frame(win)
            )
    return gaps.with_columns(pl.Series("in_steps_ns", inside, dtype=pl.Int64))


@per_frame
def classified_kernels(events: pl.DataFrame) -> pl.DataFrame:
    """The kernels on a device with their class: dev, name, start_ns, end_ns, dur_ns, is_comm,
    correlation, kernel_class; sorted by dev and start.  Computed once per event table: they do not
    read the analysis, so a part's summary has them made while the analysis runs
    (:func:`~traceq.analyses.breakdown.analyze_flagged`'s spare work) and its context reads them."""
    # (of the activity the breakdown takes out of the table too: only the kernels' columns copied)
    table = device_table(events)
    wanted = (*DEVICE_KEY, "start_ns", "end_ns", "name", "is_comm", "correlation", "kind")
    kernels = device_activity(events).select(wanted)
    if table.get_column("memcpys").sum() or table.get_column("memsets").sum():  # (else every row is a kernel)
        kernels = kernels.filter(pl.col("kind") == "kernel")
    # Classified per distinct (name, is_comm), not per row: a kernel is comm as the breakdown counts it.
    kernels = with_kernel_class(with_dev(kernels.drop("kind"), table))
    rows = kernels.select(
        "dev",
        "name",
        "start_ns",
        "end_ns",
        (pl.col("end_ns") - pl.col("start_ns")).alias("dur_ns"),
        "is_comm",
        "correlation",
        "kernel_class",
    )
    return _sorted_by_dev_and_start(rows)


def _in_step_windows(rows: pl.DataFrame, windows: pl.DataFrame) -> pl.DataFrame:
    """:func:`classified_kernels` ``rows`` with ``in_steps_ns``, their time inside ``windows``."""
    in_steps = np.zeros(rows.height, np.int64)
    one = only_dev(rows)
    devs = None if one is not None else column_array(rows, "dev")
    spans = iv.Intervals(column_array(rows, "start_ns"), column_array(rows, "end_ns"))
    for (dev,), win in windows.partition_by("dev", as_dict=True).items():
        if dev == one:  # (one device: every row, neither copied nor written back through a mask)
            in_steps = iv.overlap_with_windows(spans, iv.Intervals.from_frame(win))
        elif devs is not None:
            on_dev = devs == dev
            chosen = iv.Intervals(spans.start_ns[on_dev], spans.end_ns[on_dev])
            in_steps[on_dev] = iv.overlap_with_windows(chosen, iv.Intervals.from_frame(win))
    return rows.with_columns(pl.Series("in_steps_ns", in_steps, dtype=pl.Int64))


def _sorted_by_dev_and_start(rows: pl.DataFrame) -> pl.DataFrame:
    """``rows`` in start order within each device: as they are when they came in event order
    (the usual case, checked in one pass per device), else sorted by dev, then start."""
    starts = column_array(rows, "start_ns")  # (read again by the context: _in_step_windows)
    if starts.size < 2 or is_sorted(starts):
        return rows
    devs = rows.get_column("dev").to_numpy()
    order = np.argsort(devs.astype(np.uint16) if devs.max() < 1 << 16 else devs, kind="stable")  # radix
    devs, starts = devs[order], starts[order]
    if np.all((starts[1:] >= starts[:-1]) | (devs[1:] != devs[:-1])):
        return rows  # each device's rows are in start order already
    return rows.sort("dev", "start_ns", maintain_order=True)


def with_step(frame: pl.DataFrame, windows: pl.DataFrame, at: str = "start_ns") -> pl.DataFrame:
    """``frame`` (with ``dev`` and the column ``at``) plus ``step_name`` and ``step_offset_ns``: the
    step window holding ``frame[at]`` and how far into it (nulls outside every window)."""
    win = windows.select(
        "dev",
        pl.col("start_ns").alias("_wstart"),
        pl.col("end_ns").alias("_wend"),
        pl.col("name").alias("_wname"),
    ).sort("_wstart")
    joined = (
        frame.with_row_index("_order")
        .with_columns(pl.col(at).alias("_at"))
        .sort("_at")
        .join_asof(win, left_on="_at", right_on="_wstart", by="dev", strategy="backward", check_sortedness=False)
        .sort("_order")
    )
    inside = pl.col("_at") < pl.col("_wend")
    return joined.with_columns(
        pl.when(inside).then(pl.col("_wname")).alias("step_name"),
        pl.when(inside).then(pl.col("_at") - pl.col("_wstart")).alias("step_offset_ns"),
    ).drop("_order", "_at", "_wstart", "_wend", "_wname")


@dataclass(frozen=True)
class WorstDevice:
    """The device a rule fires on: the one with the largest cost share, and every device ranked."""

    share: float
    """The cost's share of ``device``'s step time: the finding's trigger."""
    device: DeviceTotals
    ranked: Ranking
    """``(share, device)`` for every device with step time, worst first (:func:`ranking`)."""

    def finding(
        self,
        finding_id: str,
        *,
        title: str,
        metrics: Mapping[str, float],
        evidence: Iterable[Evidence],
        fix: str,
        also: str,
    ) -> Finding:
        """The finding on :attr:`device`, its severity by :attr:`share`: ``evidence``, then an
        ``Also <device>: <also> <share> of step time`` line per other device over the threshold."""
        return Finding(
            id=finding_id,
            severity=severity(self.share),
            title=title,
            share=self.share,
            metrics=metrics,
            evidence=(*evidence, *other_devices(self.ranked, also)),
            fix=fix,
            measured_on=self.device.ref,
        )


Ranking = tuple[tuple[float, DeviceTotals], ...]
"""``(cost / step time, device)`` for every device with step time, worst first, ties by ``dev``."""

CostNs = Callable[[FindingContext, DeviceTotals], int | float]
"""A rule's cost on one device, in ns."""


def ranking(ctx: FindingContext, cost_ns: CostNs) -> Ranking:
    """``(cost / step time, device)`` for every device of ``ctx`` with step time, worst first, ties by ``dev``."""
    shares = [(cost_ns(ctx, d) / d.dur_ns, d) for d in ctx.devices if d.dur_ns > 0]
    return tuple(sorted(shares, key=lambda sd: (-sd[0], sd[1].dev)))


def worst_of(ranked: Ranking) -> WorstDevice | None:
    """The device a rule fires on: the first of ``ranked`` when its share reaches :data:`FIRE_SHARE`;
    None when the rule does not fire."""
    if not ranked or ranked[0][0] < FIRE_SHARE:
        return None
    share, d = ranked[0]
    return WorstDevice(share=share, device=d, ranked=ranked)


@dataclass(frozen=True)
class RankedRule:
    r"""A rule that ranks the devices by ``cost_ns`` and, when the worst reaches :data:`FIRE_SHARE`,
    ``explain``\ s it: the finding on that device (``ctx`` is the context of the part holding it)."""

    id: str
    cost_ns: CostNs
    explain: Callable[[FindingContext, WorstDevice], Finding]


@dataclass(frozen=True)
class JobRule:
    """A rule that reads the whole job: the devices' totals and the cross-rank analysis (None with
    fewer than two devices)."""

    id: str
    find: Callable[[Sequence[DeviceTotals], JobAnalysis | None], Finding | None]


def other_devices(
    ranked: Sequence[tuple[float, DeviceTotals]], what: str, *, threshold: float = FIRE_SHARE
) -> list[Evidence]:
    """Evidence lines for the devices after the worst one that also reach the threshold."""
    out = []
    for share, d in ranked[1 : 1 + MAX_EXTRA_DEVICES]:
        if share < threshold:
            break
        out.append(
            Evidence(
                text=f"Also {d.label}: {what} {format_share(share)} of step time",
                rank=d.rank,
                device=d.device,
            )
        )
    return out


def median_int(values: pl.Series) -> int | None:
    """The median of an integer Series, rounded to an int (None when empty)."""
    if values.len() == 0:
        return None
    m: Any = values.median()
    return None if m is None else round(float(m))
