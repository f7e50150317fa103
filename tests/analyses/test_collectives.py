"""Collectives across ranks: matching, arrival skew, waits, the per-rank summary and the verdict.

Every number of :class:`~traceq.analyses.model.JobAnalysis` is checked against :func:`reference`,
a brute-force computation in plain Python over the event rows: it matches collectives with dicts,
walks every nanosecond to measure compute and exposed waits, and shares no code with
:mod:`traceq.analyses.collectives`.  Then the generator's three 4-rank jobs, in every format it
writes, and the real multi-rank traces.
"""

from __future__ import annotations

import math
import random
import statistics
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import traceq
from tracegen import build_timeline, preset, write_kineto_ranks, write_nsys_per_rank, write_nsys_sqlite
from traceq.analyses import analyze
from traceq.analyses.collectives import collective_calls, kind_expr
from traceq.analyses.findings import find_findings
from traceq.analyses.findings_base import FIRE_SHARE
from traceq.analyses.job import CHANCE_LEVEL, LINK_WAIT_SHARE, MATERIAL_SHARE, analyze_job, summarise_job
from traceq.analyses.job_model import ClockAlignment, JobAnalysis
from traceq.analyses.steps import devices

from ..builders import Row, kernel, step, table
from ..spans import length_in, merge, subtract

ALL_REDUCE = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
ALL_GATHER = "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)"


def kind_of(name: str) -> str:
    return next(k for k in ("AllReduce", "AllGather", "SendRecv") if k in name)


def on_rank(r: int) -> dict[str, Any]:
    """Rank ``r``: its own process (pid 100 + 10 r, thread + 1) and GPU r."""
    return {"rank": r, "device": r, "pid": 100 + 10 * r}


def comm(start: int, end: int, r: int, name: str = ALL_REDUCE, stream: int = 20) -> Row:
    return kernel(start, end, name, stream=stream, comm=True, **on_rank(r))


def compute(start: int, end: int, r: int) -> Row:
    return kernel(start, end, "gemm", **on_rank(r))


def step_of(start: int, end: int, r: int, n: int) -> Row:
    return step(start, end, n, pid=100 + 10 * r, tid=101 + 10 * r, rank=r)


# --- the brute-force reference ----------------------------------------------------------------


@dataclass
class Ref:
    """What :func:`reference` finds: collectives (by (kind, stream, n)) and per-rank numbers."""

    collectives: list[dict[str, Any]]
    ranks: list[dict[str, Any]]
    verdict: str
    straggler: int | None
    wait_share: float
    exposed_comm_share: float
    comm_calls: int


