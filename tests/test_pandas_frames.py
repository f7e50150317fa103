"""to_pandas: the event table and the named tables as pandas frames whose integers stay integers."""

from __future__ import annotations

import builtins
from typing import Any

import pytest

import traceq
from traceq.errors import TraceqError

from .builders import api, kernel, step, trace

pd = pytest.importorskip("pandas")

TRACE = trace(step(0, 1000, 1), api("cudaLaunchKernel", 10, 20, corr=1), kernel(100, 300, corr=1))


def test_integer_columns_stay_integer_with_nulls_as_na() -> None:
    frame = TRACE.to_pandas()
    assert len(frame) == TRACE.events.height
    assert frame["start_ns"].dtype == pd.Int64Dtype()
    assert frame["device"].dtype == pd.Int32Dtype() and frame["correlation"].dtype == pd.Int64Dtype()
    by_kind = frame.set_index("kind")
    assert by_kind.loc["kernel", "correlation"] == 1 and by_kind.loc["kernel", "device"] == 0
    assert by_kind.loc["cuda_api", "device"] is pd.NA  # a CPU row has no device: NA, not NaN
    assert frame["kind"].dtype == "category" and frame["is_comm"].dtype == pd.BooleanDtype()


def test_the_named_tables_convert_with_the_same_dtypes() -> None:
    tables = traceq.tables(TRACE)
    kernels = tables.to_pandas("kernels")
    assert kernels["step"].tolist() == [1] and kernels["step"].dtype == pd.Int64Dtype()
    assert kernels["name"].tolist() == ["gemm"]
    gaps = tables.to_pandas("gaps")
    assert gaps["dur_ns"].dtype == pd.Int64Dtype() and gaps["next_correlation"].dtype == pd.Int64Dtype()


def test_without_pandas_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    real = builtins.__import__

    def no_pandas(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "pandas":
            raise ImportError("no pandas")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pandas)
    with pytest.raises(TraceqError, match=r"pip install 'traceq\[pandas\]'"):
        TRACE.to_pandas()
