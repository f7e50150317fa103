"""The README opens with exactly two set-up commands, and the first one works as written."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from traceq.cli import cli

from .conftest import REPO

README = (REPO / "README.md").read_text()
FIRST_BLOCK = re.search(r"```sh\n(.*?)\n```", README, flags=re.DOTALL)


def commands() -> list[str]:
    assert FIRST_BLOCK is not None, "README.md opens with a ```sh block"
    return FIRST_BLOCK.group(1).splitlines()


def test_the_readme_starts_with_exactly_two_commands() -> None:
    assert README.index("```sh") < README.index("\n## "), "the commands come before any section"
    main, tests = commands()
    assert "pip install" in main and "traceq report sample_traces/" in main
    assert "pip install" in tests and "'.[test]'" in tests and "pytest" in tests


def test_the_main_command_reports_on_a_shipped_sample(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    main = commands()[0]
    args = shlex.split(main.split("&& traceq ", 1)[1])
    sample = REPO / args[1]
    assert sample.is_file(), f"{args[1]} is shipped"
    monkeypatch.chdir(tmp_path)
    args[1] = str(sample)
    for _ in range(2):  # and it can be run again
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 0, result.output
    assert "where the step time went" in result.stdout
    assert (tmp_path / "report.html").read_text().startswith("<!DOCTYPE html>")
