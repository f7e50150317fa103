"""``StringIds`` for the nsys importer: fetched on demand, resolved once per distinct id.

Event tables name things by ``StringIds`` id.  :class:`StringLookup` fetches the values of the ids
a chunk of rows references (only those not asked for before, so the first chunk of a table brings
almost every name and later ones bring few or none), and derives, per distinct string rather than
per row, what the converters need: kernel names as the event table's Categorical plus whether
each is a communication kernel (:data:`traceq.comm_kernels.DEFAULT_COMM_PATTERNS`), and API names
without nsys's CUDA-version suffix.  Rows then take these by id with one vectorised
``replace_strict`` (:func:`by_id`), so no string is copied or hashed per row.
"""

from __future__ import annotations

from typing import Final

import polars as pl

from traceq.comm_kernels import comm_name_expr
from traceq.importers.nsys.export_db import ExportDb

CUDA_VERSION_SUFFIX: Final = r"_v\d{4,}$"
"""nsys appends the CUDA version that introduced a runtime call (``cudaLaunchKernel_v7000``,
``cudaGetDeviceProperties_v2_v12000``).  Versions are 1000*major + 10*minor, so always 4+ digits;
a shorter ``_v2`` is part of the real name (``cuGetProcAddress_v2``, ``cudaGetDeviceProperties_v2``)."""

NAME: Final = pl.Categorical()
"""The dtype of the event table's ``name`` column."""


class StringLookup:
    """The ``StringIds`` values met so far in one export, and tables derived from them."""

    def __init__(self, db: ExportDb) -> None:
        self._db = db
        self._asked = pl.Series("id", [], dtype=pl.Int64)
        self._values = pl.DataFrame(schema={"id": pl.Int64, "value": pl.String})
        self._derived: dict[str, pl.DataFrame] = {}

    def require(self, *ids: pl.Series) -> None:
        """Fetch the values of the ids in ``ids`` (Int64 Series, nulls ignored) not asked for before."""
        # The ids not asked for before, then distinct: the asked ones are most of every chunk's, and
        # a look-up in the few hundred asked is cheaper than a distinct of each chunk's ids.
        wanted = pl.concat([s.rename("id").cast(pl.Int64) for s in ids])
        new = wanted.filter(wanted.is_not_null() & ~wanted.is_in(self._asked.implode())).unique()
        if new.is_empty():
            return
        self._asked = pl.concat([self._asked, new])
        found = self._db.strings(new)
        if found.height:
            self._values = pl.concat([self._values, found])
            self._derived.clear()

    @property
    def values(self) -> pl.DataFrame:
        """Columns ``id`` (Int64) and ``value`` (String) of every id found so far."""
        return self._values

    def kernel_names(self) -> pl.DataFrame:
        """``id``, ``name`` (Categorical) and ``comm`` (the name is a communication kernel's)."""
        if "kernel" not in self._derived:
            self._derived["kernel"] = self._values.select(
                "id",
                name=pl.col("value").cast(NAME),
                comm=comm_name_expr(pl.col("value")),
            )
        return self._derived["kernel"]

    def api_names(self) -> pl.DataFrame:
        """``id`` and ``name`` (Categorical) without the CUDA-version suffix."""
        if "api" not in self._derived:
            self._derived["api"] = self._values.select(
                "id", name=pl.col("value").str.replace(CUDA_VERSION_SUFFIX, "").cast(NAME)
            )
        return self._derived["api"]


def row_of(column: str, table: pl.DataFrame) -> pl.Expr:
    """The row of ``table`` holding the id in ``column`` (UInt32); null where the id is null or not in
    ``table``: one look-up per id, where several of ``table``'s columns are read by it."""
    rows = pl.Series(range(table.height), dtype=pl.UInt32)
    return pl.col(column).replace_strict(table["id"], rows, default=None, return_dtype=pl.UInt32)


def by_id(column: str, table: pl.DataFrame, value: str) -> pl.Expr:
    """``table[value]`` for the id in ``column``; null where the id is null or not in ``table``."""
    return pl.col(column).replace_strict(table["id"], table[value], default=None, return_dtype=table.schema[value])