def reference(events: pl.DataFrame, offsets: dict[str, int] | None = None, kind: Callable[[str], str] = kind_of) -> Ref:
    """Everything ``analyze_job`` computes, by brute force (ranks are numbered 0..R−1, one per GPU)."""
    rows = events.with_columns(pl.col("name", "source").cast(pl.String)).to_dicts()
    shift = offsets or {}
    ranks = sorted({r["rank"] for r in rows if r["device"] is not None})
    calls: dict[tuple[int, str, int], list[tuple[int, int, int]]] = defaultdict(list)
    compute_spans: dict[int, list[tuple[int, int]]] = defaultdict(list)
    windows: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for r in rows:
        if r["kind"] == "kernel" and r["is_comm"]:
            calls[(r["rank"], kind(r["name"]), r["stream"])].append(
                (r["start_ns"], r["end_ns"], shift.get(r["source"], 0))
            )
        elif r["kind"] in ("kernel", "memcpy", "memset") and r["device"] is not None:
            compute_spans[r["rank"]].append((r["start_ns"], r["end_ns"]))
        elif r["kind"] == "range" and r["tid"] is not None and r["name"].startswith("ProfilerStep#"):
            windows[r["rank"]].append((r["start_ns"], r["end_ns"]))
    matched: dict[tuple[str, int, int], dict[int, tuple[int, int, int]]] = defaultdict(dict)
    for (rank, kind, stream), spans in calls.items():
        for n, (s, e, off) in enumerate(sorted(spans)):
            matched[(kind, stream, n)][rank] = (s, e, off)
    busy = {r: merge(compute_spans[r]) for r in ranks}
    collectives = []
    for (kind, stream, n), by_rank in matched.items():
        if len(by_rank) < 2:
            continue
        starts = {r: s + off for r, (s, _, off) in by_rank.items()}
        last_start = max(starts.values())
        skew = last_start - min(starts.values())
        last = min(r for r, s in starts.items() if s == last_start) if skew else None
        waits = {r: last_start - s for r, s in starts.items()}
        exposed = {r: waits[r] - length_in(busy[r], [(s, s + waits[r])]) for r, (s, _, _) in by_rank.items()}
        top = last if last is not None else min(by_rank)
        collectives.append(
            {
                "kind": kind,
                "channel": f"stream {stream}",
                "seq": n,
                "first": min(starts.values()),
                "skew": skew,
                "last": last,
                "waits": waits,
                "exposed": exposed,
                "ranks": len(by_rank),
                "transfer": by_rank[top][1] - by_rank[top][0],
                "end_spread": max(e + off for _, e, off in by_rank.values())
                - min(e + off for _, e, off in by_rank.values()),
                "kernel_ns": sum(e - s for s, e, _ in by_rank.values()),
            }
        )
    collectives.sort(key=lambda c: (c["first"], c["kind"], c["channel"], c["seq"]))
    out = []
    windows = {r: sorted(set(w)) for r, w in windows.items()}  # a window recorded twice counts once
    for r in ranks:
        win = windows.get(r, [])
        steps = max(len(win), 1)
        dur = sum(e - s for s, e in win)
        mine = [c for c in collectives if r in c["waits"]]
        decided = [c for c in mine if c["skew"] > 0]
        k = sum(1 for c in mine if c["last"] == r)
        expected = sum(1 / c["ranks"] for c in decided)
        n = len(decided)
        bound = 1.0
        if n and k / n > expected / n:
            a, p = k / n, expected / n
            d = (a * math.log(a / p) if a > 0 else 0.0) + ((1 - a) * math.log((1 - a) / (1 - p)) if a < 1 else 0.0)
            bound = math.exp(-n * d)
        out.append(
            {
                "steps": len(win),
                "dur": dur,
                "compute_per_step": length_in(busy[r], win) / steps,
                "collectives": len(mine),
                "last": k,
                "decided": n,
                "expected": expected,
                "bound": bound,
                "wait": sum(c["waits"][r] for c in mine),
                "exposed_wait": sum(c["exposed"][r] for c in mine),
                "caused": sum(w for c in collectives if c["last"] == r for w in c["waits"].values()),
                "caused_exposed": sum(w for c in collectives if c["last"] == r for w in c["exposed"].values()),
            }
        )
    talking = [r for r in ranks if out[r]["collectives"]]
    compared = sum(1 for r in ranks if out[r]["decided"])
    for r in ranks:
        o = out[r]
        others = [q for q in talking if q != r]
        shares = []
        for q in others:
            lost = sum(c["exposed"][q] for c in collectives if c["last"] == r and q in c["exposed"])
            if out[q]["dur"]:
                shares.append(lost / out[q]["dur"])
        o["caused_share"] = statistics.median(shares) if shares and r in talking else 0.0
        rest = [out[q]["compute_per_step"] for q in ranks if q != r]
        o["straggler"] = (
            r in talking
            and o["bound"] <= CHANCE_LEVEL / max(compared, 1)
            and bool(rest)
            and o["compute_per_step"] > statistics.median(rest)
        )
    exposed_shares = []
    for r in ranks:
        win = windows.get(r, [])
        if not win:
            continue
        comm_spans = [(s, e) for (rk, _, _), spans in calls.items() if rk == r for s, e, _ in spans]
        exposed_shares.append(length_in(subtract(comm_spans, busy[r]), win) / sum(e - s for s, e in win))
    kernel_ns = sum(c["kernel_ns"] for c in collectives)
    wait_share = sum(sum(c["waits"].values()) for c in collectives) / kernel_ns if kernel_ns else 0.0
    slow = [(out[r]["caused_share"], -r) for r in ranks if out[r]["straggler"] and out[r]["caused_share"] >= 0.05]
    straggler = -max(slow)[1] if slow else None
    link = bool(collectives) and statistics.median(exposed_shares or [0.0]) >= 0.05 and wait_share < 0.5
    if not collectives:
        verdict = "no_collectives"
    elif straggler is not None:
        verdict = "slow_rank_and_link" if link else "slow_rank"
    elif link:
        verdict = "slow_link"
    elif max(o["caused_share"] for o in out) >= 0.05:
        verdict = "skewed"
    else:
        verdict = "balanced"
    comm_calls = sum(len(spans) for spans in calls.values())
    return Ref(collectives, out, verdict, straggler, wait_share, statistics.median(exposed_shares or [0.0]), comm_calls)


