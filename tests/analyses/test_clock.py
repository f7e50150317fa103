"""Clock alignment: one clock, the traces' own anchors, the end of the first shared collective, or none.

Each case builds per-rank tables on clocks of their own (a rank's trace shifted by a known amount),
then checks the offsets, the method stated, the residual skew against a brute-force median of end
spreads, and that the collective numbers come out as if every rank had shared one clock.  The event
table itself is never rewritten.
"""

from __future__ import annotations

import statistics
from typing import Any

import polars as pl
import pytest

from tracegen import build_timeline, preset
from traceq.analyses import analyze
from traceq.analyses.clock import align_clocks, residual_skew_ns
from traceq.analyses.collectives import collective_calls
from traceq.analyses.job import analyze_job
from traceq.analyses.job_model import JobAnalysis
from traceq.analyses.steps import devices

from ..builders import Row, kernel, table

AR = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
AG = "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)"


def on_rank(r: int) -> dict[str, Any]:
    return {"rank": r, "device": r, "pid": 100 + 10 * r}


def comm(start: int, end: int, r: int, name: str = AR, stream: int = 20, shift: int = 0) -> Row:
    return kernel(start + shift, end + shift, name, stream=stream, comm=True, **on_rank(r))


def compute(start: int, end: int, r: int, shift: int = 0) -> Row:
    return kernel(start + shift, end + shift, "gemm", **on_rank(r))


def rank_rows(r: int, shift: int = 0) -> list[Row]:
    """Three all-reduces; rank r arrives 100·r ns after rank 0 and all end together (+ r ns)."""
    rows = []
    for n in range(3):
        t = 10_000 * n
        rows += [compute(t, t + 1_000 + 100 * r, r, shift), comm(t + 1_000 + 100 * r, t + 5_000 + r, r, shift=shift)]
    return rows


def job(events: pl.DataFrame, anchors: dict[str, int | None] | None = None) -> JobAnalysis:
    found = analyze_job(events, analyze(events), anchors=anchors)
    assert found is not None
    return found


def brute_residual(events: pl.DataFrame, offsets: dict[str, int]) -> int:
    """Median over matched collectives of their end spread, with dicts (one kind, one stream)."""
    ends: dict[int, list[int]] = {}
    seen: dict[int, int] = {}
    rows = events.with_columns(pl.col("source").cast(pl.String)).filter(pl.col("is_comm")).sort("start_ns")
    for r in rows.iter_rows(named=True):
        n = seen.get(r["rank"], 0)
        seen[r["rank"]] = n + 1
        ends.setdefault(n, []).append(r["end_ns"] + offsets[r["source"]])
    return int(statistics.median(max(e) - min(e) for e in ends.values() if len(e) >= 2))


def three_files(shifts: tuple[int, int, int]) -> pl.DataFrame:
    """Ranks 0, 1, 2 in files a, b, c, each on its own clock (rank r's clock runs ``shifts[r]`` ahead)."""
    return pl.concat([table(*rank_rows(r, shifts[r]), source=f"{'abc'[r]}.json") for r in range(3)])


def test_one_file_is_one_clock() -> None:
    events = table(*rank_rows(0), *rank_rows(1), *rank_rows(2))
    j = job(events)
    assert (j.clock.method, j.clock.reference, dict(j.clock.offsets_ns)) == (
        "single_clock",
        "test.trace",
        {"test.trace": 0},
    )
    assert j.clock.residual_skew_ns == brute_residual(events, {"test.trace": 0}) == 2
    assert [c.arrival_skew_ns for c in j.collectives] == [200, 200, 200]


def test_anchors_align_files_on_their_own_clocks() -> None:
    shifts = (0, 7_000_000, -3_000)
    events = three_files(shifts)
    anchors: dict[str, int | None] = {f"{'abc'[r]}.json": 1_700_000_000_000_000_000 - shifts[r] for r in range(3)}
    j = job(events, anchors)
    assert j.clock.method == "anchor" and j.clock.reference == "a.json"
    assert dict(j.clock.offsets_ns) == {"a.json": 0, "b.json": -7_000_000, "c.json": 3_000}
    assert j.clock.residual_skew_ns == brute_residual(events, dict(j.clock.offsets_ns)) == 2
    same_clock = job(table(*rank_rows(0), *rank_rows(1), *rank_rows(2)))
    assert [c.__dict__ for c in j.collectives] == [c.__dict__ for c in same_clock.collectives]
    assert [c.last for c in j.collectives] == [2, 2, 2]


def test_without_every_anchor_the_first_shared_collective_aligns_the_ends() -> None:
    shifts = (0, 7_000_000, -3_000)
    events = three_files(shifts)
    j = job(events, {"a.json": 5, "b.json": None})  # c.json: no entry, no anchor either
    assert j.clock.method == "collective_end"
    assert "AllReduce #0 on stream 20" in j.clock.note
    # the first all-reduce ends at 5_000 + r on rank r's true clock: offset = ref end − rank's end
    assert dict(j.clock.offsets_ns) == {"a.json": 0, "b.json": -7_000_000 - 1, "c.json": 3_000 - 2}
    assert j.clock.residual_skew_ns == brute_residual(events, dict(j.clock.offsets_ns)) == 0
    assert [c.arrival_skew_ns for c in j.collectives] == [200 - 2, 200 - 2, 200 - 2]
    assert [c.end_spread_ns for c in j.collectives] == [0, 0, 0]


