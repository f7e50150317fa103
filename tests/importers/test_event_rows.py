"""Specification of :class:`traceq.importers.event_rows.EventRows`, the last step both importers
share: converted pieces conformed to the schema as they come, then one table sorted by time and
validated."""

from __future__ import annotations

import polars as pl
import pytest

from traceq import schema
from traceq.importers.event_rows import EventRows


def piece(rows: list[tuple[str, int, int, str]], **helpers: list[object]) -> pl.DataFrame:
    """Converted rows as an importer makes them: kinds as plain strings, helper columns beside."""
    kind, start, end, name = (list(column) for column in zip(*rows, strict=True))
    return pl.DataFrame({"kind": kind, "start_ns": start, "end_ns": end, "name": name, "source": "t", **helpers})


def test_pieces_become_one_conformed_table_sorted_by_start_then_end_ties_in_order_added() -> None:
    rows = EventRows()
    rows.add(piece([("kernel", 5, 9, "k1"), ("kernel", 1, 4, "k0"), ("kernel", 5, 7, "k2")], _proc=[1, 1, 1]))
    rows.add(piece([("cuda_api", 5, 7, "launch"), ("cuda_api", 0, 1, "first")], _proc=[2, 2]))
    table = rows.sorted_table(chunk_rows=2)
    assert table.schema == schema.POLARS_SCHEMA  # the helper column is gone, every schema column there
    assert table.select(pl.col("name").cast(pl.String)).to_series().to_list() == [
        "first",
        "k0",
        "k2",
        "launch",  # ties with k2 on (5, 7): the earlier piece first
        "k1",
    ]
    assert table["is_comm"].to_list() == [False] * 5
    assert table["bytes"].null_count() == 5


def test_nothing_added_is_an_empty_event_table() -> None:
    table = EventRows().sorted_table()
    assert table.height == 0
    assert table.schema == schema.POLARS_SCHEMA


def test_a_piece_without_a_required_column_is_refused_as_it_comes() -> None:
    with pytest.raises(schema.SchemaViolation, match="lacks required column 'source'"):
        EventRows().add(piece([("kernel", 0, 1, "k")]).drop("source"))


def test_the_table_is_checked_against_the_contract() -> None:
    rows = EventRows()
    rows.add(piece([("kernel", 0, 1, "k"), ("kernel", 9, 3, "inverted")]))
    with pytest.raises(schema.SchemaViolation, match="1 rows have end_ns < start_ns"):
        rows.sorted_table()