def check_against_reference(job: JobAnalysis, ref: Ref) -> None:
    assert job.collectives_total == len(ref.collectives)
    assert len(job.collectives) == len(ref.collectives)
    for got, want in zip(job.collectives, ref.collectives, strict=True):
        assert (got.kind, got.channel, got.seq) == (want["kind"], want["channel"], want["seq"])
        assert got.start_ns == want["first"]
        assert got.arrival_skew_ns == want["skew"]
        assert got.last == want["last"]
        assert got.ranks == want["ranks"]
        assert got.transfer_ns == want["transfer"]
        assert got.end_spread_ns == want["end_spread"]
        assert {i: w for i, w in enumerate(got.waits_ns) if w is not None} == want["waits"]
    for got_rank, want_rank in zip(job.ranks, ref.ranks, strict=True):
        assert got_rank.steps == want_rank["steps"]
        assert got_rank.step_ns_per_step == pytest.approx(want_rank["dur"] / max(want_rank["steps"], 1))
        assert got_rank.compute_ns_per_step == pytest.approx(want_rank["compute_per_step"])
        assert got_rank.collectives == want_rank["collectives"]
        assert got_rank.last_arrivals == want_rank["last"]
        assert got_rank.expected_last_arrivals == pytest.approx(want_rank["expected"])
        assert got_rank.last_arrival_bound == pytest.approx(want_rank["bound"])
        assert got_rank.wait_ns == want_rank["wait"]
        assert got_rank.exposed_wait_ns == want_rank["exposed_wait"]
        assert got_rank.wait_caused_ns == want_rank["caused"]
        assert got_rank.exposed_wait_caused_ns == want_rank["caused_exposed"]
        assert got_rank.wait_caused_share == pytest.approx(want_rank["caused_share"])
        assert got_rank.straggler == want_rank["straggler"]
    median = statistics.median(r["compute_per_step"] for r in ref.ranks)
    assert job.median_compute_ns_per_step == pytest.approx(median)
    for got_rank, want_rank in zip(job.ranks, ref.ranks, strict=True):
        assert got_rank.compute_excess_ns_per_step == pytest.approx(want_rank["compute_per_step"] - median)
    assert job.wait_share == pytest.approx(ref.wait_share)
    assert (job.verdict, job.straggler) == (ref.verdict, ref.straggler)
    skews = [c["skew"] for c in ref.collectives]
    assert job.median_arrival_skew_ns == (int(statistics.median(skews)) if skews else None)
    transfers = [c["transfer"] for c in ref.collectives]
    assert job.median_transfer_ns == (int(statistics.median(transfers)) if transfers else None)
    spreads = [c["end_spread"] for c in ref.collectives]
    assert job.clock.residual_skew_ns == (int(statistics.median(spreads)) if spreads else None)
    assert job.exposed_comm_share == pytest.approx(ref.exposed_comm_share)
    assert job.comm_calls == ref.comm_calls
    assert job.unmatched_calls == ref.comm_calls - sum(c["ranks"] for c in ref.collectives)
    caused = [r["caused"] for r in ref.ranks]
    assert job.slowest == (caused.index(max(caused)) if max(caused, default=0) > 0 else None)


# --- hand-built jobs --------------------------------------------------------------------------


def job_rows(
    seed: int, ranks: int, steps: int, *, slow: int | None = None, link_ns: int = 3_000, gather: bool = True
) -> list[Row]:
    """A data-parallel job: per step every rank computes, then all-reduces (and sometimes all-gathers
    on a second stream); rank ``slow`` computes 40% longer; some ranks keep computing beside their
    collective, so part of their wait is hidden."""
    rng = random.Random(seed)
    rows: list[Row] = []
    t = 0
    for n in range(steps):
        work = {r: rng.randrange(4_000, 6_000) * (1.4 if r == slow else 1.0) for r in range(ranks)}
        arrive = {r: t + 200 + int(work[r]) + rng.randrange(0, 300) for r in range(ranks)}
        end = max(arrive.values()) + link_ns
        for r in range(ranks):
            rows.append(compute(t + 200, t + 200 + int(work[r]), r))
            ends = end + rng.randrange(0, 40)
            rows.append(comm(arrive[r], ends, r))
            if rng.random() < 0.4:  # a kernel beside the collective hides part of the wait
                rows.append(compute(arrive[r] + 50, arrive[r] + 50 + rng.randrange(100, 900), r))
        t_next = end + 1_000
        if gather and n % 2 == 0:
            g = {r: end + 100 + rng.randrange(0, 500) for r in range(ranks)}
            g_end = max(g.values()) + 700
            rows += [comm(g[r], g_end + rng.randrange(0, 30), r, ALL_GATHER, stream=21) for r in range(ranks)]
            t_next = g_end + 1_000
        rows += [step_of(t, t_next, r, n) for r in range(ranks)]
        t = t_next
    return rows


