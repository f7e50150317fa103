"""Shared fixtures: where the real traces and the shipped samples are; a private cache per test.
And hypothesis's settings for the whole suite: no per-example deadline and no "too slow" health
check, the two places where hypothesis reads the clock, so that a loaded machine fails nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from traceq.cache import CACHE_DIR_ENV

settings.register_profile("traceq", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("traceq")

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


@pytest.fixture(autouse=True)
def private_cache_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets an empty cache directory of its own: the user's cache is never touched, and
    no test reads an entry another test wrote."""
    directory = tmp_path_factory.mktemp("traceq-cache")
    monkeypatch.setenv(CACHE_DIR_ENV, str(directory))
    return directory
