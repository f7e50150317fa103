"""Warm-up steps: the leading steps that compile or that are outliers, left out of the steady state.

The seeds measure steady-state steps only (``000_*.txt`` §3, "Measure steady-state steps only (not
the first steps, which include compilation and warm-up)"; ``004_*.txt`` exercise 8, "The
torch.compile warmup trap").  A device's first step windows, in time order, are **warm-up** while
each one either holds a compile range of its process (:mod:`traceq.analyses.host_state`) or lasts
more than :data:`OUTLIER_FACTOR` times the median of the steps after it (at least two of them: one
step is no steady state to stand out from); the run stops at the first step that is neither, and
never takes more than half of the steps, so at least half stay steady.
A device without step windows has no warm-up.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import numpy as np
import polars as pl

from traceq import intervals as iv
from traceq.sorted_search import distinct

OUTLIER_FACTOR: Final = 1.5
"""A leading step longer than this times the median of the later steps is warm-up."""


def with_warmup(windows: pl.DataFrame, compile_by_dev: Mapping[int, iv.Intervals]) -> pl.DataFrame:
    """``windows`` (:func:`traceq.analyses.steps.step_windows`, sorted by dev and start) plus a
    Boolean ``warmup`` column."""
    flags = np.zeros(windows.height, bool)
    devs = windows.get_column("dev").to_numpy()
    kinds = windows.get_column("window").to_numpy()
    starts = windows.get_column("start_ns").to_numpy()
    ends = windows.get_column("end_ns").to_numpy()
    for dev in distinct(devs):
        at = np.flatnonzero((devs == dev) & (kinds == "steps"))
        if at.size < 2:
            continue
        durations = ends[at] - starts[at]
        compiled = iv.overlap_with_windows(
            iv.Intervals(starts[at], ends[at]), compile_by_dev.get(int(dev), iv.Intervals.empty())
        )
        k = 0
        while k < at.size // 2:
            later = durations[k + 1 :]
            # an outlier needs a steady state to stand out from: at least two later steps
            outlier = later.size >= 2 and durations[k] > OUTLIER_FACTOR * float(np.median(later))
            if compiled[k] > 0 or outlier:
                k += 1
            else:
                break
        flags[at[:k]] = True
    return windows.with_columns(pl.Series("warmup", flags, dtype=pl.Boolean))
