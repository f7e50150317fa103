"""The before/after pairs: each stated change is what its two planted truths give, part by part."""

from __future__ import annotations

import pytest

from tracegen.planned.scenarios import BY_NAME, PAIRS, PlannedPair
from tracegen.planned.scenarios.pairs import PARTS, steady_means


@pytest.mark.parametrize("pair", PAIRS, ids=[p.name for p in PAIRS])
def test_the_stated_change_is_the_difference_of_the_two_truths(pair: PlannedPair) -> None:
    before, after = steady_means(pair.before), steady_means(pair.after)
    for key in ("step", *PARTS):
        assert after[key] - before[key] == pair.delta_ns.get(key, 0), key
    assert set(pair.delta_ns) <= {"step", *PARTS}
    assert sum(pair.delta_ns.get(k, 0) for k in PARTS) == pair.delta_ns["step"]


@pytest.mark.parametrize("pair", PAIRS, ids=[p.name for p in PAIRS])
def test_both_sides_are_in_the_catalogue_and_agree_on_the_findings(pair: PlannedPair) -> None:
    assert BY_NAME[pair.before.name] is pair.before and BY_NAME[pair.after.name] is pair.after
    for fid in pair.resolved:
        assert fid in pair.before.must_fire and fid in pair.after.must_not_fire
    for fid in pair.new:
        assert fid in pair.before.must_not_fire and fid in pair.after.must_fire
    for fid in pair.changed:
        assert fid in pair.before.must_fire and fid in pair.after.must_fire
    for means in (steady_means(pair.before), steady_means(pair.after)):
        assert means["compute"] > 0 and all(means[c] >= 0 for c in PARTS)
