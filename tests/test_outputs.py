"""Output files: an input is never written over -- whatever the path, link or --force -- and an
output is written whole or not at all, with one line naming it when it cannot be."""

from __future__ import annotations

import errno
import gzip
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from traceq import trace as trace_module
from traceq.cli import cli

from .conftest import SAMPLES


def run(*args: str | Path) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, [str(a) for a in args])
    return result.exit_code, result.stdout, result.stderr


def snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under ``folder``: its bytes and mtime (ns), to show nothing changed or appeared."""
    return {
        str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


@pytest.fixture()
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder with the shipped samples in the forms the cases below need; the tests run in it."""
    folder = tmp_path / "work"
    folder.mkdir()
    shutil.copy(SAMPLES / "training_step.nsys.sqlite", folder / "s.sqlite")
    (folder / "t.json").write_bytes(gzip.decompress((SAMPLES / "training_step.pt.trace.json.gz").read_bytes()))
    (folder / "link.json").symlink_to("t.json")
    os.link(folder / "t.json", folder / "hard.json")
    (folder / "link.sqlite").symlink_to("s.sqlite")
    os.link(folder / "s.sqlite", folder / "hard.sqlite")
    ranks = folder / "ranks"
    ranks.mkdir()
    for rank in (0, 1):
        packed = (SAMPLES / "ranks" / f"rank{rank}.pt.trace.json.gz").read_bytes()
        (ranks / f"rank{rank}.pt.trace.json").write_bytes(gzip.decompress(packed))
    monkeypatch.chdir(folder)
    return folder


def _parquet(work: Path) -> list[str]:
    assert run("convert", "s.sqlite", "-o", "x.parquet")[0] == 0
    return ["convert", "x.parquet", "-o", "x.parquet"]


INPUT_AS_OUTPUT: dict[str, Callable[[Path], list[str]]] = {
    "report -o the input": lambda w: ["report", "t.json", "-o", "t.json", "--force"],
    "report -o the input, spelled another way": lambda w: ["report", "t.json", "-o", "./sub/../t.json", "--force"],
    "report -o a symbolic link to the input": lambda w: ["report", "t.json", "-o", "link.json", "--force"],
    "report -o a hard link to the input": lambda w: ["report", "t.json", "-o", "hard.json", "--force"],
    "report -o the input given through a link": lambda w: ["report", "link.json", "-o", "t.json", "--force"],
    "report --json the input": lambda w: ["report", "t.json", "--no-html", "--json", "t.json", "--force"],
    "report --json an absolute path to the input": lambda w: ["report", "t.json", "--json", str(w / "t.json")],
    "report --json a rank of a directory input": lambda w: [
        *("report", "ranks/", "--no-html", "--json", "ranks/rank0.pt.trace.json", "--force"),
    ],
    "report -o a rank of a directory input": lambda w: ["report", "ranks", "-o", "ranks/rank1.pt.trace.json"],
    "convert -o the input": lambda w: ["convert", "s.sqlite", "-o", "s.sqlite", "--force"],
    "convert -o a symbolic link to the input": lambda w: ["convert", "s.sqlite", "-o", "link.sqlite", "--force"],
    "convert -o a hard link to the input": lambda w: ["convert", "s.sqlite", "-o", "hard.sqlite", "--force"],
    "convert -o one of several inputs": lambda w: ["convert", "t.json", "s.sqlite", "-o", "s.sqlite", "--force"],
    "convert x.parquet -o x.parquet": _parquet,
}


@pytest.mark.parametrize("case", sorted(INPUT_AS_OUTPUT))
def test_an_output_that_is_an_input_is_refused_even_with_force(case: str, work: Path) -> None:
    (work / "sub").mkdir()
    args = INPUT_AS_OUTPUT[case](work)
    before = snapshot(work)
    code, out, err = run(*args)
    assert code == 73, err
    assert out == "" and err.count("\n") == 1, err
    output = Path(args[args.index("-o" if "-o" in args else "--json") + 1])
    refusal = "is one of the inputs, and traceq never writes over an input. Name another output."
    assert err == f"traceq: error: {output}: {refusal}\n"
    assert "--force" not in err
    assert snapshot(work) == before  # bytes and mtimes unchanged, nothing written beside them


