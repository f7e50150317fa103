"""Fixtures of the diff tests: the planned pairs' scenarios, written once per session in both formats."""

from __future__ import annotations

import pytest

from ..analyses.planted import PlantedTraces


@pytest.fixture(scope="session")
def planted_pairs(tmp_path_factory: pytest.TempPathFactory) -> PlantedTraces:
    """The scenarios of ``tracegen.planned.scenarios.PAIRS``, each written when first asked for."""
    return PlantedTraces(tmp_path_factory.mktemp("pairs"))
