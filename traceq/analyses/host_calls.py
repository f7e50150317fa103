"""How often the host called into the GPU runtime inside a device's steady step windows: the calls
that launched work on it, and the synchronising calls of its process.

Seed 000's launch-bound criterion weighs the kernels launched per step, and its host-device sync row
the syncs per step; a before/after comparison (``traceq diff``) asks whether a change launched fewer
kernels or synchronised less.  Per device, over its steady windows (warm-up left out, as
:class:`~traceq.analyses.model.SteadyState`), a call counts in the window its **start** lies in
(windows are half-open, ``[start_ns, end_ns)``):

* ``launches``: every API call that launched work on the device (a kernel launch, an async or
  synchronous copy, a memset, a graph launch: :func:`traceq.analyses.idle.launches_by_device`,
  one row per call and device), on any thread;
* ``syncs``: every synchronising call (:data:`traceq.analyses.host_state.SYNC_CALL_PATTERN`) made
  by a thread of the device's process.  A sync names no device, so each device of a process that
  drives two GPUs counts its process's syncs; a synchronous ``cudaMemcpy`` both launches a copy
  and synchronises, so it counts in both.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import polars as pl

from traceq import intervals as iv
from traceq.analyses.steps import only_dev
from traceq.sorted_search import is_sorted


def count_in_windows(starts_ns: np.ndarray, windows: iv.Intervals) -> int:
    """How many of ``starts_ns`` lie inside ``windows`` (normalised: sorted and disjoint)."""
    if not len(windows) or not starts_ns.size:
        return 0
    # (in table order they come sorted: then they are searched as they are)
    ordered = starts_ns if is_sorted(starts_ns) else np.sort(starts_ns, kind="stable")
    inside = np.searchsorted(ordered, windows.end_ns, "left") - np.searchsorted(ordered, windows.start_ns, "left")
    return int(inside.sum())


def steady_call_counts(
    launches: pl.DataFrame,
    syncs: pl.DataFrame,
    device_table: pl.DataFrame,
    steady: Mapping[int, iv.Intervals],
) -> tuple[dict[int, int], dict[int, int]]:
    """Per dev, the launches and the syncs that start inside its steady windows.

    ``launches``: dev, start_ns (one row per call and device); ``syncs``: source, pid, start_ns (the
    synchronising calls, :func:`traceq.analyses.host_state.sync_calls`); ``device_table``: dev,
    source, pid; ``steady``: each dev's merged steady windows.  Devices without steady windows get 0.
    """
    one = only_dev(launches)
    if one is not None:  # one device: no copy
        launch_starts = {one: launches.get_column("start_ns").to_numpy()}
    else:
        launch_starts = {
            int(dev): part.get_column("start_ns").to_numpy()
            for (dev,), part in launches.select("dev", "start_ns").partition_by("dev", as_dict=True).items()
        }
    sync_starts = {
        (str(source), pid): part.get_column("start_ns").to_numpy()
        for (source, pid), part in syncs.select(pl.col("source").cast(pl.String), "pid", "start_ns")
        .partition_by("source", "pid", as_dict=True)
        .items()
    }
    none = np.empty(0, np.int64)
    launched: dict[int, int] = {}
    synced: dict[int, int] = {}
    for dev, source, pid in device_table.select("dev", pl.col("source").cast(pl.String), "pid").iter_rows():
        windows = steady.get(int(dev), iv.Intervals.empty())
        launched[int(dev)] = count_in_windows(launch_starts.get(int(dev), none), windows)
        synced[int(dev)] = count_in_windows(sync_starts.get((str(source), pid), none), windows)
    return launched, synced