def job_of(events: pl.DataFrame, **kw: Any) -> JobAnalysis:
    job = analyze_job(events, analyze(events), **kw)
    assert job is not None
    return job


@pytest.mark.parametrize("seed", range(6))
def test_every_number_matches_a_brute_force_computation(seed: int) -> None:
    rng = random.Random(1000 + seed)
    ranks = rng.choice([2, 3, 4])
    slow = rng.choice([None, ranks - 1])
    events = table(*job_rows(seed, ranks, rng.randrange(4, 9), slow=slow, link_ns=rng.choice([500, 3_000, 9_000])))
    check_against_reference(job_of(events), reference(events))


def test_a_planted_slow_rank_is_named_with_what_it_costs() -> None:
    events = table(*job_rows(7, 4, 8, slow=2, link_ns=500, gather=False))
    job = job_of(events)
    ref = reference(events)
    check_against_reference(job, ref)
    assert job.verdict == "slow_rank" and job.straggler == 2 == job.slowest
    slow = job.ranks[2]
    assert slow.last_arrivals == slow.collectives == 8
    assert slow.expected_last_arrivals == pytest.approx(2.0)
    assert slow.last_arrival_bound == pytest.approx(0.25**8)
    assert slow.compute_excess_ns_per_step > 0
    assert slow.wait_caused_share >= MATERIAL_SHARE
    assert job.note.startswith("slow rank: rank 2, GPU 2 arrives last at 8 of 8 collectives (2.0 expected")
    found = {f.id: f for f in find_findings(events, analyze(events))}
    f = found["straggler"]
    assert f.metrics["slow_rank"] == 2
    assert f.share == pytest.approx(slow.wait_caused_share)
    median = statistics.median(r["compute_per_step"] for r in ref.ranks)
    assert f.metrics["compute_excess_ns_per_step"] == pytest.approx(ref.ranks[2]["compute_per_step"] - median)
    assert f.metrics["last_arrivals"] == 8 and f.metrics["wait_share"] == f.share
    assert f.title.startswith(f"Rank 2 is a straggler: the other ranks wait {f.share:.1%} of step time")


def test_a_slow_link_is_not_blamed_on_a_rank() -> None:
    """Long collectives, every rank arrives within a few hundred ns: slow link, no straggler."""
    events = table(*job_rows(3, 4, 6, link_ns=20_000, gather=False))
    job = job_of(events)
    check_against_reference(job, reference(events))
    assert job.verdict == "slow_link" and job.straggler is None
    assert job.wait_share < LINK_WAIT_SHARE and job.exposed_comm_share >= MATERIAL_SHARE
    found = {f.id for f in find_findings(events, analyze(events))}
    assert "exposed_comm" in found and "straggler" not in found


def test_last_every_time_without_more_compute_is_no_straggler() -> None:
    """Rank 1 is always late because its CPU is (a late launch after the same compute): it costs the
    others, but the compute-skew test fails, so the job is "skewed", not a slow rank."""
    rows: list[Row] = []
    t = 0
    for n in range(8):
        for r in range(2):
            late = 2_000 if r == 1 else 0
            rows += [compute(t, t + 5_000, r), comm(t + 5_000 + late, t + 7_200, r), step_of(t, t + 10_000, r, n)]
        t += 10_000
    events = table(*rows)
    job = job_of(events)
    check_against_reference(job, reference(events))
    assert job.ranks[1].last_arrivals == 8 and job.ranks[1].last_arrival_bound == pytest.approx(0.5**8)
    assert not job.ranks[1].straggler and job.straggler is None
    assert job.verdict == "skewed" and job.slowest == 1
    assert job.ranks[1].wait_caused_share == pytest.approx(0.2)
    assert "straggler" not in {f.id for f in find_findings(events, analyze(events))}


