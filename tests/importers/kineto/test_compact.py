"""Per-event normalisation of the Kineto importer (``compact``, and ``FlowSplit`` over it)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
from hypothesis import given
from hypothesis import strategies as st

from traceq.importers.kineto.compact import (
    COMPACT_SCHEMA,
    FLOW_COLUMNS,
    SKIP_FLOW,
    FlowSplit,
    _ints_of_text,
    compact,
    int_from_text,
)
from traceq.importers.kineto.lenient_parser import parse_lenient

DECIMAL = st.integers(min_value=-(2**63), max_value=2**63 - 1).map(str)
ID_TEXT = st.one_of(
    DECIMAL,
    st.sampled_from(["0x1f", "0X7", "7.0", " 12 ", "stream 7", "1e3", "99999999999999999999", "-0", "", "x"]),
    st.text(max_size=6),
)


@given(
    st.lists(st.one_of(st.none(), DECIMAL), max_size=20),
    st.lists(st.one_of(st.none(), ID_TEXT), max_size=20),
)
def test_ids_read_per_block_are_what_int_from_text_reads(plain: list[str | None], mixed: list[str | None]) -> None:
    # Blocks whose values are all decimal take the plain parse; others the full one.  Either way
    # every value must come out as int_from_text reads it.
    n = max(len(plain), len(mixed))
    raw = pl.DataFrame(
        {
            "plain": plain + [None] * (n - len(plain)),
            "mixed": mixed + [None] * (n - len(mixed)),
        },
        schema={"plain": pl.String, "mixed": pl.String},
    )
    ids = _ints_of_text(raw, ("plain", "mixed"))
    got = raw.select(ids["plain"].alias("plain"), ids["mixed"].alias("mixed"))
    expected = raw.select(int_from_text(pl.col("plain")).alias("plain"), int_from_text(pl.col("mixed")).alias("mixed"))
    assert got.equals(expected)


def _raw_frame(events: list[dict[str, object]]) -> pl.DataFrame:
    """The raw frame the parsers hand to their compact callback, for ``events``."""
    text = json.dumps({"traceEvents": events}).encode()
    return parse_lenient(text, Path("t.json"), lambda raw: raw).events


FLOWS_AND_OTHERS = [
    {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10.5, "dur": 2, "args": {"correlation": 1}},
    {"ph": "s", "cat": "ac2g", "name": "launch", "pid": 1, "tid": 2, "ts": 9, "id": 1},
    {"ph": "f", "cat": "ac2g", "name": "launch", "pid": 0, "tid": "stream 7", "ts": 10.5, "id": "0x1", "bp": "e"},
    {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "python"}},
    {"ph": "t", "cat": "other", "name": "step", "pid": 1, "tid": 2, "id": 3},  # a flow without ts
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 2, "ts": 9, "dur": 1},
    {"ph": "Q", "cat": "odd", "name": "q", "pid": 1, "tid": 2, "ts": 11},
    {"ph": "f", "cat": "ac2g", "name": "launch", "pid": 0, "tid": 7, "ts": 12, "id": 2},
]


def test_flow_split_keeps_the_flow_events_apart_and_every_other_event_as_compact_leaves_it() -> None:
    raw = _raw_frame(FLOWS_AND_OTHERS)
    whole = compact(raw)
    split = FlowSplit()
    # two blocks, as the parsers hand them over
    rows = pl.concat([split(raw.slice(0, 3)), split(raw.slice(3))])
    is_flow = pl.col("outcome") == SKIP_FLOW
    assert rows.equals(whole.filter(~is_flow))
    assert split.flows().equals(whole.filter(is_flow).select(FLOW_COLUMNS))
    assert split.flows().get_column("ph").cast(pl.String).to_list() == ["s", "f", "t", "f"]
    assert rows.get_column("ph").cast(pl.String).to_list() == ["X", "M", "X", "Q"]


def test_a_trace_without_flows_has_an_empty_flow_frame_of_the_flow_columns() -> None:
    split = FlowSplit()
    rows = split(_raw_frame(FLOWS_AND_OTHERS[:1]))
    assert rows.height == 1
    assert split.flows().is_empty()
    assert split.flows().columns == list(FLOW_COLUMNS)
    assert split.flows().schema == pl.Schema({c: COMPACT_SCHEMA[c] for c in FLOW_COLUMNS})
