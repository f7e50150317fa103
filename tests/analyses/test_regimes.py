"""The regimes' launch interval, t_cpu: the median gap between consecutive launch starts on the
thread that launches most inside the steady windows (seed 000's launch-bound criterion)."""

from __future__ import annotations

import statistics

import polars as pl
from hypothesis import given
from hypothesis import strategies as st

from traceq import intervals as iv
from traceq.analyses.regimes import _launch_interval_ns, _median_ns

WINDOW = iv.Intervals.from_arrays([100], [1_000])


def launches(*rows: tuple[int, int]) -> pl.DataFrame:
    """Launch calls as (tid, start_ns), each 1 ns long (a launching call always has a thread:
    :func:`~traceq.analyses.host_state.cpu_rows` keeps only rows with one)."""
    return pl.DataFrame(
        {"tid": [t for t, _ in rows], "start_ns": [s for _, s in rows], "end_ns": [s + 1 for _, s in rows]},
        schema={"tid": pl.Int64, "start_ns": pl.Int64, "end_ns": pl.Int64},
    )


def test_one_thread_gives_the_median_gap_between_its_launches_inside_the_windows() -> None:
    # gaps 10, 20, 30 inside; the launches at 50 and 2000 are outside the window
    calls = launches((7, 50), (7, 100), (7, 110), (7, 130), (7, 160), (7, 2_000))
    assert _launch_interval_ns(calls, WINDOW) == 20


def test_the_thread_with_most_launches_inside_the_windows_is_the_one_measured() -> None:
    # thread 1: four launches inside, 100 ns apart; thread 2: three inside, 10 ns apart, and ten
    # more outside the window (the most in all).  Both threads' gaps together would have a median
    # of 40, thread 2's alone 10.
    outside = [(2, 2_000 + 10 * i) for i in range(10)]
    calls = launches((1, 200), (2, 210), (2, 220), (2, 230), (1, 300), (1, 400), (1, 500), *outside)
    assert _launch_interval_ns(calls, WINDOW) == 100


def test_fewer_than_two_launches_inside_give_no_interval() -> None:
    assert _launch_interval_ns(launches((7, 200), (7, 5_000)), WINDOW) is None
    assert _launch_interval_ns(launches((7, 200)), WINDOW) is None


@given(st.lists(st.integers(0, (1 << 52) - 1), max_size=40))
def test_a_median_is_the_middle_length_or_the_mean_of_the_middle_two_rounded(lengths: list[int]) -> None:
    # below 2**52 statistics.median's midpoint of two ints, (a + b) / 2, is exact, and so must
    # traceq's be: the two agree to the ns, ties rounded half to even
    want = round(statistics.median(lengths)) if lengths else None
    assert _median_ns(pl.Series(lengths, dtype=pl.Int64)) == want
