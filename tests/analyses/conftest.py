"""Fixtures of the analysis tests: the planted scenarios, written once per session."""

from __future__ import annotations

import pytest

from .planted import PlantedTraces


@pytest.fixture(scope="session")
def planted(tmp_path_factory: pytest.TempPathFactory) -> PlantedTraces:
    """Issue 13's scenario catalogue, each scenario written in both formats when first asked for."""
    return PlantedTraces(tmp_path_factory.mktemp("planted"))
