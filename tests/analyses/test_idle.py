"""The calls that launched work on each device (``launches_by_device``), against lists made by hand:
a call per device it launched on, in the CPU rows' order, whichever way the table is keyed."""

from __future__ import annotations

import polars as pl

from traceq.analyses.breakdown import _activity
from traceq.analyses.host_state import cpu_rows
from traceq.analyses.idle import launches_by_device
from traceq.analyses.launch_link import launch_link
from traceq.analyses.steps import devices

from ..builders import api, kernel, launch, memcpy, step, table


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
