"""The CPU rows: every CPU event that has a thread, its source as a String, in event order --
the same rows and values whether the table holds one source (a literal column) or several."""

from __future__ import annotations

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from traceq.analyses.host_state import CPU_KINDS, cpu_rows

from ..builders import api, kernel, launch, step, table


def reference(events: pl.DataFrame) -> pl.DataFrame:
    """The definition, row by row: the CPU kinds with a thread, nine columns, source as a String."""
    columns = ("source", "pid", "tid", "kind", "name", "start_ns", "end_ns", "external_id", "correlation")
    kept = [
        {c: row[c] for c in columns}
        for row in events.iter_rows(named=True)
        if row["kind"] in CPU_KINDS and row["tid"] is not None
    ]
    schema = {c: events.schema[c] for c in columns} | {"source": pl.String}
    return pl.DataFrame(kept, schema=schema, orient="row")


ROWS = (
    step(0, 1_000, 0),
    launch(10, 20, corr=1),
    api("cudaStreamSynchronize", 30, 90, tid=2),
    {**api("cudaMalloc", 40, 45), "tid": None},  # no thread: not a CPU row
    kernel(25, 60, corr=1),
    launch(100, 110, corr=2, tid=3),
)


def test_one_source_gives_the_defined_rows() -> None:
    events = table(*ROWS, source="/runs/rank0.json")
    got = cpu_rows(events)
    assert_frame_equal(got, reference(events))
    assert got.height == 4


def test_several_sources_give_the_defined_rows() -> None:
    events = pl.concat([table(*ROWS, source="/runs/rank0.json"), table(*ROWS, source="/runs/rank1.json")])
    got = cpu_rows(events)
    assert_frame_equal(got, reference(events))
    assert got.get_column("source").unique().sort().to_list() == ["/runs/rank0.json", "/runs/rank1.json"]


@pytest.mark.parametrize("rows", [(), (kernel(0, 10, corr=1),)], ids=["empty table", "no CPU row"])
def test_a_table_without_cpu_rows_gives_none_with_the_same_columns(rows: tuple[dict[str, object], ...]) -> None:
    events = table(*rows)
    got = cpu_rows(events)
    assert got.is_empty()
    assert got.schema == reference(events).schema


def test_rows_gathered_from_one_source_keep_it() -> None:
    events = table(*ROWS, source="/runs/rank0.json")
    got = cpu_rows(events)[[3, 0]]
    assert got.get_column("source").to_list() == ["/runs/rank0.json"] * 2
    assert got.get_column("start_ns").to_list() == [100, 0]
