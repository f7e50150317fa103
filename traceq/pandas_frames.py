"""polars frames as pandas DataFrames with the dtypes a pandas user expects (the ``traceq[pandas]`` extra).

:func:`to_pandas` keeps integers integer where they hold nulls: pandas' nullable ``Int64``,
``Int32``, ... (``pd.NA`` for null) instead of NumPy floats with NaN, so ``pid``, ``device``,
``stream`` and ``correlation`` stay exact ids and joins on them work as they do in HTA's frames.
Booleans with nulls become ``boolean``, text becomes ``object`` str columns (Categorical and Enum
columns pandas ``category``), times stay ``int64`` ns.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import polars as pl
import pyarrow as pa

from traceq.errors import TraceqError

if TYPE_CHECKING:
    import pandas

PANDAS_EXTRA: Final = "traceq[pandas]"


def to_pandas(frame: pl.DataFrame) -> pandas.DataFrame:
    """``frame`` as a pandas DataFrame, integer and boolean columns as pandas' nullable dtypes."""
    pd = _pandas()
    nullable: dict[Any, Any] = {
        pa.int8(): pd.Int8Dtype(),
        pa.int16(): pd.Int16Dtype(),
        pa.int32(): pd.Int32Dtype(),
        pa.int64(): pd.Int64Dtype(),
        pa.uint8(): pd.UInt8Dtype(),
        pa.uint16(): pd.UInt16Dtype(),
        pa.uint32(): pd.UInt32Dtype(),
        pa.uint64(): pd.UInt64Dtype(),
        pa.bool_(): pd.BooleanDtype(),
    }
    # The same dtypes whatever the rows hold: a column's pandas dtype never depends on whether one
    # trace happened to have a null in it.  Arrow's strings come out as str objects.
    return frame.to_arrow().to_pandas(types_mapper=nullable.get)


def _pandas() -> Any:
    try:
        import pandas
    except ImportError as exc:
        raise TraceqError(
            "to_pandas needs pandas, which is not installed", hint=f"pip install '{PANDAS_EXTRA}'"
        ) from exc
    return pandas
