"""Specification of :func:`traceq.importers.lookups.by_int_key`: per row, the value of the row's key,
exactly what ``replace_strict`` gives, whether the keys fit the dense table or not."""

from __future__ import annotations

import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

from traceq.importers import lookups
from traceq.importers.lookups import by_int_key


def reference(rows: list[int | None], keys: list[int], values: list[int | None]) -> list[int | None]:
    table = dict(zip(keys, values, strict=True))
    return [None if r is None else table.get(r) for r in rows]


def looked_up(rows: list[int | None], keys: list[int], values: list[int | None]) -> list[int | None]:
    frame = pl.DataFrame({"k": rows}, schema={"k": pl.Int64})
    expr = by_int_key(pl.col("k"), pl.Series(keys, dtype=pl.Int64), pl.Series(values, dtype=pl.Int64), pl.Int64())
    return frame.select(expr.alias("v"))["v"].to_list()


@given(
    table=st.dictionaries(st.integers(-5, 300), st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1)), max_size=40),
    rows=st.lists(st.one_of(st.none(), st.integers(-10, 320)), max_size=60),
)
def test_each_row_gets_the_value_of_its_key_and_null_without_one(
    table: dict[int, int | None], rows: list[int | None]
) -> None:
    keys, values = list(table), list(table.values())
    assert looked_up(rows, keys, values) == reference(rows, keys, values)


def test_keys_beyond_the_dense_table_are_looked_up_by_hash(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lookups, "MAX_DENSE_KEY", 100)
    keys, values = [5, 99, 100, 10**12], [1, 2, 3, 4]
    rows: list[int | None] = [5, 100, 10**12, 7, None, 99]
    assert looked_up(rows, keys, values) == [1, 3, 4, None, None, 2]


def test_no_keys_give_nulls_of_the_asked_type() -> None:
    frame = pl.DataFrame({"k": [1, 2]})
    out = frame.select(
        by_int_key(pl.col("k"), pl.Series([], dtype=pl.Int64), pl.Series([], dtype=pl.String), pl.String())
    )
    assert out.to_series().to_list() == [None, None]
    assert out.to_series().dtype == pl.String


def test_categorical_codes_look_up_enum_values() -> None:
    names = pl.Series(["ncclKernel", "gemm", None, "gemm"], dtype=pl.Categorical)
    frame = names.to_frame("name")
    distinct = frame.select(pl.col("name").unique().drop_nulls())
    codes = distinct.select(pl.col("name").to_physical()).to_series()
    kinds = distinct.select(pl.col("name").cast(pl.String).str.starts_with("nccl")).to_series()
    out = frame.select(by_int_key(pl.col("name").to_physical(), codes, kinds, pl.Boolean())).to_series()
    assert out.to_list() == [True, False, None, False]
