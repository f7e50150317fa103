"""The timeline excerpt: a few consecutive steps of a few devices, for the HTML report, and the
one-line label of a gap (its cause and the CPU call behind it) that every renderer shows.

Which window (documented in ``docs/report.md``):

* the devices are the first ``max_devices`` of the analysis (its order: rank, source, process,
  GPU); the *reference* device is the first of them with step windows;
* the steps are ``steps`` consecutive step windows of the reference device, centred on its
  **median** step (the lower median by duration, ties to the earliest).  The median shows the
  steady state: the longest step is usually the first one (allocator warm-up, autotuning), and
  the step-breakdown chart already shows every step's length;
* without step windows the window is the reference device's whole activity window
  (``steps == ("(whole trace)",)``).

Inside the window: every GPU activity (kernel, memcpy, memset) of the chosen devices, clipped to
the window, one row per (rank, device, stream); ``kind`` is ``comm`` for communication kernels.
When more than ``max_bars`` activities fall in the window, the longest ``max_bars`` are kept
(ties: earliest start) and ``bars_total`` counts them all.  The gaps are the analysis gap table's
rows of those devices that overlap the window, clipped to it (the longest ``max_bars`` when there
are more), each labelled with its cause and the CPU call that explains it.

The launching CPU threads of those devices, with their calls, syncs, loader ranges and operators,
come from :mod:`traceq.analyses.timeline_cpu`; each gap names the thread and interval of the call
behind it (``call_*``), so the page can draw the flow from the gap to its call.

Everything is selected with polars; Python only builds the (at most ``max_bars``) output objects.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import polars as pl

from traceq import schema
from traceq.analyses.longest import at_least_nth_longest
from traceq.analyses.model import CAUSES, Analysis, DeviceBreakdown, Gap, StepBreakdown
from traceq.analyses.timeline_cpu import TimelineSpan, cpu_spans
from traceq.units import format_ns, shorten


@dataclass(frozen=True)
class TimelineBar:
    """One GPU activity drawn on the timeline excerpt (ns); ``kind`` is ``comm`` for communication
    kernels, otherwise the event kind."""

    rank: int | None
    device: int
    stream: int | None
    kind: str
    name: str
    start_ns: int
    end_ns: int


@dataclass(frozen=True)
class TimelineGap:
    """One idle gap drawn on the timeline excerpt, labelled with its cause and matched CPU call."""

    rank: int | None
    device: int
    start_ns: int
    end_ns: int
    cause: str
    label: str
    call_tid: int | None = None
    """The thread of the CPU call behind the gap (the sync for a ``sync`` gap, else the launch of
    the activity that ended it), and where that call lies (ns, not clipped): the flow the page
    draws from the gap to its call.  ``None`` where no call was matched."""
    call_start_ns: int | None = None
    call_end_ns: int | None = None


@dataclass(frozen=True)
class TimelineExcerpt:
    """A few steps of a few devices, for the HTML timeline (streams as rows).

    ``bars_total`` is how many activities the window held; where it exceeds ``len(bars)`` the
    excerpt was downsampled (the longest activities kept).  Likewise ``gaps_total`` for gaps.
    """

    start_ns: int
    end_ns: int
    steps: tuple[str, ...]
    bars: tuple[TimelineBar, ...]
    bars_total: int
    gaps: tuple[TimelineGap, ...]
    gaps_total: int
    cpu: tuple[TimelineSpan, ...] = ()
    """The launching threads' spans (:mod:`traceq.analyses.timeline_cpu`); ``cpu_total`` counts
    them before downsampling to ``max_bars``."""
    cpu_total: int = 0


DEFAULT_STEPS: Final = 3
DEFAULT_MAX_BARS: Final = 4000
DEFAULT_MAX_DEVICES: Final = 4
LABEL_NAME_CHARS: Final = 80
"""Names quoted in a gap label are cut to this many characters."""


@dataclass(frozen=True)
class TimelineWindow:
    """Which part of the trace the excerpt shows: ``[start_ns, end_ns)`` on the reference device's
    clock, the names of its steps, and the devices drawn (in the analysis' order)."""

    start_ns: int
    end_ns: int
    steps: tuple[str, ...]
    devices: tuple[DeviceBreakdown, ...]


def timeline_excerpt(
    events: pl.DataFrame,
    analysis: Analysis,
    *,
    steps: int = DEFAULT_STEPS,
    max_bars: int = DEFAULT_MAX_BARS,
    max_devices: int = DEFAULT_MAX_DEVICES,
    input_pattern: str | None = None,
) -> TimelineExcerpt | None:
    """A few steps of a few devices: activity bars per stream and the gaps with their causes.

    ``events`` is the event table the ``analysis`` was computed from (:func:`select_window`, then
    :func:`excerpt` of its rows).  Returns ``None`` when the trace has no GPU activity.  Times are
    ns on the trace's clock, clipped to the window.
    """
    window = select_window(analysis, steps=steps, max_devices=max_devices)
    if window is None:
        return None
    return excerpt(events, analysis.gap_table, window, max_bars=max_bars, input_pattern=input_pattern)


def select_window(
    analysis: Analysis, *, steps: int = DEFAULT_STEPS, max_devices: int = DEFAULT_MAX_DEVICES
) -> TimelineWindow | None:
    """The excerpt's window and devices, from the analysis alone (rules in the module docstring);
    ``None`` when the trace has no GPU activity."""
    if steps < 1 or max_devices < 1:
        raise ValueError("steps and max_devices must be at least 1")
    chosen = analysis.devices[:max_devices]
    if not chosen:
        return None
    reference = next((d for d in chosen if d.window == "steps"), chosen[0])
    picked = pick_steps(_windows_of(analysis.steps, reference), steps)
    if not picked:
        return None
    start_ns, end_ns = picked[0].start_ns, max(s.end_ns for s in picked)
    return TimelineWindow(start_ns=start_ns, end_ns=end_ns, steps=tuple(s.name for s in picked), devices=chosen)


def excerpt(
    events: pl.DataFrame,
    gap_table: pl.DataFrame,
    window: TimelineWindow,
    *,
    max_bars: int = DEFAULT_MAX_BARS,
    input_pattern: str | None = None,
) -> TimelineExcerpt:
    """The bars and gaps of ``window``, from the GPU activity of ``events`` and the rows of
    ``gap_table`` (any rows that include those of the window's devices overlapping it), and the
    launching threads' spans (``input_pattern``: the user's own data-loading ranges)."""
    if max_bars < 1:
        raise ValueError("max_bars must be at least 1")
    keys = _device_keys(window.devices)
    bars, bars_total = _bars(events, keys, window.start_ns, window.end_ns, max_bars)
    gaps, gaps_total = _gaps(gap_table, keys, window.start_ns, window.end_ns, max_bars)
    cpu, cpu_total = cpu_spans(events, keys, window.start_ns, window.end_ns, max_bars, input_pattern=input_pattern)
    return TimelineExcerpt(
        start_ns=window.start_ns,
        end_ns=window.end_ns,
        steps=window.steps,
        bars=bars,
        bars_total=bars_total,
        gaps=gaps,
        gaps_total=gaps_total,
        cpu=cpu,
        cpu_total=cpu_total,
    )


def pick_steps(windows: Sequence[StepBreakdown], steps: int) -> tuple[StepBreakdown, ...]:
    """``steps`` consecutive windows (in time order) centred on the median-duration window."""
    if not windows:
        return ()
    ordered = sorted(windows, key=lambda s: (s.start_ns, s.end_ns))
    by_duration = sorted(range(len(ordered)), key=lambda i: (ordered[i].dur_ns, ordered[i].start_ns))
    median = by_duration[(len(ordered) - 1) // 2]
    count = min(steps, len(ordered))
    first = min(max(median - (count - 1) // 2, 0), len(ordered) - count)
    return tuple(ordered[first : first + count])


def _windows_of(all_steps: Sequence[StepBreakdown], device: DeviceBreakdown) -> list[StepBreakdown]:
    return [s for s in all_steps if (s.rank, s.device, s.pid) == (device.rank, device.device, device.pid)]


def _device_keys(devices: Sequence[DeviceBreakdown]) -> pl.DataFrame:
    """The chosen devices, with their analysis rank and display order."""
    return pl.DataFrame(
        {
            "source": [d.source for d in devices],
            "pid": [d.pid for d in devices],
            "device": [d.device for d in devices],
            "_rank": [d.rank for d in devices],
            "_order": list(range(len(devices))),
        },
        schema={"source": pl.String, "pid": pl.Int64, "device": pl.Int32, "_rank": pl.Int32, "_order": pl.Int64},
    )


def _overlapping(start_ns: int, end_ns: int) -> pl.Expr:
    """Rows overlapping ``[start_ns, end_ns)``; a zero-length row counts where its point lies inside."""
    return (pl.col("start_ns") < end_ns) & ((pl.col("end_ns") > start_ns) | (pl.col("start_ns") >= start_ns))


def _clipped(start_ns: int, end_ns: int) -> list[pl.Expr]:
    return [
        pl.max_horizontal(pl.col("start_ns"), pl.lit(start_ns)).alias("start_ns"),
        pl.min_horizontal(pl.col("end_ns"), pl.lit(end_ns)).alias("end_ns"),
    ]


def _bars(
    events: pl.DataFrame, keys: pl.DataFrame, start_ns: int, end_ns: int, max_bars: int
) -> tuple[tuple[TimelineBar, ...], int]:
    rows = (
        events.lazy()
        .filter(
            pl.col("kind").is_in(schema.GPU_ACTIVITY_KINDS)
            & pl.col("device").is_not_null()
            & _overlapping(start_ns, end_ns)
        )
        .with_columns(pl.col("source").cast(pl.String))
        .join(keys.lazy(), on=["source", "pid", "device"], how="inner", nulls_equal=True)
        .select(
            "_order",
            "_rank",
            "device",
            "stream",
            pl.when(pl.col("is_comm")).then(pl.lit("comm")).otherwise(pl.col("kind").cast(pl.String)).alias("kind"),
            pl.col("name").cast(pl.String),
            *_clipped(start_ns, end_ns),
        )
        .collect()
    )
    total = rows.height
    if total > max_bars:
        longest = at_least_nth_longest(rows, max_bars, pl.col("end_ns") - pl.col("start_ns"))
        rows = longest.with_columns((pl.col("end_ns") - pl.col("start_ns")).alias("_dur")).sort(
            ["_dur", "start_ns", "_order", "stream", "name"],
            descending=[True, False, False, False, False],
            nulls_last=False,
        )
        rows = rows.head(max_bars).drop("_dur")
    rows = rows.sort(["_order", "stream", "start_ns", "end_ns", "kind", "name"], nulls_last=False)
    bars = tuple(
        TimelineBar(
            rank=r["_rank"],
            device=int(r["device"]),
            stream=r["stream"],
            kind=r["kind"],
            name=r["name"],
            start_ns=int(r["start_ns"]),
            end_ns=int(r["end_ns"]),
        )
        for r in rows.iter_rows(named=True)
    )
    return bars, total


def _gaps(
    gap_table: pl.DataFrame, keys: pl.DataFrame, start_ns: int, end_ns: int, max_gaps: int
) -> tuple[tuple[TimelineGap, ...], int]:
    """The gaps in the window (the longest ``max_gaps``) and how many there were."""
    if gap_table.is_empty():
        return (), 0
    rows = (
        gap_table.lazy()
        .filter(_overlapping(start_ns, end_ns))
        .with_columns(pl.col("source").cast(pl.String))
        .join(keys.lazy(), on=["source", "pid", "device"], how="inner", nulls_equal=True)
        .collect()
    )
    total = rows.height
    if rows.height > max_gaps:
        longest = at_least_nth_longest(rows, max_gaps, pl.col("dur_ns"))
        rows = longest.sort(["dur_ns", "start_ns", "_order"], descending=[True, False, False]).head(max_gaps)
    rows = rows.sort(["_order", "start_ns"])
    gaps = tuple(
        TimelineGap(
            rank=r["_rank"],
            device=int(r["device"]),
            start_ns=max(int(r["start_ns"]), start_ns),
            end_ns=min(int(r["end_ns"]), end_ns),
            cause=r["cause"],
            label=gap_label({**r, "causes_ns": {c: r[f"{c}_ns"] for c in CAUSES}}),
            **_call_of(r),
        )
        for r in rows.iter_rows(named=True)
    )
    return gaps, total


def _call_of(row: Mapping[str, Any]) -> dict[str, int | None]:
    """The gap's call (thread, start, end): the sync for a ``sync`` gap, else the launch."""
    use = "sync" if row["cause"] == "sync" and row.get("sync_tid") is not None else "launch"
    if row.get(f"{use}_tid") is None or row.get(f"{use}_start_ns") is None:
        return {}
    return {
        "call_tid": int(row[f"{use}_tid"]),
        "call_start_ns": int(row[f"{use}_start_ns"]),
        "call_end_ns": int(row[f"{use}_end_ns"]),
    }


def _short(name: str | None) -> str:
    return shorten(name or "?", LABEL_NAME_CHARS)


def gap_label(row: Mapping[str, Any]) -> str:
    """One line naming a gap's dominant cause, the CPU call behind it, and its other causes, from a
    gap-table row (or :func:`gap_fields` of a :class:`~traceq.analyses.model.Gap`).

    ``sync: cudaStreamSynchronize returned 12.0 µs before cudaLaunchKernel``, ``launch:
    cudaLaunchKernel called 1.50 µs into the gap``, ``input: the host was in the data loader``,
    ``dependency: cudaLaunchKernel returned 3.10 ms before the gap (queued work waited)``,
    ``unknown: no launch recorded for <next activity>``; then ``; also cpu 30%, launch 10%``.
    """
    cause = str(row["cause"])
    launch = _short(row["launch_name"])
    gap_start = int(row["start_ns"])
    if cause == "sync" and row["sync_name"] is not None:
        if row["launch_start_ns"] is not None and int(row["sync_end_ns"]) <= int(row["launch_start_ns"]):
            lead = format_ns(int(row["launch_start_ns"]) - int(row["sync_end_ns"]))
            why = f"sync: {_short(row['sync_name'])} returned {lead} before {launch}"
        else:
            why = f"sync: the host was blocked in {_short(row['sync_name'])}"
    elif cause == "launch" and row["launch_start_ns"] is not None:
        if int(row["launch_start_ns"]) >= gap_start:
            why = f"launch: {launch} called {format_ns(int(row['launch_start_ns']) - gap_start)} into the gap"
        else:
            why = f"launch: {launch} returned {format_ns(int(row['launch_end_ns']) - gap_start)} into the gap"
    elif cause == "dependency" and row["launch_end_ns"] is not None:
        before = int(row["launch_end_ns"]) - gap_start
        when = f"{format_ns(-before)} before the gap" if before < 0 else f"{format_ns(before)} into the gap"
        why = f"dependency: {launch} returned {when}; the queued work waited (another stream, an event, a peer)"
    elif cause == "input":
        why = "input: the host was in the data loader"
    elif cause == "compile":
        why = "compile: the host was compiling (torch.compile)"
    elif cause == "cpu" and row["launch_name"]:
        why = f"cpu: the host ran other CPU work before {launch}"
    elif cause == "cpu" and row["next_name"]:
        why = f"cpu: no launch recorded for {_short(row['next_name'])}; the host that last fed the GPU ran CPU work"
    elif cause == "cpu":
        why = "cpu: the host that last fed the GPU ran CPU work"
    else:
        why = f"{cause}: no launch recorded for {_short(row['next_name'])}"
    dur = int(row["dur_ns"])
    others = sorted(
        ((ns, c) for c, ns in row["causes_ns"].items() if c != cause and ns > 0), key=lambda nc: (-nc[0], nc[1])
    )
    if dur > 0 and others:
        why += "; also " + ", ".join(f"{c} {ns / dur:.0%}" for ns, c in others[:3])
    return why


def gap_fields(g: Gap) -> dict[str, Any]:
    """A :class:`~traceq.analyses.model.Gap` as the row :func:`gap_label` reads."""
    return {
        "cause": g.cause,
        "start_ns": g.start_ns,
        "dur_ns": g.dur_ns,
        "causes_ns": g.causes_ns,
        "next_name": g.next.name if g.next else None,
        "launch_name": g.launch.name if g.launch else None,
        "launch_start_ns": g.launch.start_ns if g.launch else None,
        "launch_end_ns": g.launch.end_ns if g.launch else None,
        "sync_name": g.sync.name if g.sync else None,
        "sync_end_ns": g.sync.end_ns if g.sync else None,
    }
