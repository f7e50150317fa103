"""The README opens with exactly two set-up commands, the first one works as written, and so does
every other example of the command line in it."""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from traceq.cli import cli, default_html_path

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


# --------------------------------------------------------------------------------------------
# every `traceq ...` example in the README runs, on the shipped samples, as written


def shell_examples() -> list[list[str]]:
    """The ``traceq`` command lines of the README's ```sh blocks, continuation lines joined, each
    split as a shell would (comments dropped)."""
    found = []
    for block in re.findall(r"```sh\n(.*?)\n```", README, flags=re.DOTALL):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if words and words[0] == "traceq":
                found.append(words[1:])
    return found


@pytest.fixture()
def samples_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of ``sample_traces/`` in an empty working directory, as the README's commands expect."""
    shutil.copytree(REPO / "sample_traces", tmp_path / "sample_traces")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def inputs_of(folder: Path) -> dict[Path, tuple[bytes, int]]:
    return {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(folder.rglob("*")) if p.is_file()}


def test_the_readme_has_the_examples_this_file_checks() -> None:
    examples = shell_examples()
    assert len(examples) >= 7
    assert {words[0] for words in examples} == {"report", "info", "events", "convert", "diff", "check"}
    assert sum("--params" in words for words in examples) == 1


@pytest.mark.parametrize("words", shell_examples(), ids=lambda words: " ".join(words)[:60])
def test_every_shell_example_runs_on_the_shipped_samples(words: list[str], samples_here: Path) -> None:
    before = inputs_of(samples_here / "sample_traces")
    result = CliRunner().invoke(cli, words)
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() and result.stderr == ""
    written = [words[i + 1] for i, word in enumerate(words) if word in ("-o", "--json", "--junit")]
    if words[0] == "report" and "--no-html" not in words and "-o" not in words:
        written.append(str(default_html_path((Path(words[1]),))))
    for name in written:
        assert (samples_here / name).stat().st_size > 0, f"{name} was not written"
    after = inputs_of(samples_here / "sample_traces")
    assert {p: after[p] for p in before} == before, "an example changed a sample"
    if words[0] == "diff":
        verdict = click.unstyle(result.stdout).split("\nverdict\n", 1)[1].split("\n\n", 1)[0]
        quoted = f"`traceq diff` prints `{' '.join(verdict.split())}`"
        assert quoted in " ".join(README.split()), "the README quotes the verdict the example prints"
    if "--params" in words:
        (mfu,) = re.findall(r"MFU ([0-9.]+)% over \d+ step windows", result.stdout)
        assert 0 < float(mfu) <= 100, f"MFU {mfu}%: the example's model does not fit the sample"
        assert f"MFU {mfu}%" in README, "the README quotes the MFU the example prints"


def test_the_readme_error_example_is_what_traceq_says(samples_here: Path) -> None:
    (line,) = re.findall(r"^traceq: error: .*$", README, flags=re.MULTILINE)
    name = line.split()[2].rstrip(":")
    whole = (samples_here / "sample_traces" / "training_step.pt.trace.json.gz").read_bytes()
    (samples_here / name).write_bytes(whole[: len(whole) // 2])  # a trace cut short in copying
    result = CliRunner().invoke(cli, ["info", name])
    assert result.exit_code == 65
    assert result.stderr == line + "\n"
