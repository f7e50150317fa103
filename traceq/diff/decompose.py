"""The step-time change decomposed, exactly: Δ step = Δ compute + Δ exposed comm + Σ_cause Δ idle.

Each side gives, per device, the report's own steady totals (:class:`~traceq.diff.model.StepParts`:
ns over the steady windows, warm-up left out) and their count.  Per device, every part per step is
``total / windows``, a rational number; a side's step and parts are the **mean over its devices**
of those (the per-rank mean); the change is after − before.  Every step of the arithmetic is done
on :class:`fractions.Fraction`, so, because each device's totals satisfy ``dur = compute +
exposed_comm + Σ idle_by_cause`` exactly (``docs/analyses.md``), the parts' changes add up to the
step's change exactly, in ns; the model's floats are those rationals rounded once, at the end.  A
side whose totals do not add up (a hand-edited saved report) gets an ``unaccounted`` part, so the
identity still holds.

The step windows' spread (:func:`step_stats`) is the median, quartiles, 10th and 90th percentiles of
the steady windows' durations, and the median's standard error ``1.2533 × σ / √n`` with σ estimated
from the interquartile range (``IQR / 1.349``, a normal's): ``docs/diff.md``, "Noise".
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Final

import numpy as np

from traceq.analyses.model import CAUSES, DeviceBreakdown, StepBreakdown
from traceq.diff.model import PART_KEYS, Decomposition, StepParts, StepStats, Term
from traceq.report.model import Report

MEDIAN_SE_FACTOR: Final = math.sqrt(math.pi / 2)
"""The median's standard error over the mean's, for normal noise: √(π/2) ≈ 1.2533."""
IQR_PER_SIGMA: Final = 1.349
"""A normal distribution's interquartile range in standard deviations."""

Exact = dict[str, Fraction]
"""``step`` and the parts of :data:`PART_KEYS`, per step, exactly."""


def device_parts(device: DeviceBreakdown) -> StepParts:
    """A device's steady totals (the report's ``steady``)."""
    s = device.steady
    return StepParts(s.windows, s.dur_ns, s.compute_ns, s.exposed_comm_ns, dict(s.idle_by_cause_ns))


def per_step(parts: StepParts) -> Exact:
    """One device's step and parts per steady step, exactly (``unaccounted``: what the parts leave)."""
    n = parts.windows
    out: Exact = {"step": Fraction(parts.dur_ns, n), "compute": Fraction(parts.compute_ns, n)}
    out["exposed_comm"] = Fraction(parts.exposed_comm_ns, n)
    for cause in CAUSES:
        out[cause] = Fraction(int(parts.idle_by_cause_ns.get(cause, 0)), n)
    residual = parts.dur_ns - parts.compute_ns - parts.exposed_comm_ns
    residual -= sum(int(parts.idle_by_cause_ns.get(c, 0)) for c in CAUSES)
    out["unaccounted"] = Fraction(residual, n)
    return out


def side_mean(devices: Sequence[StepParts]) -> Exact:
    """The mean over devices of each one's :func:`per_step` (devices without steady windows left out)."""
    kept = [per_step(p) for p in devices if p.windows > 0]
    if not kept:
        raise ValueError("no device with steady step windows")
    return {key: sum((d[key] for d in kept), Fraction(0)) / len(kept) for key in ("step", *PART_KEYS)}


def exact_change(before: Sequence[StepParts], after: Sequence[StepParts]) -> tuple[Exact, Exact, Exact]:
    """Each side's :func:`side_mean` and the change, after − before (exact; the parts of the change
    sum to its ``step``)."""
    b, a = side_mean(before), side_mean(after)
    return b, a, {key: a[key] - b[key] for key in b}


def decompose(before: Sequence[StepParts], after: Sequence[StepParts]) -> Decomposition:
    """The change of the mean steady step, part by part (the parts of :data:`PART_KEYS`, the
    ``unaccounted`` one only where a side has any)."""
    b, a, d = exact_change(before, after)
    keys = [k for k in PART_KEYS if k != "unaccounted" or b[k] or a[k]]
    return Decomposition(
        step_before_ns=float(b["step"]),
        step_after_ns=float(a["step"]),
        delta_ns=float(d["step"]),
        delta_share=float(d["step"] / b["step"]) if b["step"] else None,
        terms=tuple(Term(k, float(b[k]), float(a[k]), float(d[k])) for k in keys),
    )


def steady_steps(report: Report, device: DeviceBreakdown) -> list[StepBreakdown]:
    """The device's steady step windows, in time order: those not flagged warm-up, or every window
    where its steady state counts them all (a report made with ``--all-steps``)."""
    mine = [s for s in report.steps if (s.rank, s.device, s.pid) == (device.rank, device.device, device.pid)]
    steady = [s for s in mine if not s.warmup]
    return mine if len(steady) != device.steady.windows and len(mine) == device.steady.windows else steady


def steady_durations(report: Report, devices: Sequence[DeviceBreakdown]) -> list[int]:
    """The durations of the ``devices``' steady step windows (ns), device after device."""
    return [s.dur_ns for d in devices for s in steady_steps(report, d)]


def step_stats(durations_ns: Sequence[int], mean_ns: Fraction | float) -> StepStats:
    """The spread of steady step durations (percentiles interpolate linearly, numpy's default)."""
    n = len(durations_ns)
    if n == 0:
        return StepStats(0, float(mean_ns), None, None, None, None, None, None)
    values = np.asarray(durations_ns, dtype=np.float64)
    p10, p25, median, p75, p90 = (float(v) for v in np.percentile(values, [10, 25, 50, 75, 90]))
    se = MEDIAN_SE_FACTOR * ((p75 - p25) / IQR_PER_SIGMA) / math.sqrt(n) if n >= 2 else None
    return StepStats(n, float(mean_ns), median, p10, p25, p75, p90, se)


def noise_ns(before: StepStats, after: StepStats) -> float | None:
    """The standard error of the difference of the two medians (None where a side has under 2 steps)."""
    if before.median_se_ns is None or after.median_se_ns is None:
        return None
    return math.hypot(before.median_se_ns, after.median_se_ns)


def within_noise(before: StepStats, after: StepStats, sigmas: float = 2.0) -> bool | None:
    """Whether the medians differ by less than ``sigmas`` standard errors of their difference."""
    noise = noise_ns(before, after)
    if noise is None or before.median_ns is None or after.median_ns is None:
        return None
    return abs(after.median_ns - before.median_ns) < sigmas * noise


def parts_of(report: Report) -> Mapping[tuple[int | None, int, int | None], StepParts]:
    """Every device's :func:`device_parts`, by (rank, GPU, pid)."""
    return {(d.rank, d.device, d.pid): device_parts(d) for d in report.devices}
