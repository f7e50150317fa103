"""Per-event normalisation of the Kineto importer (``compact``)."""

from __future__ import annotations

import polars as pl
from hypothesis import given
from hypothesis import strategies as st

from traceq.importers.kineto.compact import _ints_of_text, int_from_text

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
