"""The annotated Chrome trace (``traceq convert TRACE -o x.json.gz``): it follows the Chrome trace
rules traceq's Kineto importer enforces (strict JSON the fast path reads, no warning, slices
nested per thread), and it reads back as the same events plus idle tracks that hold every idle
interval with its causes, the step windows and the findings."""

from __future__ import annotations

import gzip
import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from click.testing import CliRunner

import traceq
from traceq.analyses import CAUSES
from traceq.cli import cli
from traceq.errors import InvalidArgumentError
from traceq.exports.chrome import CATEGORIES, IDLE_TID
from traceq.importers.kineto.importer import read_kineto

SAMPLES = ("training_step.pt.trace.json.gz", "training_step.nsys.sqlite", "ranks/rank0.pt.trace.json.gz")
NOT_IN_THE_DIALECT = {"source", "category", "copy_kind", "sync_kind", "domain"}
"""Columns of nsys rows that the Kineto dialect has no field for: read back from the name or the
category (``docs/perfetto.md``); every other column must come back as it was."""


def convert(path: Path, out: Path) -> None:
    result = CliRunner().invoke(cli, ["convert", str(path), "-o", str(out)])
    assert result.exit_code == 0, result.output


def text_columns_as_strings(frame: pl.DataFrame, columns: list[str]) -> pl.DataFrame:
    cast = [
        pl.col(c).cast(pl.String) if isinstance(frame.schema[c], pl.Categorical | pl.Enum) else pl.col(c)
        for c in columns
    ]
    return frame.select(cast).sort(columns, nulls_last=True)


def ns(us: float) -> int:
    """µs to ns as viewers and traceq's importer read them (the fraction rounded on its own)."""
    whole = math.floor(us)
    return whole * 1000 + round((us - whole) * 1000)


def nested_per_thread(events: list[dict[str, Any]]) -> list[str]:
    """Complete events that overlap another on their (pid, tid) without nesting in it."""
    by_thread: dict[tuple[Any, Any], list[tuple[int, int]]] = defaultdict(list)
    for e in events:
        if e.get("ph") == "X":
            by_thread[(e.get("pid"), e.get("tid"))].append((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])))
    broken = []
    for thread, spans in by_thread.items():
        stack: list[int] = []
        for start, end in sorted(spans, key=lambda s: (s[0], -s[1])):
            while stack and stack[-1] <= start:
                stack.pop()
            if stack and end > stack[-1]:
                broken.append(f"{thread}: [{start}, {end}) crosses the end {stack[-1]}")
            stack.append(end)
    return broken


@pytest.mark.parametrize("sample", SAMPLES)
def test_it_reads_back_as_the_same_events_with_the_idle_tracks_intact(
    sample: str, samples: Path, tmp_path: Path
) -> None:
    path = samples / sample
    out = tmp_path / "annotated.json.gz"
    convert(path, out)
    original = traceq.load(path)
    # The rules the Kineto importer enforces: strict JSON its fast path takes, nothing warned,
    # every event a row except the metadata events naming the tracks.
    result = read_kineto(out, parser="fast")
    assert result.meta.warnings == ()
    assert all(set(c.skipped) <= {"metadata"} for c in result.stats.counts)
    document = json.loads(gzip.decompress(out.read_bytes()))
    assert nested_per_thread([e for e in document["traceEvents"] if e.get("cat") in CATEGORIES]) == []

    back = traceq.load(out)
    ours = pl.col("category").cast(pl.String).is_in(list(CATEGORIES)).fill_null(False)
    lost = NOT_IN_THE_DIALECT if sample.endswith(".sqlite") else {"source"}
    columns = [c for c in original.events.columns if c not in lost]
    same = text_columns_as_strings(back.events.filter(~ours), columns)
    assert same.equals(text_columns_as_strings(original.events, columns))

    analysis = traceq.analyze(original)
    gaps = analysis.gap_table.filter(pl.col("dur_ns") > 0).sort("device", "start_ns")
    idle = back.events.filter(pl.col("category") == "traceq_idle").sort("pid", "start_ns")
    assert idle.select("pid", "start_ns", "end_ns").rows() == gaps.select("device", "start_ns", "end_ns").rows()
    assert idle.get_column("name").cast(pl.String).to_list() == [f"idle: {c}" for c in gaps.get_column("cause")]
    assert idle.get_column("tid").unique().to_list() == [IDLE_TID]
    stretches = back.events.filter(pl.col("category") == "traceq_idle_cause").with_columns(
        (pl.col("end_ns") - pl.col("start_ns")).alias("ns"), pl.col("name").cast(pl.String)
    )
    by_cause = dict(stretches.group_by("name").agg(pl.col("ns").sum()).iter_rows())
    assert {c: by_cause.get(c, 0) for c in CAUSES} == {c: gaps.get_column(f"{c}_ns").sum() for c in CAUSES}

    steps = back.events.filter(pl.col("category") == "traceq_step")
    windows = analysis.windows.sort("dev", "start_ns")
    assert steps.sort("start_ns").select("start_ns", "end_ns").rows() == windows.select("start_ns", "end_ns").rows()

    report = traceq.report(original)
    located = [(f.id, e.start_ns) for f in report.findings for e in f.evidence if e.start_ns is not None]
    marks = back.events.filter(pl.col("category") == "traceq_finding")
    assert sorted(located) == sorted(
        (str(n).split(":")[0], s) for n, s in marks.select("name", "start_ns").iter_rows()
    ), "one instant per piece of evidence with a time"


def test_the_annotated_trace_gives_the_same_report(samples: Path, tmp_path: Path) -> None:
    path = samples / "ranks" / "rank0.pt.trace.json.gz"
    out = tmp_path / "annotated.json"
    convert(path, out)
    before, after = traceq.report(traceq.load(path)), traceq.report(traceq.load(out))
    assert after.devices[0].idle_by_cause_ns == before.devices[0].idle_by_cause_ns
    assert [f.id for f in after.findings] == [f.id for f in before.findings]
    assert out.read_bytes().startswith(b"{")  # .json: not compressed


def test_a_job_of_several_sources_is_refused_with_the_way_out(samples: Path) -> None:
    job = traceq.load(samples / "ranks")
    with pytest.raises(InvalidArgumentError, match="one source") as caught:
        traceq.annotate(job)
    assert "traceq convert RANK_FILE" in caught.value.one_line()
