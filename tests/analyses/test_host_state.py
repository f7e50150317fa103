"""The CPU rows: every CPU event that has a thread, its source as a String, in event order --
the same rows and values whether the table holds one source (a literal column) or several."""

from __future__ import annotations

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from traceq import intervals as iv
from traceq.analyses.host_state import CPU_KINDS, cpu_rows, host_state

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


@pytest.mark.parametrize(
    ("pids", "external_ids"),
    [
        ((100, 100, 100), (None, None, None)),  # one process, no external ids (an nsys export): both literal
        ((100, 100, 100), (7, 7, 7)),  # one id in every row
        ((100, 200, 100), (None, 5, None)),  # neither constant
        ((100, 100, 200), (5, 5, 6)),
    ],
)
def test_columns_with_one_value_in_every_row_give_the_defined_rows(
    pids: tuple[int, int, int], external_ids: tuple[int | None, int | None, int | None]
) -> None:
    """A column constant over the whole table (a literal column in the rows) reads as the definition."""
    rows = [
        {**api("cudaLaunchKernel", 10 * i, 10 * i + 5, corr=i, pid=pid), "external_id": ext}
        for i, (pid, ext) in enumerate(zip(pids, external_ids, strict=True))
    ]
    events = table(*rows, kernel(40, 50, corr=0, pid=pids[0]))
    got = cpu_rows(events)
    assert_frame_equal(got, reference(events))
    assert got.get_column("pid").to_list() == list(pids)
    assert got.get_column("external_id").to_list() == list(external_ids)
    assert_frame_equal(got[[2, 0]], reference(events)[[2, 0]])  # (and rows gathered from them)


def test_a_table_in_chunks_gives_the_defined_rows_each_column_in_one_chunk() -> None:
    """The importers' tables come in hundreds of chunks, some of their columns in one: the rows are
    the definition's whatever the chunks, and each of their columns is one chunk (gathers from them
    are seven times faster)."""
    parts = [table(*rows, source=f"/runs/rank{i % 2}.json") for i, rows in enumerate((ROWS, ROWS[::-1], ROWS))]
    events = pl.concat(parts, rechunk=False)
    events = events.with_columns(events.get_column("kind").rechunk())  # (one column whole, the others in three)
    assert (events.get_column("kind").n_chunks(), events.get_column("tid").n_chunks()) == (1, 3)
    got = cpu_rows(events)
    assert_frame_equal(got, reference(events))
    assert [got.get_column(c).n_chunks() for c in got.columns] == [1] * got.width


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


@pytest.mark.parametrize(
    ("threads", "null_pid"),
    [
        ([("/a", 1, 10)], False),  # one thread of several
        ([("/a", 1, 11), ("/b", 1, 10), ("/a", 1, 10)], False),  # same pid and tid in two sources
        ([("/a", 2, 10), ("/a", 1, 99)], False),  # a thread with no rows
        ([("/b", 1, 10)], False),
        ([("/a", 1, 10), ("/a", None, 12)], True),  # a null pid: the keys are joined, not numbered
        ([("/a", 1, 11), ("/b", 1, 10)], True),
    ],
)
def test_host_state_reads_each_wanted_threads_own_rows(
    threads: list[tuple[str, int | None, int]], null_pid: bool
) -> None:
    """Each wanted thread's recorded time is the union of its own rows, found by (source, pid, tid)
    whichever way the rows are looked up; a thread without rows records nothing."""
    rows = [
        ("/a", 1, 10, 0, 10),
        ("/a", 1, 11, 5, 20),
        ("/b", 1, 10, 30, 40),
        ("/a", 1, 10, 15, 25),
        ("/a", 2, 10, 50, 60),
        *([("/a", None, 12, 70, 80)] if null_pid else []),
    ]
    frame = pl.DataFrame(
        rows,
        schema={"source": pl.String, "pid": pl.Int64, "tid": pl.Int64, "start_ns": pl.Int64, "end_ns": pl.Int64},
        orient="row",
    ).with_columns(
        pl.lit("range").cast(pl.Enum(["range", "cuda_api"])).alias("kind"),
        pl.lit(False).alias("_sync"),
        pl.lit(False).alias("_loader"),
        pl.lit(False).alias("_compile"),
        pl.lit(False).alias("_step"),
    )
    states = host_state(frame, threads).threads
    for key in threads:
        own = [(s, e) for src, pid, tid, s, e in rows if (src, pid, tid) == key]
        want = (
            iv.merge(iv.Intervals.from_arrays([s for s, _ in own], [e for _, e in own]))
            if own
            else iv.Intervals.empty()
        )
        assert states[key].recorded == want, key


