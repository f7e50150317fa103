"""The step change decomposed: the parts add up to the change exactly, on any pair of sides."""

from __future__ import annotations

import math
import statistics
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from traceq.analyses.model import CAUSES
from traceq.diff.decompose import decompose, exact_change, per_step, side_mean, step_stats, within_noise
from traceq.diff.model import PART_KEYS, StepParts

NS = st.integers(min_value=0, max_value=10**13)


@st.composite
def devices(draw: st.DrawFn, *, exact: bool = True) -> StepParts:
    """One device's steady totals whose parts add up to its step time (or, with ``exact=False``, may not)."""
    windows = draw(st.integers(min_value=1, max_value=500))
    compute, exposed = draw(NS), draw(NS)
    idle = {c: draw(NS) for c in CAUSES}
    dur = compute + exposed + sum(idle.values())
    if not exact:
        dur += draw(st.integers(min_value=-(10**6), max_value=10**6))
    return StepParts(windows, dur, compute, exposed, idle)


SIDES = st.lists(devices(), min_size=1, max_size=8)


@settings(max_examples=300, deadline=None)
@given(before=SIDES, after=SIDES)
def test_the_parts_of_the_change_sum_to_the_change_exactly(before: list[StepParts], after: list[StepParts]) -> None:
    b, a, change = exact_change(before, after)
    assert sum((change[k] for k in PART_KEYS), Fraction(0)) == change["step"]
    assert change["unaccounted"] == 0
    for side, parts in ((b, before), (a, after)):
        assert side["step"] == sum((Fraction(p.dur_ns, p.windows) for p in parts), Fraction(0)) / len(parts)
    decomposition = decompose(before, after)
    assert [t.key for t in decomposition.terms] == list(PART_KEYS[:-1])  # no unaccounted part where none is
    assert decomposition.delta_ns == float(change["step"])
    assert math.isclose(
        sum(t.delta_ns for t in decomposition.terms), decomposition.delta_ns, rel_tol=1e-9, abs_tol=1e-3
    )


@settings(max_examples=200, deadline=None)
@given(before=st.lists(devices(exact=False), min_size=1, max_size=4), after=SIDES)
def test_numbers_that_do_not_add_up_leave_an_unaccounted_part_and_the_sum_still_holds(
    before: list[StepParts], after: list[StepParts]
) -> None:
    b, _, change = exact_change(before, after)
    assert sum((change[k] for k in PART_KEYS), Fraction(0)) == change["step"]
    residual = sum(
        (
            Fraction(p.dur_ns - p.compute_ns - p.exposed_comm_ns - sum(p.idle_by_cause_ns.values()), p.windows)
            for p in before
        ),
        Fraction(0),
    )
    assert b["unaccounted"] == residual / len(before)
    keys = [t.key for t in decompose(before, after).terms]
    assert ("unaccounted" in keys) == (b["unaccounted"] != 0)


def test_a_side_is_the_mean_of_its_devices_each_over_its_own_windows() -> None:
    one = StepParts(2, 300, 100, 0, {**dict.fromkeys(CAUSES, 0), "input": 200})
    other = StepParts(3, 300, 300, 0, dict.fromkeys(CAUSES, 0))
    mean = side_mean([one, other])
    assert mean["step"] == Fraction(150 + 100, 2)
    assert mean["input"] == Fraction(100, 2) and mean["compute"] == Fraction(50 + 100, 2)
    assert per_step(one)["step"] == 150
    with pytest.raises(ValueError, match="no device with steady step windows"):
        side_mean([StepParts(0, 0, 0, 0, {})])


def test_the_spread_of_the_steps_and_the_median_s_standard_error() -> None:
    steps = [100, 102, 98, 101, 99, 130, 100, 97]
    stats = step_stats(steps, Fraction(sum(steps), len(steps)))
    assert stats.count == 8 and stats.median_ns == statistics.median(steps)
    q = statistics.quantiles(steps, n=4, method="inclusive")
    assert (stats.p25_ns, stats.p75_ns) == (q[0], q[2])
    assert stats.median_se_ns == pytest.approx(1.2533141 * (q[2] - q[0]) / 1.349 / math.sqrt(8))
    assert step_stats([5], 5).median_se_ns is None
    assert step_stats([], 0).median_ns is None


def test_a_difference_within_twice_the_noise_is_called_noise() -> None:
    base = step_stats([100, 110, 90, 105, 95, 100], 100)
    close = step_stats([101, 111, 91, 106, 96, 101], 101)
    far = step_stats([200, 210, 190, 205, 195, 200], 200)
    assert within_noise(base, close) is True
    assert within_noise(base, far) is False
    assert within_noise(step_stats([1], 1), far) is None