def test_arrival_skew_wait_and_exposed_wait_by_hand() -> None:
    """Two ranks, one collective: rank 0 enters at 100, rank 1 at 400; rank 0 computes over
    [150, 250) beside its collective, so 200 of its 300 ns wait are exposed."""
    events = table(
        compute(0, 100, 0),
        comm(100, 900, 0),
        compute(150, 250, 0),
        compute(0, 400, 1),
        comm(400, 905, 1),
    )
    job = job_of(events)
    (c,) = job.collectives
    assert (c.kind, c.channel, c.seq, c.ranks) == ("AllReduce", "stream 20", 0, 2)
    assert (c.start_ns, c.end_ns, c.arrival_skew_ns, c.last) == (100, 905, 300, 1)
    assert c.waits_ns == (300, 0)
    assert (c.transfer_ns, c.end_spread_ns) == (505, 5)
    assert job.ranks[0].exposed_wait_ns == 200
    assert job.ranks[1].wait_caused_ns == 300 and job.ranks[1].exposed_wait_caused_ns == 200
    assert job.clock.method == "single_clock" and job.clock.residual_skew_ns == 5


def test_kinds_from_kernel_names() -> None:
    names = {
        "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)": "AllReduce",
        "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)": "SendRecv",
        "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<(unsigned long)4096>)": "SendRecv",
        "ncclDevKernel_ReduceScatter_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)": "ReduceScatter",
        "ncclAllGatherRingLLKernel_copy_i8(ncclColl)": "AllGather",
        "ncclBroadcastRingLLKernel_copy_i8(ncclColl)": "Broadcast",
        "ncclReduceRingLLKernel_sum_f32(ncclColl)": "Reduce",
        "ncclDevKernel_Generic_4(ncclDevKernelArgsStorage<4096ul>)": "ncclDevKernel_Generic_4",
    }
    got = pl.DataFrame({"name": list(names)}).select(kind_expr())["kind"].to_list()
    assert got == list(names.values())


def test_channels_by_stream_id_or_by_first_use() -> None:
    """Ranks that number their NCCL streams alike are matched per stream id; ranks that do not
    (stream 15 on one, 7 on the other) by the order they first used them."""
    same = collective_calls(t := table(comm(0, 10, 0), comm(0, 10, 1)), devices(t))
    assert same["channel"].to_list() == ["stream 20", "stream 20"]
    rows = [comm(0, 10, 0, stream=15), comm(20, 30, 0, stream=16), comm(0, 10, 1, stream=7), comm(20, 30, 1, stream=3)]
    calls = collective_calls(t := table(*rows), devices(t))
    assert calls.select("dev", "stream", "channel").rows() == [
        (0, 15, "stream #1"),
        (0, 16, "stream #2"),
        (1, 7, "stream #1"),
        (1, 3, "stream #2"),
    ]


def test_unmatched_calls_are_counted_and_a_lone_kernel_matches_nothing() -> None:
    events = table(comm(0, 10, 0), comm(20, 30, 0), comm(0, 10, 1), compute(0, 5, 2))
    job = job_of(events)
    assert (job.comm_calls, job.unmatched_calls, job.collectives_total) == (3, 1, 1)
    lone = job_of(table(comm(0, 10, 0), compute(0, 10, 1)))
    assert lone.verdict == "no_collectives" and "matches one on another rank" in lone.note


def test_no_communication_at_all_says_so() -> None:
    job = job_of(table(compute(0, 10, 0), compute(0, 10, 1)))
    assert job.verdict == "no_collectives" and job.collectives == () and job.collective_table.height == 0
    assert job.note == "no communication kernels on any rank: no collectives to compare"
    one = table(compute(0, 10, 0))
    assert analyze_job(one, analyze(one)) is None  # one device: no job


