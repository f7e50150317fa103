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


def test_conform_rejects_a_table_without_a_required_column() -> None:
    with pytest.raises(SchemaViolation, match="start_ns"):
        schema.conform(pl.DataFrame({"kind": ["kernel"], "end_ns": [1], "name": ["k"], "source": ["x"]}))


def test_conform_rejects_an_unknown_kind() -> None:
    with pytest.raises(pl.exceptions.InvalidOperationError):
        schema.conform(pl.DataFrame([_row(kind="banana")]))


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
