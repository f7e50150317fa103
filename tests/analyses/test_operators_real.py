"""Operator attribution on the real traces, checked against plain ``json`` / ``sqlite3``.

On two samples (a Kineto trace and an nsys export with ``emit_nvtx``-style op ranges) the kernels
per operator are recomputed from the file with the standard library: the innermost op on the
launching thread that contains the launch's start.  On every sample, each activity with a
launching call gets an operator unless no operator range is open at its launch; the share that
gets none is what ``docs/analyses.md`` reports.
"""

from __future__ import annotations

import bisect
import gzip
import json
import re
import sqlite3
from collections import Counter
from pathlib import Path

import polars as pl
import pytest

import traceq
from traceq.analyses.operator_table import operator_names_of, operator_table, operator_table_of
from traceq.analyses.operators import (
    ACTIVITY_OPERATOR_COLUMNS,
    NAME_COLUMNS,
    NVTX_OP_ARGUMENTS,
    activity_operators,
    operator_links,
)
from traceq.analyses.steps import devices

KINETO = "hta/trace_diff/control/control.json.gz"
NSYS = "nsys/nsysai_h100_2gpu_1s_2026.2.1.sqlite"


def _innermost(ops: list[tuple[int, int, str]], t: int) -> str | None:
    """The latest-starting of ``ops`` (start, end, name; sorted by start, longer first) containing ``t``."""
    i = bisect.bisect_right([o[0] for o in ops], t)
    for start, end, name in reversed(ops[:i]):
        if start <= t < end:
            return name
    return None


def _ns(us: float) -> int:
    return round(us * 1000)


def _kineto_counts(path: Path) -> Counter[str | None]:
    with gzip.open(path) as f:
        doc = json.loads(f.read())
    events = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    ops: dict[tuple[object, object], list[tuple[int, int, str]]] = {}
    for e in events:
        if e.get("cat") == "cpu_op" and e["dur"] > 0:
            ops.setdefault((e["pid"], e["tid"]), []).append((_ns(e["ts"]), _ns(e["ts"] + e["dur"]), e["name"]))
    for v in ops.values():
        v.sort(key=lambda o: (o[0], -o[1]))
    launches = {}
    for e in events:
        if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {}):
            key = (e["pid"], e["args"]["correlation"])
            launches.setdefault(key, (e["pid"], e["tid"], _ns(e["ts"])))
    # Kineto's GPU rows carry the device as pid; this trace's launches all come from one process.
    (pid,) = {p for p, _ in launches}
    counts: Counter[str | None] = Counter()
    for e in events:
        if e.get("cat") == "kernel":
            launch = launches.get((pid, e["args"].get("correlation")))
            if launch is not None:
                counts[_innermost(ops.get((launch[0], launch[1]), []), launch[2])] += 1
    return counts


def _nsys_counts(path: Path) -> Counter[str | None]:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    strings = dict(db.execute("SELECT id, value FROM StringIds"))
    ops: dict[int, list[tuple[int, int, str]]] = {}
    for start, end, tid, text, text_id in db.execute(
        "SELECT start, end, globalTid, text, textId FROM NVTX_EVENTS WHERE eventType IN (59, 60) AND end IS NOT NULL"
    ):
        name = text if text is not None else strings.get(text_id, "")
        if re.match(r"^[A-Za-z_][\w.]*::", name) and end > start:
            ops.setdefault(tid, []).append((start, end, re.sub(NVTX_OP_ARGUMENTS, "", name)))
    for v in ops.values():
        v.sort(key=lambda o: (o[0], -o[1]))
    launches = {}
    for corr, tid, start in db.execute("SELECT correlationId, globalTid, start FROM CUPTI_ACTIVITY_KIND_RUNTIME"):
        pid = tid >> 24  # nsys's globalTid holds the pid above the thread id
        launches.setdefault((pid, corr), (tid, start))
    counts: Counter[str | None] = Counter()
    for corr, gpid in db.execute("SELECT correlationId, globalPid FROM CUPTI_ACTIVITY_KIND_KERNEL"):
        launch = launches.get((gpid >> 24, corr))
        if launch is not None:
            counts[_innermost(ops.get(launch[0], []), launch[1])] += 1
    db.close()
    return counts