def test_the_verdict_is_a_pure_function_of_the_collective_table_and_the_breakdown() -> None:
    """summarise_job on a hand-written collective table and per-rank frame, no event table."""
    waits = [(0, 3_000), (1, 0)] * 8  # rank 1 always last, 3 µs after rank 0
    rows = []
    for c in range(8):
        for dev, wait in waits[2 * c : 2 * c + 2]:
            start = 10_000 * c + 3_000 - wait
            rows.append(
                {
                    "collective": c,
                    "kind": "AllReduce",
                    "channel": "stream 20",
                    "seq": c,
                    "dev": dev,
                    "start_ns": start,
                    "end_ns": 10_000 * c + 4_000,
                    "aligned_start_ns": start,
                    "aligned_end_ns": 10_000 * c + 4_000,
                    "ranks": 2,
                    "first_start_ns": 10_000 * c,
                    "last_start_ns": 10_000 * c + 3_000,
                    "arrival_skew_ns": 3_000,
                    "last_dev": 1,
                    "wait_ns": wait,
                    "transfer_ns": 1_000,
                    "end_spread_ns": 0,
                    "exposed_wait_ns": wait,
                }
            )
    collective_table = pl.DataFrame(rows, schema_overrides={"dev": pl.UInt32, "last_dev": pl.UInt32})
    per_rank = pl.DataFrame(
        {
            "dev": [0, 1],
            "rank": [0, 1],
            "device": [0, 1],
            "pid": [100, 110],
            "source": ["a", "b"],
            "steps": [8, 8],
            "dur_ns": [80_000, 80_000],
            "compute_ns": [40_000, 64_000],
            "exposed_comm_ns": [32_000, 8_000],
            "idle_ns": [8_000, 8_000],
        },
        schema_overrides={"dev": pl.UInt32, "rank": pl.Int32, "device": pl.Int32},
    )
    clock = ClockAlignment("single_clock", "a", {"a": 0}, 0, "one source file")
    job = summarise_job(collective_table, per_rank, clock, comm_calls=16)
    assert job.verdict == "slow_rank" and job.straggler == 1
    r1 = job.ranks[1]
    assert (r1.last_arrivals, r1.collectives, r1.expected_last_arrivals) == (8, 8, 4.0)
    assert r1.last_arrival_bound == pytest.approx(0.5**8) and CHANCE_LEVEL / 2 >= 0.5**8
    assert r1.wait_caused_share == pytest.approx(24_000 / 80_000)
    assert (r1.compute_ns_per_step, job.median_compute_ns_per_step) == (8_000, 6_500)
    assert job.ranks[0].compute_excess_ns_per_step == -1_500
    assert (job.wait_share, job.unmatched_calls) == (24_000 / (8 * 3_000 + 16 * 1_000), 0)
    # Six collectives are too few to tell two ranks apart from chance (0.5**6 > 1% / 2 ranks).
    fewer = collective_table.filter(pl.col("collective") < 6)
    assert summarise_job(fewer, per_rank, clock, comm_calls=12).verdict == "skewed"


# --- the generator's jobs, in every format --------------------------------------------------------

JOBS = {"balanced_job": ("balanced", None), "straggler_job": ("slow_rank", 2), "slow_link_job": ("slow_link", None)}


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Path | list[Path]]:
    root = tmp_path_factory.mktemp("jobs")
    out: dict[tuple[str, str], Path | list[Path]] = {}
    for name in JOBS:
        tl = build_timeline(preset(name))
        out[(name, "kineto")] = list(write_kineto_ranks(tl, root / name / "kineto"))
        out[(name, "nsys")] = write_nsys_sqlite(tl, root / name / "job.nsys.sqlite")
        out[(name, "nsys_per_rank")] = list(write_nsys_per_rank(tl, root / name / "nsys"))
    return out


def numbers(job: JobAnalysis) -> dict[str, Any]:
    """The job's numbers without what names files, processes or ranks (or how clocks were aligned),
    and without the host-state idle, which reads the CPU records each format keeps (Kineto's ops,
    nsys's NVTX ranges and runtime calls) and so differs by a few µs per step between formats (what
    the host state says, ``late_because``, is compared)."""
    host = {"host_idle_ns_per_step", "host_excess_ns_per_step", "late_because_ns_per_step"}
    per_file = {"source", "rank", "pid", *host}
    return {
        "collectives": [c.__dict__ for c in job.collectives],
        "ranks": [{k: v for k, v in r.__dict__.items() if k not in per_file} for r in job.ranks],
        "rest": {
            k: getattr(job, k)
            for k in (
                "comm_calls",
                "unmatched_calls",
                "collectives_total",
                "median_compute_ns_per_step",
                "median_arrival_skew_ns",
                "median_transfer_ns",
                "wait_share",
                "exposed_comm_share",
                "verdict",
                "straggler",
                "slowest",
            )
        },
        "residual_skew_ns": job.clock.residual_skew_ns,
    }


