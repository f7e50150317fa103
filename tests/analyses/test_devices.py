"""The device table: one row per (source, pid, device) with GPU activity, counted by hand.

A table whose activity is all on one device is aggregated as it is read; one with several devices
is grouped.  Both ways give the same row for a device.
"""

from __future__ import annotations

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from traceq.analyses.steps import DEVICE_KEY, devices, gpu_rows

from ..builders import api, kernel, memcpy, memset, table

COLUMNS = ["dev", "source", "pid", "device", "rank", "first_ns", "last_ns", "kernels", "memcpys", "memsets"]


def _gpu0() -> list[dict[str, object]]:
    """GPU 0 of pid 100: two kernels, a memcpy and a memset, the rank stated only from the second row on."""
    return [
        kernel(3, 90),
        memcpy(10, 30, rank=4),
        kernel(100, 400, rank=4),
        memset(500, 520),
        api("cudaLaunchKernel", 0, 5, corr=1),  # (a CPU row: not the device's)
    ]


def test_one_device_is_counted_from_its_rows() -> None:
    got = devices(table(*_gpu0()))
    assert got.columns == COLUMNS
    # The first activity starts at 3, the last ends at 520; the rank is the first one stated.
    assert got.rows() == [(0, "test.trace", 100, 0, 4, 3, 520, 2, 1, 1)]


def test_several_devices_are_grouped_into_the_same_rows_one_device_gets_alone() -> None:
    gpu1 = [kernel(5, 60, device=1, rank=2), kernel(70, 80, device=1, rank=2), memcpy(90, 95, device=1, rank=2)]
    got = devices(table(*_gpu0(), *gpu1))
    # Sorted by rank: GPU 1 (rank 2) before GPU 0 (rank 4), dev numbered in that order.
    assert got.rows() == [
        (0, "test.trace", 100, 1, 2, 5, 95, 2, 1, 0),
        (1, "test.trace", 100, 0, 4, 3, 520, 2, 1, 1),
    ]
    alone = devices(table(*_gpu0()))
    assert got.filter(pl.col("device") == 0).drop("dev").equals(alone.drop("dev"))


def test_a_table_without_gpu_activity_has_no_devices() -> None:
    got = devices(table(api("cudaMalloc", 0, 5)))
    assert got.is_empty()
    assert got.columns == COLUMNS


def _filtered(events: pl.DataFrame, *columns: str) -> pl.DataFrame:
    """The definition of gpu_rows: the GPU activity rows with a device, the key then ``columns``."""
    keep = pl.col("kind").is_in(("kernel", "memcpy", "memset")) & pl.col("device").is_not_null()
    return events.filter(keep).select(*dict.fromkeys((*DEVICE_KEY, *columns)))


@pytest.mark.parametrize(
    "rows",
    [
        _gpu0(),  # one device (its key a literal column in the rows)
        [{**r, "pid": None} for r in _gpu0()],  # one device of a process without a pid
        [*_gpu0(), kernel(5, 60, device=1)],  # two devices
        [api("cudaMalloc", 0, 5)],  # none
    ],
    ids=["one device", "one device, null pid", "two devices", "no device"],
)
@pytest.mark.parametrize("columns", [("start_ns", "name"), ("device",), ()])
def test_gpu_rows_are_the_activity_rows_on_a_device(rows: list[dict[str, object]], columns: tuple[str, ...]) -> None:
    events = table(*rows)
    assert_frame_equal(gpu_rows(events, *columns), _filtered(events, *columns))
