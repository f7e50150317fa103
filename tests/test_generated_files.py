"""Files derived from code (schemas/, docs/cli.md) are checked in up to date."""

from __future__ import annotations

import pytest

from traceq.generated import generated_files

from .conftest import REPO


@pytest.mark.parametrize("relative", sorted(generated_files()))
def test_generated_file_is_up_to_date(relative: str) -> None:
    expected = generated_files()[relative]
    actual = (REPO / relative).read_text()
    assert actual == expected, f"{relative} is stale: run python scripts/generate_docs.py"
