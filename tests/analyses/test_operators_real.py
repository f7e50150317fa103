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
from traceq.analyses.operators import (
    ACTIVITY_OPERATOR_COLUMNS,
    NAME_COLUMNS,
    NVTX_OP_ARGUMENTS,
    REPORT_COLUMNS,
    operator_links,
)

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


@pytest.mark.parametrize("name", [KINETO, NSYS])
@pytest.mark.parametrize(
    "columns",
    [
        REPORT_COLUMNS,
        ("row", "op_name"),
        ("module", "launch_name"),
        ("start_ns", "op_path", "op_linked_by"),
        ("op_linked_by",),
        ("op_end_ns", "module"),
        ("kind",),
    ],
)
def test_asking_for_some_columns_gives_those_columns_of_the_whole_reading(
    shared_traces: Path, name: str, columns: tuple[str, ...]
) -> None:
    """Columns asked of ``operator_links`` (the report asks :data:`REPORT_COLUMNS`, and only what
    they need is computed) are those columns of the whole reading, row for row."""
    events = traceq.load(shared_traces / name).events
    some = operator_links(events, columns=columns)
    assert some.equals(operator_links(events).select(c for c in ACTIVITY_OPERATOR_COLUMNS if c in columns))
    assert some.height > 0
