"""Specification of traceq.importers.arrow_capsule: arrays handed to polars without a copy and
without the imports that polars' own constructors make."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import polars as pl
import pyarrow as pa
import pytest

from traceq.importers.arrow_capsule import series_of, series_of_numpy


@pytest.mark.parametrize("dtype", [np.uint32, np.uint64, np.int32, np.int64, np.float64])
def test_a_numpy_array_becomes_the_series_polars_would_make(dtype: type[np.generic]) -> None:
    values = np.arange(-3, 7).astype(dtype) if np.dtype(dtype).kind != "u" else np.arange(10).astype(dtype)
    assert series_of_numpy("x", values).equals(pl.Series("x", values))


def test_a_strided_numpy_array_is_read_by_its_values_not_its_memory() -> None:
    values = np.arange(20, dtype=np.int64)[::3]
    assert series_of_numpy("x", values).to_list() == values.tolist()


def test_an_arrow_array_keeps_its_name_and_nulls() -> None:
    column = series_of("c", pa.array([1, None, 3], type=pa.int64()))
    assert column.name == "c" and column.to_list() == [1, None, 3]


def test_neither_path_imports_numpy_ma() -> None:
    # polars' numpy constructor and pa.array both import numpy.ma (0.04 s) to look for a mask.
    # The test's own Arrow array is built from buffers: pa.array of a list imports pandas where
    # it is installed (pyarrow's pandas shim), and pandas imports numpy.ma.
    code = (
        "import sys, numpy as np, pyarrow as pa\n"
        "from traceq.importers.arrow_capsule import series_of, series_of_numpy\n"
        "data = pa.py_buffer(np.array([1, 2], dtype=np.int64).tobytes())\n"
        "y = pa.Array.from_buffers(pa.int64(), 2, [pa.py_buffer(bytes([1])), data])  # [1, None]\n"
        "series_of_numpy('x', np.arange(5)); series_of('y', y)\n"
        "print('numpy.ma' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
