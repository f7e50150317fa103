"""Arrow and numpy arrays into polars without ``pl.from_arrow``: :func:`series_of`, :func:`series_of_numpy`.

Both compiled readers (the Kineto scanner, the nsys column reader) hand over raw buffers that
become pyarrow arrays with ``pa.Array.from_buffers``; passing those to polars through the Arrow
PyCapsule interface is zero-copy and skips ``pl.from_arrow``'s coercions -- and its import of
``pyarrow.compute``, a fixed 0.15 s per process.  A numpy array takes the same way
(:func:`series_of_numpy`): polars' own numpy constructor imports ``numpy.ma`` (0.04 s per
process) to look for a mask.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import polars as pl
import pyarrow as pa


class _ArrowArray:
    """An Arrow array offered through ``__arrow_c_array__`` (what ``pl.Series`` accepts)."""

    def __init__(self, array: pa.Array):
        self._array = array

    def __arrow_c_array__(self, requested_schema: object = None) -> tuple[object, object]:
        capsules: tuple[object, object] = self._array.__arrow_c_array__(requested_schema)
        return capsules


def series_of(name: str, array: pa.Array) -> pl.Series:
    """``array`` as a polars Series called ``name``, sharing its buffers."""
    return pl.Series(name, _ArrowArray(array)).alias(name)  # the capsule's field has no name


def series_of_numpy(name: str, values: npt.NDArray[np.generic]) -> pl.Series:
    """A one-dimensional numpy array of numbers (no nulls) as a polars Series, without a copy.
    (``pa.array`` too would import ``numpy.ma``: the buffer is wrapped as it is.)"""
    values = np.ascontiguousarray(values)
    array = pa.Array.from_buffers(pa.from_numpy_dtype(values.dtype), len(values), [None, pa.py_buffer(values)])
    return series_of(name, array)
