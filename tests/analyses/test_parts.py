"""What a worker hands the driver for one part (traceq.analyses.parts): small, whatever its events.

The report built from these summaries is compared with the whole-table analyses in
``tests/test_pipeline.py``; here, what the summaries hold and what they cost.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from tracegen import Scenario, build_timeline, write_kineto_ranks
from traceq.analyses import Options
from traceq.analyses.findings import RANKED_RULES
from traceq.analyses.parts import PartSummary, summarise_part
from traceq.loading import load
from traceq.trace import Trace

from ..builders import kernel, launch, step, trace


def rank0(tmp: Path, *, layers: int, steps: int) -> Trace:
    """Rank 0 of a generated two-rank job of ``steps`` steps of ``layers`` layers."""
    timeline = build_timeline(Scenario("sizes", ranks=2, world_size=2, steps=steps, layers=layers))
    return load(write_kineto_ranks(timeline, tmp / f"l{layers}-s{steps}")[0], cache=False)


def summary(t: Trace, max_gaps: int = 100) -> PartSummary:
    return summarise_part(t.events, t.meta.sources, t.import_stats.counts, Options(max_gaps=max_gaps))


def pickled(value: Any) -> int:
    return len(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))


def without_collectives(summary: PartSummary) -> int:
    return pickled(summary) - pickled(summary.comm_kernels)


def test_a_summary_grows_with_collectives_not_with_events(tmp_path: Path) -> None:
    """16 times the layers: 13 times the events, the same summary but for the collectives' rows."""
    small, large = rank0(tmp_path, layers=2, steps=3), rank0(tmp_path, layers=32, steps=3)
    assert large.events.height > 13 * small.events.height
    a, b = (summary(t) for t in (small, large))
    assert without_collectives(b) < 1.02 * without_collectives(a)
    comm = large.events.filter(pl.col("is_comm"))
    assert b.comm_kernels.height == comm.height == 96  # one all-reduce per layer and step
    table_bytes = sum(large.events.get_column(c).estimated_size() for c in large.events.columns)  # every row
    assert pickled(b) < table_bytes / 40  # 33 KB for a 1.5 MB table
    assert b.estimated_size() == pytest.approx(pickled(b), rel=0.5)  # what Dask is told it weighs


def test_a_summary_grows_with_steps_by_their_windows(tmp_path: Path) -> None:
    """Four times the steps: the per-step rows (windows, longest gaps) grow, nothing else."""
    short, long = rank0(tmp_path, layers=2, steps=3), rank0(tmp_path, layers=2, steps=12)
    a, b = (summary(t) for t in (short, long))
    assert (len(a.steps), len(b.steps)) == (3, 12)
    per_step = (pickled(b.steps) - pickled(a.steps)) / 9
    assert without_collectives(b) - without_collectives(a) < 9 * per_step + pickled(b.longest_gaps)


def test_the_summary_holds_what_the_merge_needs() -> None:
    """One rank, two devices: per device its breakdown, windows and each ranked rule's share."""
    rows = [step(0, 100_000, 0), launch(0, 1_000, 1), kernel(2_000, 10_000, corr=1)]
    rows += [launch(11_000, 11_500, 2), kernel(12_000, 20_000, corr=2)]  # device 0: a 2 µs launch gap
    rows += [launch(1_000, 2_000, 3), kernel(20_000, 30_000, corr=3, device=1)]
    rows += [launch(60_000, 61_000, 4), kernel(70_000, 90_000, corr=4, device=1)]  # device 1: 40 µs
    part = summary(trace(*rows, rank=0))
    assert part.device_table.get_column("device").to_list() == [0, 1]
    assert [t.windows for t in part.totals] == [1, 1] and len(part.steps) == 2
    assert set(part.rankings) == {rule.id for rule in RANKED_RULES}
    assert [dev for _, dev in part.rankings["launch_bound"]] == [1, 0]  # the worst first
    # idle intervals: device 0 before 2 µs, 10-12 µs, after 20 µs; device 1 before 20 µs, 30-70, after 90
    assert part.comm_kernels.is_empty() and part.gaps_total == part.longest_gaps.height == 6
    assert part.kernel_totals.get_column("count").sum() == 4


# ---------------------------------------------------------------------------------------------
# round two takes round one's analysis of a part in memory


def test_round_two_reuses_round_ones_analysis_of_the_same_part_and_reports_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import traceq
    from traceq.analyses import parts

    sample = Path(__file__).resolve().parents[2] / "sample_traces" / "training_step.pt.trace.json.gz"
    loaded = traceq.load(sample, cache=False)
    real = parts.analyze_flagged
    calls: list[int] = []

    def counting(events: pl.DataFrame, options: Options, **spare: Any) -> Any:
        calls.append(events.height)
        return real(events, options, **spare)

    monkeypatch.setattr(parts, "analyze_flagged", counting)
    reused = traceq.report(loaded).to_dict()
    assert len(calls) == 1  # the host-sync finding's detail needed an analysis: round one's was taken
    monkeypatch.setattr(parts._KEPT, "take", lambda events, options: None)
    fresh = traceq.report(loaded).to_dict()
    assert len(calls) == 3
    assert reused == fresh


def test_the_kept_analysis_serves_only_its_own_frame_and_options() -> None:
    from traceq.analyses import parts

    frame = pl.DataFrame({"a": [1]})
    analysis: Any = object()
    kept = parts._KeptAnalysis()
    kept.keep(frame, Options(), frame, analysis)
    assert kept.take(pl.DataFrame({"a": [1]}), Options()) is None  # an equal frame is another part
    kept.keep(frame, Options(), frame, analysis)
    assert kept.take(frame, Options(max_gaps=3)) is None
    kept.keep(frame, Options(), frame, analysis)
    assert kept.take(frame, Options()) == (frame, analysis)
    assert kept.take(frame, Options()) is None  # taken once
