"""Shared fixtures: where the real traces and the shipped samples are."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "sample_traces"
SHARED_TRACES = (REPO / ".." / "shared" / "sample_traces").resolve()


@pytest.fixture(scope="session")
def shared_traces() -> Path:
    """``../shared/sample_traces`` next to the checkout; tests that need it skip where it is absent."""
    if not SHARED_TRACES.is_dir():
        pytest.skip(f"real traces not present: {SHARED_TRACES} does not exist (it sits beside the checkout in CI)")
    return SHARED_TRACES


@pytest.fixture(scope="session")
def samples() -> Path:
    """The project's own generated samples (``sample_traces/``)."""
    return SAMPLES