@pytest.mark.parametrize(("name", "independent"), [(KINETO, _kineto_counts), (NSYS, _nsys_counts)])
def test_kernels_per_operator_match_a_plain_reading_of_the_file(
    shared_traces: Path, name: str, independent: object
) -> None:
    path = shared_traces / name
    got = traceq.activity_operators(traceq.load(path)).filter(
        (pl.col("kind") == "kernel") & pl.col("launch_name").is_not_null()
    )
    counts = Counter(dict(got.group_by("op_name").len().iter_rows()))
    assert counts == independent(path)  # type: ignore[operator]


def test_every_launched_activity_has_an_operator_where_one_is_open_at_its_launch(shared_traces: Path) -> None:
    files = sorted(p for p in shared_traces.rglob("*") if p.name.endswith((".json.gz", ".sqlite")))
    assert files
    for path in files:
        table = traceq.activity_operators(traceq.load(path))
        launched = table.filter(pl.col("launch_name").is_not_null())
        # The op's range contains the launch's start, on the launching thread's process.
        with_op = launched.filter(pl.col("op_name").is_not_null())
        assert with_op.filter(
            (pl.col("op_start_ns") > pl.col("launch_start_ns")) | (pl.col("op_end_ns") <= pl.col("launch_start_ns"))
        ).is_empty(), path


@pytest.mark.parametrize("name", [KINETO, NSYS])
def test_the_coded_reading_holds_the_same_rows_with_names_as_codes(shared_traces: Path, name: str) -> None:
    """``operator_links`` (what the report reads) is ``activity_operators`` with its names as
    Categorical/Enum codes: same rows, same values once written out as Strings."""
    events = traceq.load(shared_traces / name).events
    strings = traceq.analyses.operators.activity_operators(events)
    coded = operator_links(events)
    assert strings.columns == coded.columns == list(ACTIVITY_OPERATOR_COLUMNS)
    for column in NAME_COLUMNS:
        assert strings.schema[column] == pl.String
        assert isinstance(coded.schema[column], (pl.Categorical, pl.Enum))
    assert coded.with_columns(pl.col(c).cast(pl.String) for c in NAME_COLUMNS).equals(strings)
    assert strings.get_column("op_name").drop_nulls().len() > 0


def _sample_and_real_traces(shared_traces: Path) -> list[Path]:
    files = sorted(p for p in shared_traces.rglob("*") if p.name.endswith((".json.gz", ".json", ".sqlite")))
    return [*files, *sorted((Path(__file__).parents[2] / "sample_traces").glob("*.json*"))]


def test_the_operator_table_summed_per_range_is_the_table_of_every_activitys_row(shared_traces: Path) -> None:
    """What the report reads (``operator_table_of``: activities summed per operator range, then per
    name) is the operator table of ``operator_links``' row per activity, on every trace."""
    with_ops = 0
    for path in _sample_and_real_traces(shared_traces):
        events = traceq.load(path).events
        table = devices(events)
        summed = operator_table_of(events, table)
        assert summed.equals(operator_table(operator_links(events), table)), path
        with_ops += summed.filter(pl.col("op_name").is_not_null()).height
    assert with_ops > 0


def test_the_findings_look_up_of_operators_by_correlation_reads_the_same_operators(shared_traces: Path) -> None:
    """``operator_names_of`` (the few activities a finding names) gives each activity the operator
    ``activity_operators`` gives it, in event order."""
    for name in (KINETO, NSYS):
        events = traceq.load(shared_traces / name).events
        every = activity_operators(events)
        ids = every.get_column("correlation").drop_nulls().unique().sort().gather_every(7)
        got = operator_names_of(events, ids)
        want = every.filter(pl.col("correlation").is_in(ids.implode())).select(
            "source", "pid", "correlation", "op_name"
        )
        assert got.equals(want), name
        assert got.get_column("op_name").drop_nulls().len() > 0