def test_the_aligning_collective_is_the_first_every_rank_shares() -> None:
    """Rank 0 and 1 all-gather first (rank 2 does not); the first collective all three share is the
    all-reduce, so it aligns the clocks."""
    rows = [[comm(0, 400, r, AG, stream=21, shift=1_000 * r)] if r < 2 else [] for r in range(3)]
    events = pl.concat(
        [table(*rows[r], *rank_rows(r, 1_000 * r), source=f"{'abc'[r]}.json") for r in range(3)],
    )
    j = job(events)
    assert j.clock.method == "collective_end" and "AllReduce #0" in j.clock.note
    assert dict(j.clock.offsets_ns) == {"a.json": 0, "b.json": -1_001, "c.json": -2_002}
    kinds = sorted((c.kind, c.ranks) for c in j.collectives)
    assert kinds == [("AllGather", 2), ("AllReduce", 3), ("AllReduce", 3), ("AllReduce", 3)]


def test_ranks_in_one_file_share_its_offset() -> None:
    """An export of ranks 0 and 1 (one clock) and a file of rank 2, no anchors: the export's offset
    comes from its first rank."""
    events = pl.concat([table(*rank_rows(0), *rank_rows(1), source="node0.sqlite"), table(*rank_rows(2, 50_000))])
    j = job(events, {"node0.sqlite": None, "test.trace": None})
    assert j.clock.method == "collective_end"
    assert dict(j.clock.offsets_ns) == {"node0.sqlite": 0, "test.trace": -50_000 - 2}


def test_no_anchor_and_no_shared_collective_is_not_aligned() -> None:
    events = pl.concat(
        [
            table(comm(0, 10, 0), comm(0, 10, 1), source="a.json"),
            table(comm(0, 10, 2, AG, stream=21), compute(0, 5, 2), source="b.json"),
        ]
    )
    j = job(events, {"a.json": 1, "b.json": None})
    assert j.clock.method == "none" and j.clock.offsets_ns == {} and j.clock.residual_skew_ns is None
    assert "not aligned" in j.clock.note and "b.json" in j.clock.note
    assert j.verdict == "no_collectives" and j.note == j.clock.note


def test_the_event_table_keeps_its_own_clocks() -> None:
    events = three_files((0, 7_000_000, -3_000))
    before = events.clone()
    j = job(events, {"a.json": 0, "b.json": -7_000_000, "c.json": 3_000})
    assert events.equals(before)
    table_ = j.collective_table
    own = table_.filter(pl.col("dev") == 1).get_column("start_ns").to_list()
    assert own == [7_001_100, 7_011_100, 7_021_100]
    aligned = table_.filter(pl.col("dev") == 1).get_column("aligned_start_ns").to_list()
    assert aligned == [1_100, 11_100, 21_100]


def test_residual_skew_without_matches_or_alignment_is_none() -> None:
    events = table(comm(0, 10, 0))
    calls = collective_calls(events, devices(events))
    clock = align_clocks(calls)
    assert clock.method == "single_clock" and clock.residual_skew_ns is None
    assert residual_skew_ns(calls.head(0), clock) is None


@pytest.mark.parametrize("shift", [0, 123_456_789])
def test_a_generated_job_split_into_files_on_shifted_clocks(shift: int) -> None:
    """The straggler job's ranks, each in a file of its own whose clock runs ``shift``·rank ahead:
    with anchors the job is the single-clock job exactly; without, the ends of the first
    all-reduce align it to within the generator's end jitter, and rank 2 is still the straggler."""
    events = build_timeline(preset("straggler_job")).events("nsys")
    parts = [
        events.filter(pl.col("rank") == r).with_columns(
            pl.col("start_ns") + shift * r, pl.col("end_ns") + shift * r, pl.lit(f"rank{r}.json").alias("source")
        )
        for r in range(4)
    ]
    split = pl.concat(parts).with_columns(pl.col("source").cast(pl.Categorical))
    one = job(events)
    anchored = job(split, {f"rank{r}.json": 10**18 - shift * r for r in range(4)})
    assert anchored.clock.method == "anchor"
    assert [c.__dict__ for c in anchored.collectives] == [c.__dict__ for c in one.collectives]
    assert anchored.clock.residual_skew_ns == one.clock.residual_skew_ns
    by_ends = job(split)
    assert by_ends.clock.method == "collective_end"
    assert by_ends.clock.residual_skew_ns is not None and by_ends.clock.residual_skew_ns < 1_500
    assert (by_ends.verdict, by_ends.straggler) == ("slow_rank", 2)
    for got, want in zip(by_ends.collectives, one.collectives, strict=True):
        assert abs(got.arrival_skew_ns - want.arrival_skew_ns) < 3_000
