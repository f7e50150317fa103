"""The calls that launched work on each device (``launches_by_device``), against lists made by hand:
a call per device it launched on, in the CPU rows' order, whichever way the table is keyed; and
each interval's neighbours (``with_neighbours``), against their definition read row by row."""

from __future__ import annotations

from typing import Any

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from traceq.analyses import analyze
from traceq.analyses.breakdown import _activity
from traceq.analyses.host_state import cpu_rows
from traceq.analyses.idle import launches_by_device, with_neighbours
from traceq.analyses.launch_link import launch_link
from traceq.analyses.steps import devices

from ..builders import PID, TID, api, kernel, launch, memcpy, step, table


def _launches(events: pl.DataFrame) -> list[tuple[int, str, int, int | None]]:
    """(dev, name, start_ns, correlation) of every launching call, in the order returned."""
    found = launches_by_device(cpu_rows(events), _activity(events, devices(events)), launch_link(events))
    assert found.columns == ["dev", "source", "pid", "tid", "name", "start_ns", "end_ns", "correlation"]
    return [(d, str(n), s, c) for d, n, s, c in found.select("dev", "name", "start_ns", "correlation").iter_rows()]


def test_on_one_device_every_call_with_work_is_a_launch_and_no_other_call_is() -> None:
    events = table(
        step(0, 100, 1),
        launch(1, 2, 1),
        kernel(5, 10, corr=1),
        launch(3, 4, 2),  # its kernel was not recorded
        api("cudaMemcpyAsync", 6, 7, corr=3),
        memcpy(11, 12, corr=3),
        api("cudaStreamSynchronize", 8, 13),
        launch(14, 15, 4),
        kernel(20, 21, corr=4),
        kernel(22, 23, corr=4),  # two kernels of one call (a graph): one launch
        kernel(24, 25),  # no correlation id: launched by no call (and no call without one is a launch)
    )
    assert _launches(events) == [
        (0, "cudaLaunchKernel", 1, 1),
        (0, "cudaMemcpyAsync", 6, 3),
        (0, "cudaLaunchKernel", 14, 4),
    ]


def test_a_call_whose_work_runs_on_two_devices_launches_on_each() -> None:
    """A key with activity on two devices (a multi-device launch): one row per call and device,
    in call order, then dev order."""
    events = table(
        launch(1, 2, 1),
        kernel(5, 10, corr=1, device=0),
        launch(3, 4, 2),
        kernel(6, 9, corr=2, device=1),
        kernel(7, 11, corr=2, device=0),
        launch(12, 13, 3),
        kernel(14, 15, corr=3, device=1),
    )
    assert _launches(events) == [
        (0, "cudaLaunchKernel", 1, 1),
        (0, "cudaLaunchKernel", 3, 2),
        (1, "cudaLaunchKernel", 3, 2),
        (1, "cudaLaunchKernel", 12, 3),
    ]


def test_each_device_keeps_its_own_launches_when_keys_stay_on_one_device() -> None:
    events = table(
        launch(1, 2, 1),
        kernel(5, 10, corr=1, device=1),
        launch(3, 4, 2),
        kernel(6, 9, corr=2, device=0),
        api("cudaEventRecord", 7, 8),
    )
    assert _launches(events) == [(1, "cudaLaunchKernel", 1, 1), (0, "cudaLaunchKernel", 3, 2)]


def _neighbours_by_definition(intervals: pl.DataFrame, activity: pl.DataFrame) -> list[dict[str, Any]]:
    """Per interval, read from every activity row: the one on its device starting where it ends
    (next) and the one ending where it begins (prev), of several the first by correlation, nulls
    last, then in table order; source and pid from the next, else the device's first activity."""
    rows = activity.with_row_index("_row").to_dicts()

    def first(found: list[dict[str, Any]]) -> dict[str, Any] | None:
        return min(found, key=lambda a: (a["correlation"] is None, a["correlation"] or 0, a["_row"]), default=None)

    out = []
    for gap in intervals.iter_rows(named=True):
        on = [a for a in rows if a["dev"] == gap["dev"]]
        nxt = first([a for a in on if a["start_ns"] == gap["end_ns"]])
        prev = first([a for a in on if a["end_ns"] == gap["start_ns"]])
        owner = nxt or (on[0] if on else None)
        out.append(
            {
                **gap,
                "source": None if owner is None else str(owner["source"]),
                "pid": None if owner is None else owner["pid"],
                **{f"next_{c}": None if nxt is None else nxt[c] for c in ("name", "kind", "stream", "correlation")},
                **{f"next_{c}": None if nxt is None else nxt[c] for c in ("start_ns", "end_ns", "call")},
                "prev_correlation": None if prev is None else prev["correlation"],
                "prev_call": None if prev is None else prev["call"],
                "kind": "trailing" if nxt is None else "leading" if prev is None else "between",
            }
        )
    return out