@pytest.mark.parametrize("name", sorted(JOBS))
def test_generated_jobs_in_every_format(name: str, written: dict[tuple[str, str], Any]) -> None:
    verdict, slow = JOBS[name]
    jobs = {}
    for fmt in ("kineto", "nsys", "nsys_per_rank"):
        report = traceq.report(traceq.load(written[(name, fmt)]))
        job = report.job
        assert job is not None
        jobs[fmt] = job
        assert (job.verdict, job.straggler) == (verdict, slow), (fmt, job.note)
        assert job.collectives_total == 12 and job.unmatched_calls == 0
        assert job.clock.method == ("single_clock" if fmt == "nsys" else "anchor")
        assert set(job.clock.offsets_ns.values()) == {0}
        assert job.clock.residual_skew_ns is not None and job.clock.residual_skew_ns < 1_500
        found = {f.id: f for f in report.findings}
        assert ("straggler" in found) == (slow is not None)
        if slow is not None:
            assert found["straggler"].metrics["slow_device"] == slow
            assert found["straggler"].title.startswith("Rank 2" if fmt != "nsys" else "GPU 2")
    assert numbers(jobs["kineto"]) == numbers(jobs["nsys"]) == numbers(jobs["nsys_per_rank"])


@pytest.mark.parametrize("name", sorted(JOBS))
def test_generated_jobs_match_the_brute_force_reference(name: str) -> None:
    events = build_timeline(preset(name)).events("nsys")
    check_against_reference(job_of(events), reference(events))


def test_the_straggler_waits_the_others_cannot_hide(written: dict[tuple[str, str], Any]) -> None:
    """In the straggler job the others' waits partly overlap their own backward compute (DDP
    buckets): only the exposed part counts as what the straggler costs."""
    job = traceq.report(traceq.load(written[("straggler_job", "kineto")])).job
    assert job is not None
    slow = job.ranks[2]
    assert slow.wait_ns == 0 and slow.last_arrivals == 12
    assert 0 < slow.exposed_wait_caused_ns < slow.wait_caused_ns
    for r in (0, 1, 3):
        assert job.ranks[r].exposed_wait_ns / job.ranks[r].steps <= job.ranks[r].exposed_comm_ns_per_step
    assert FIRE_SHARE == MATERIAL_SHARE


# --- real traces ------------------------------------------------------------------------------


def test_the_sampled_rank_pair_gives_a_job_report(shared_traces: Path) -> None:
    folder = shared_traces / "hta" / "trace_filter"
    report = traceq.report(traceq.load(sorted(folder.glob("sampled_rank-*.json.gz"))))
    job = report.job
    assert job is not None
    assert job.clock.method == "anchor"  # both files carry (epoch) timestamps with baseTimeNanoseconds 0
    assert [(r.rank, r.collectives) for r in job.ranks] == [(0, 10), (1, 10)]
    assert job.collectives_total == 10 and job.unmatched_calls == 0
    assert {c.kind for c in job.collectives} == {"SendRecv"}
    assert {c.channel for c in job.collectives} == {"stream 84", "stream 203"}
    assert job.straggler is None  # 8 of 10 last arrivals on two ranks is not far beyond chance
    assert job.verdict == "skewed" and job.slowest == 1
    assert "caution:" in job.note  # point-to-point transfers do not end together
    check_against_reference(job, reference(traceq.load(sorted(folder.glob("sampled_rank-*.json.gz"))).events))


@pytest.mark.parametrize(
    ("file", "collectives", "verdict"),
    [
        ("nsysai_mfu_2gpu_before_nccl_2026.2.1.sqlite", 33, "balanced"),
        ("nsysai_h100_2gpu_1s_2026.2.1.sqlite", 0, "no_collectives"),
    ],
)
def test_the_two_gpu_nsys_exports_give_a_job_report(
    shared_traces: Path, file: str, collectives: int, verdict: str
) -> None:
    report = traceq.report(traceq.load(shared_traces / "nsys" / file))
    job = report.job
    assert job is not None and len(job.ranks) == 2
    assert job.collectives_total == collectives and job.verdict == verdict
    if collectives:
        assert job.clock.method == "single_clock" and job.clock.residual_skew_ns is not None
        assert {c.channel for c in job.collectives} == {"stream #1"}  # stream 7 on one GPU, 15 on the other
        assert job.unmatched_calls == 0
    else:
        assert job.note == "no communication kernels on any rank: no collectives to compare"