def _labelled(
    rows: list[tuple[str, int | None, int, int, int, bool | None, bool | None, bool | None, bool]],
) -> pl.DataFrame:
    """Labelled CPU rows, each a range: (source, pid, tid, start, end, _sync, _loader, _compile, _step)."""
    return pl.DataFrame(
        rows,
        schema={
            "source": pl.String,
            "pid": pl.Int64,
            "tid": pl.Int64,
            "start_ns": pl.Int64,
            "end_ns": pl.Int64,
            "_sync": pl.Boolean,
            "_loader": pl.Boolean,
            "_compile": pl.Boolean,
            "_step": pl.Boolean,
        },
        orient="row",
    ).with_columns(pl.lit("range").cast(pl.Enum(["range", "cuda_api"])).alias("kind"))


def _thread_rows(rows: list[tuple[int, int, int, bool, bool]]) -> pl.DataFrame:
    """Labelled CPU rows of source /a, pid 1: (tid, start, end, is a step range, is a loader range)."""
    return _labelled([("/a", 1, tid, s, e, False, loader, False, step_) for tid, s, e, step_, loader in rows])


def test_a_threads_busy_time_is_its_recorded_time_without_steps_where_another_thread_loads() -> None:
    """``busy`` (what the attribution subtracts from the other threads' loader time) is the
    thread's recorded time without its step ranges -- computed where another thread of the process
    has loader ranges, and empty where none does (nothing reads it there)."""
    own = [(10, 0, 100, True, False), (10, 5, 20, False, False), (10, 40, 60, False, False)]
    alone = host_state(_thread_rows(own), [("/a", 1, 10)]).threads[("/a", 1, 10)]
    assert alone.recorded == iv.Intervals.from_arrays([0], [100])
    assert alone.busy == iv.Intervals.empty()
    beside = host_state(_thread_rows([*own, (11, 30, 50, False, True)]), [("/a", 1, 10)])
    assert beside.threads[("/a", 1, 10)].busy == iv.Intervals.from_arrays([5, 40], [20, 60])
    assert beside.loader_elsewhere(("/a", 1, 10)) == iv.Intervals.from_arrays([30], [50])
    # A loader range on the thread itself is not another thread's.
    itself = host_state(_thread_rows([*own, (10, 70, 80, False, True)]), [("/a", 1, 10)])
    assert itself.threads[("/a", 1, 10)].busy == iv.Intervals.empty()


_FLAG_ROWS = st.tuples(
    st.sampled_from(["/a", "/a", "/b"]),
    st.sampled_from([1, 1, 2, None]),
    st.sampled_from([10, 10, 11]),
    st.integers(0, 50),
    st.integers(0, 20),
    *(st.sampled_from([True, False, False, None]) for _ in range(3)),
)


@settings(deadline=None, max_examples=150)
@given(
    rows=st.lists(_FLAG_ROWS, max_size=12),
    wanted=st.lists(
        st.tuples(st.sampled_from(["/a", "/b"]), st.sampled_from([1, 2]), st.sampled_from([10, 11])),
        min_size=1,
        max_size=3,
    ),
    one_thread=st.booleans(),
)
def test_each_wanted_threads_sync_loader_and_compile_time_is_the_union_of_its_own_flagged_rows(
    rows: list[tuple[str, int | None, int, int, int, bool | None, bool | None, bool | None]],
    wanted: list[tuple[str, int, int]],
    one_thread: bool,
) -> None:
    """Whichever way the rows are looked up -- every row one wanted thread's, thread numbers, or a
    join where a pid is null -- a thread's sync, loader and compile sets are the unions of its own
    rows with that flag (a null flag is not set), and its recorded time the union of all its rows."""
    if one_thread:  # every row the one wanted thread's (the usual part: no look-up)
        wanted = wanted[:1]
        rows = [(*wanted[0], *row[3:]) for row in rows]
    frame = _labelled(
        [
            (src, pid, tid, s, s + d, sync, loader, compiling, False)
            for src, pid, tid, s, d, sync, loader, compiling in rows
        ]
    )
    states = host_state(frame, wanted).threads

    def union(flag: int | None, key: tuple[str, int, int]) -> iv.Intervals:
        spans = [(r[3], r[3] + r[4]) for r in rows if r[:3] == key and (flag is None or r[flag])]
        return iv.merge(iv.Intervals.from_arrays([s for s, _ in spans], [e for _, e in spans]))

    for key in wanted:
        got = states[key]
        assert (got.sync, got.loader, got.compile, got.recorded) == (
            union(5, key),
            union(6, key),
            union(7, key),
            union(None, key),
        ), key