_SPANS = st.lists(
    st.tuples(st.integers(0, 2), st.integers(0, 12), st.integers(0, 3), st.none() | st.integers(1, 3)),
    min_size=1,
    max_size=14,
)


@settings(deadline=None, max_examples=200)
@given(kernels=_SPANS, data=st.data())
def test_each_intervals_neighbours_are_the_activity_starting_at_its_end_and_ending_at_its_start(
    kernels: list[tuple[int, int, int, int | None]], data: st.DataObject
) -> None:
    """Activity on up to three devices, several at one time, some without a correlation id (the
    next and the previous one are then chosen by correlation, then table order); intervals mostly
    bounded by the activity's own times, on its devices and beyond."""
    events = table(*(kernel(t, t + d, corr=c, device=g) for g, t, d, c in kernels))
    activity = _activity(events, devices(events))
    times = sorted({*activity.get_column("start_ns"), *activity.get_column("end_ns")})
    n_devs = activity.get_column("dev").max()
    assert isinstance(n_devs, int)
    time = st.sampled_from(times) | st.integers(0, 16)
    gaps = data.draw(st.lists(st.tuples(st.integers(0, n_devs + 1), time, time), max_size=10))
    intervals = pl.DataFrame(
        [(dev, start, end, end - start) for dev, a, b in gaps for start, end in [sorted((a, b))]],
        schema={"dev": pl.UInt32, "start_ns": pl.Int64, "end_ns": pl.Int64, "dur_ns": pl.Int64},
        orient="row",
    ).sort("dev", "start_ns")
    got = with_neighbours(intervals, activity)
    want = pl.DataFrame(_neighbours_by_definition(intervals, activity), schema=got.schema, orient="row")
    assert got.columns[-1] == "kind"
    assert_frame_equal(got, want)


def test_the_host_issues_a_kernel_from_the_start_of_the_range_around_its_launch_not_of_a_child_done_before() -> None:
    """NVTX-style ranges (no External id): a launch at 300 inside ``forward`` [100, 400), whose child
    ``layer1`` [120, 200) ended before it.  E is ``forward``, the latest-starting range that contains
    the launch (``layer1`` started later but does not): the host was issuing kernel 2 from 100, so
    the gap [100, 320) is all launch.  Planned, with a launch latency of 5 ns (both kernels start
    5 ns after their launch returns): launch 10 (the leading [0, 10), issuing kernel 1, which no
    range encloses) + 220; cpu 500 (after the last kernel, in the step)."""
    rows = [
        step(0, 1000),
        launch(0, 5, 1),
        kernel(10, 100, corr=1),
        step(100, 400, name="forward"),
        step(120, 200, name="layer1"),
        launch(300, 315, 2),
        kernel(320, 500, corr=2),
    ]
    (measured,) = analyze(table(*rows)).steps
    assert measured.idle_ns == 10 + 220 + 500
    assert {c: ns for c, ns in measured.idle_by_cause_ns.items() if ns} == {"launch": 230, "cpu": 500}


def test_the_op_kineto_links_to_a_launch_by_its_external_id_is_where_the_host_issues_the_kernel() -> None:
    """Kineto names the op that launched a kernel (``External id``): ``aten::linear`` [100, 400),
    id 7, though ``aten::addmm`` [200, 390) starts later and contains the launch too.  The host
    issued kernel 2 from 100 (launch 220 ns of the gap [100, 320), none of it cpu); an op whose id
    no launch carries changes nothing."""

    def op(start_ns: int, end_ns: int, name: str, external_id: int) -> dict[str, Any]:
        return {
            "kind": "cpu_op",
            "start_ns": start_ns,
            "end_ns": end_ns,
            "name": name,
            "pid": PID,
            "tid": TID,
            "external_id": external_id,
        }

    rows = [
        step(0, 1000),
        launch(0, 5, 1),
        kernel(10, 100, corr=1),
        op(50, 60, "aten::zeros", 6),
        op(100, 400, "aten::linear", 7),
        op(200, 390, "aten::addmm", 8),
        {**launch(300, 315, 2), "external_id": 7},
        kernel(320, 500, corr=2),
    ]
    (measured,) = analyze(table(*rows)).steps
    assert {c: ns for c, ns in measured.idle_by_cause_ns.items() if ns} == {"launch": 10 + 220, "cpu": 500}
