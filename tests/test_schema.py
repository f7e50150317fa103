"""The event-table contract: one schema in code, mirrored in schemas/ and docs/."""

from __future__ import annotations

import json
import re

import polars as pl
import pytest

from traceq import schema
from traceq.schema import SchemaViolation

from .conftest import REPO


def _row(**overrides: object) -> dict[str, object]:
    row: dict[str, object] = {"kind": "kernel", "start_ns": 10, "end_ns": 20, "name": "k", "source": "x"}
    row.update(overrides)
    return row


def test_conform_adds_missing_nullable_columns_in_schema_order() -> None:
    df = schema.conform(pl.DataFrame([_row()]))
    assert df.columns == list(schema.COLUMN_NAMES)
    assert df.schema == schema.POLARS_SCHEMA
    assert df["is_comm"].to_list() == [False]
    assert df["device"].to_list() == [None]


def _rows_in_pieces(pieces: int) -> pl.DataFrame:
    """Six rows with a String kind (cast to the Enum), an Int64 device (cast to Int32), a column the
    schema does not know and most columns missing: in one chunk, or (``pieces`` > 1) each column in
    ``pieces`` chunks but ``kind`` in two others, as a lazy query's rows can come (the Kineto
    importer's do)."""
    rows = pl.DataFrame(
        {
            "kind": ["kernel", "memcpy", "cuda_api", "kernel", "range", "memset"],
            "start_ns": [10, 20, 30, 40, 50, 60],
            "end_ns": [11, 25, 31, 48, 55, 61],
            "name": ["k", "memcpy HtoD", "cudaLaunchKernel", "k", "step", "memset"],
            "source": ["x"] * 6,
            "device": [0, 0, None, 1, None, 0],
            "helper": [1, 2, 3, 4, 5, 6],
        },
        schema_overrides={"name": pl.Categorical(), "source": pl.Categorical()},
    )
    if pieces == 1:
        return rows
    step = 6 // pieces
    chunked = [pl.concat([rows[c].slice(i, step) for i in range(0, 6, step)], rechunk=False) for c in rows.columns]
    chunked[0] = pl.concat([rows["kind"].slice(0, 5), rows["kind"].slice(5, 1)], rechunk=False)
    return pl.DataFrame(chunked)


def test_conform_gives_the_same_table_whatever_the_chunks_of_the_frame() -> None:
    one, many = schema.conform(_rows_in_pieces(1)), schema.conform(_rows_in_pieces(3))
    assert many.schema == one.schema == schema.POLARS_SCHEMA
    assert many.equals(one)
    assert many["is_comm"].to_list() == [False] * 6
    assert many["device"].to_list() == [0, 0, None, 1, None, 0]
    assert many["stream"].to_list() == [None] * 6


def test_conform_leaves_the_chunks_of_a_frame_of_many_chunks_as_they_are() -> None:
    # A frame-wide select would copy every column into one chunk first (at a 1 GB Kineto trace's
    # peak, 0.3 GB beside its rows): a column of the declared type is taken as it is.
    rows = _rows_in_pieces(3)
    out = schema.conform(rows)
    assert rows["kind"].chunk_lengths() == [5, 1]
    for name in ("start_ns", "end_ns", "name", "source"):
        assert out[name].chunk_lengths() == rows[name].chunk_lengths() == [2, 2, 2]


def test_conform_rejects_a_table_without_a_required_column() -> None:
    with pytest.raises(SchemaViolation, match="start_ns"):
        schema.conform(pl.DataFrame({"kind": ["kernel"], "end_ns": [1], "name": ["k"], "source": ["x"]}))


@pytest.mark.parametrize("pieces", [1, 3])
def test_conform_rejects_an_unknown_kind(pieces: int) -> None:
    rows = pl.concat([pl.DataFrame([_row()]), pl.DataFrame([_row(kind="banana")])], rechunk=pieces == 1)
    with pytest.raises(pl.exceptions.InvalidOperationError):
        schema.conform(rows)


def test_conform_rejects_a_frame_of_many_chunks_without_a_required_column() -> None:
    rows = _rows_in_pieces(3).drop("end_ns")
    with pytest.raises(SchemaViolation, match="end_ns"):
        schema.conform(rows)


def test_validate_rejects_inverted_intervals() -> None:
    df = schema.conform(pl.DataFrame([_row(start_ns=30, end_ns=20)]))
    with pytest.raises(SchemaViolation, match="1 rows have end_ns < start_ns"):
        schema.validate(df)


def test_validate_rejects_nulls_in_required_columns() -> None:
    df = schema.conform(pl.DataFrame([_row(), _row(name=None)]))
    with pytest.raises(SchemaViolation, match="name"):
        schema.validate(df)


def test_arrow_round_trip_keeps_the_declared_types() -> None:
    df = schema.conform(pl.DataFrame([_row(copy_kind="HtoD", kind="memcpy")]))
    back = schema.to_polars(df.to_arrow())
    assert back.schema == schema.POLARS_SCHEMA
    assert back.equals(df)


def test_the_checked_in_json_schema_is_generated_from_the_code() -> None:
    on_disk = (REPO / "schemas" / "events.schema.json").read_text()
    assert on_disk == schema.json_schema_text()
    spec = json.loads(on_disk)
    assert list(spec["properties"]) == sorted(schema.COLUMN_NAMES)
    assert set(spec["required"]) == set(schema.COLUMN_NAMES)
    assert spec["properties"]["kind"]["enum"] == list(schema.KINDS)


def test_docs_list_every_column_with_its_types() -> None:
    doc = (REPO / "docs" / "event-table.md").read_text()
    rows = re.findall(r"^\| `(\w+)` \| (\w+) \| `([^`]+)` \|", doc, flags=re.MULTILINE)
    arrow = schema.arrow_schema()
    documented = {name: (ptype, atype) for name, ptype, atype in rows}
    assert list(documented) == list(schema.COLUMN_NAMES)
    for col in schema.COLUMNS:
        ptype = "Enum" if isinstance(col.dtype, pl.Enum) else str(col.dtype)
        assert documented[col.name] == (ptype, str(arrow.field(col.name).type)), col.name


def test_guaranteed_columns_include_those_the_issue_names() -> None:
    required = {
        "kind",
        "start_ns",
        "end_ns",
        "name",
        "pid",
        "tid",
        "device",
        "stream",
        "correlation",
        "is_comm",
        "bytes",
        "copy_kind",
        "rank",
    }
    assert required <= set(schema.GUARANTEED)
