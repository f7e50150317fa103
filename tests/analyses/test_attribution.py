"""The idle attribution (traceq.analyses.attribution) equals the brute-force oracle on random timelines.

The oracle (``attribution_oracle.py``) walks every elementary segment of every idle interval and
applies the documented rules one by one, in plain Python; the engine is interval algebra over
polars and numpy.  On random timelines of kernels (launched or not, on two streams), API calls
(launches, syncs, copies, HIP's synchronising copy) on two threads, steps, data-loader, compile,
op and user ranges, the two must agree on every window's idle ns by cause, every gap's causes, its
dominant cause and kind, and the device's launch latency.  And the causes partition the idle time.
"""

from __future__ import annotations

from hypothesis import given, settings

from traceq.analyses import CAUSES, analyze

from ..builders import Row, table
from .attribution_oracle import attribute
from .test_attribution_oracle import timelines


@settings(max_examples=300, deadline=None)
@given(timelines())
def test_the_engine_attributes_every_idle_ns_as_the_oracle_does(rows: list[Row]) -> None:
    events = table(*rows)
    analysis = analyze(events)
    oracle = attribute(events)
    assert len(analysis.devices) == len(oracle)
    for d in analysis.devices:
        want = oracle[(d.source, d.pid, d.device)]
        assert d.launch_latency_ns == want.launch_latency_ns
        steps = sorted(
            (s for s in analysis.steps if (s.rank, s.device, s.pid) == (d.rank, d.device, d.pid)),
            key=lambda s: (s.start_ns, s.end_ns),
        )
        windows = sorted(want.windows, key=lambda w: (w.start_ns, w.end_ns))
        assert [(s.start_ns, s.end_ns) for s in steps] == [(w.start_ns, w.end_ns) for w in windows]
        for got, expected in zip(steps, windows, strict=True):
            assert got.idle_ns == expected.idle_ns == sum(got.idle_by_cause_ns.values())
            assert dict(got.idle_by_cause_ns) == dict(expected.causes_ns), (got.start_ns, got.end_ns)
        gaps = analysis.gap_table.sort("start_ns")
        assert gaps.select("start_ns", "end_ns", "kind").rows() == [(g.start_ns, g.end_ns, g.kind) for g in want.gaps]
        for row, g in zip(gaps.iter_rows(named=True), want.gaps, strict=True):
            assert {c: row[f"{c}_ns"] for c in CAUSES} == dict(g.causes_ns)
            best = max(g.causes_ns.values())
            assert row["cause"] == next(c for c in CAUSES if g.causes_ns[c] == best)