def test_an_output_named_like_a_trace_in_an_input_directory_is_refused(work: Path) -> None:
    before = snapshot(work)
    code, _, err = run("report", "ranks", "--json", "ranks/job.json", "--force")
    assert code == 73 and err.count("\n") == 1
    assert err.startswith("traceq: error: ranks/job.json: is in the input directory ")
    assert "the next run over that directory would read it as an input" in err and "--force" not in err
    assert snapshot(work) == before


def test_an_output_beside_a_directory_input_or_inside_it_under_another_name_is_written(work: Path) -> None:
    code, _, err = run("report", "ranks", "-o", "ranks/job.html", "--json", "job.json")
    assert code == 0, err
    assert (work / "ranks" / "job.html").is_file() and (work / "job.json").is_file()


def test_two_outputs_of_one_name_are_refused(work: Path) -> None:
    (work / "sub").mkdir()
    code, _, err = run("report", "t.json", "-o", "r.json", "--json", "sub/../r.json")
    assert code == 73
    assert err == "traceq: error: sub/../r.json: is named twice as an output (also as r.json). Name each output once.\n"
    assert not (work / "r.json").exists()


def test_an_output_that_exists_needs_force_and_is_then_replaced(work: Path) -> None:
    (work / "old.db").write_text("precious")
    code, _, err = run("convert", "t.json", "-o", "old.db")
    assert code == 73 and err == "traceq: error: old.db: exists. Pass --force to overwrite it.\n"
    assert (work / "old.db").read_text() == "precious"
    assert run("convert", "t.json", "-o", "old.db", "--force")[0] == 0
    assert (work / "old.db").read_bytes().startswith(b"SQLite format 3\0")


def test_a_symbolic_link_output_is_written_through(work: Path) -> None:
    (work / "out").mkdir()
    (work / "latest.parquet").symlink_to("out/events.parquet")  # dangling until written
    assert run("convert", "t.json", "-o", "latest.parquet")[0] == 0
    assert (work / "latest.parquet").is_symlink()
    assert (work / "out" / "events.parquet").read_bytes()[:4] == b"PAR1"


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ["convert", "t.json", "-o", "missing/events.parquet"],
            "missing/events.parquet: cannot be written: directory {work}/missing does not exist. "
            "Create it first, or pass -o with a path in an existing directory.",
        ),
        (
            ["report", "t.json", "--json", "missing/r.json"],
            "missing/r.json: cannot be written: directory {work}/missing does not exist. "
            "Create it first, or pass -o with a path in an existing directory.",
        ),
        (["convert", "t.json", "-o", "ranks.parquet"], "ranks.parquet: is a directory. Pass -o with a file name."),
    ],
    ids=["convert into a missing directory", "report into a missing directory", "an output that is a directory"],
)
def test_an_output_that_cannot_be_written_is_one_line_before_any_import(
    work: Path, args: list[str], line: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    (work / "ranks.parquet").mkdir()
    monkeypatch.setattr("traceq.api.load", _never)
    monkeypatch.setattr("traceq.api.report", _never)
    before = snapshot(work)
    code, out, err = run(*args)
    assert (code, out) == (73, "")
    assert err == "traceq: error: " + line.format(work=work) + "\n"
    assert snapshot(work) == before


def _never(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("the output is checked before anything is imported")


def test_a_write_that_fails_half_way_keeps_the_previous_output_and_leaves_nothing_behind(
    work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (work / "events.parquet").write_text("the previous output")

    def half_then_full_disk(self: Any, path: str | Path) -> Path:
        Path(path).write_bytes(b"PAR1 half")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(trace_module.Trace, "to_parquet", half_then_full_disk)
    before = snapshot(work)
    code, _, err = run("convert", "t.json", "-o", "events.parquet", "--force")
    assert code == 73
    assert err == (
        "traceq: error: events.parquet: cannot be written (No space left on device). "
        "Pass -o with a path in a writable directory.\n"
    )
    assert snapshot(work) == before
