"""Files derived from code (schemas/, docs/cli.md) are checked in up to date."""

from __future__ import annotations

import importlib.util
from types import ModuleType

import pytest

from .conftest import REPO


def load_generate_docs() -> ModuleType:
    """``scripts/generate_docs.py``, which says what the derived files should hold."""
    spec = importlib.util.spec_from_file_location("generate_docs", REPO / "scripts" / "generate_docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GENERATE_DOCS = load_generate_docs()


@pytest.mark.parametrize("relative", sorted(GENERATE_DOCS.generated_files()))
def test_generated_file_is_up_to_date(relative: str) -> None:
    expected = GENERATE_DOCS.generated_files()[relative]
    actual = (REPO / relative).read_text()
    assert actual == expected, f"{relative} is stale: run python scripts/generate_docs.py"
