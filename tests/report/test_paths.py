"""Pages name their traces by file name (a report attached to a ticket shows no ``/home/<user>``);
``--full-paths`` keeps the paths as given.  The JSON report keeps them: it is data."""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from click.testing import CliRunner

import traceq
from traceq.cli import cli
from traceq.report.paths import display_names, with_display_paths

from ..conftest import SAMPLES


def test_one_file_is_named_by_its_file_name() -> None:
    assert display_names(["/home/ada/runs/step.sqlite"]) == {"/home/ada/runs/step.sqlite": "step.sqlite"}


def test_several_files_are_named_below_the_folder_they_share() -> None:
    ranks = ["/home/ada/job/ranks/r0.json", "/home/ada/job/ranks/r1.json"]
    assert display_names(ranks) == {ranks[0]: "ranks/r0.json", ranks[1]: "ranks/r1.json"}
    pair = ["/home/ada/a/t.json", "/home/ada/b/t.json"]  # the same file name stays told apart
    assert display_names(pair) == {pair[0]: "a/t.json", pair[1]: "b/t.json"}


def invoke(*args: str | Path) -> str:
    """The command's stdout, less its 'wrote <output>' lines (the user's own output paths)."""
    result = CliRunner().invoke(cli, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return "".join(line for line in result.stdout.splitlines(keepends=True) if not line.startswith("wrote "))


def private(tmp_path: Path) -> tuple[Path, Path, Path]:
    """Two traces under a folder whose path must not leak (``tmp_path`` stands for ``/home/<user>``)."""
    folder = tmp_path / "home" / "ada" / "runs"
    folder.mkdir(parents=True)
    before = folder / "before.pt.trace.json.gz"
    after = folder / "after.nsys.sqlite"
    shutil.copy(SAMPLES / "clean_step.pt.trace.json.gz", before)
    shutil.copy(SAMPLES / "training_step.nsys.sqlite", after)
    return folder, before, after


def test_a_report_page_and_summary_show_the_file_name_not_its_path(tmp_path: Path) -> None:
    folder, _, trace = private(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    summary = invoke("report", trace, "-o", out / "r.html", "--json", out / "r.json", "--force")
    page = (out / "r.html").read_text()
    assert str(folder) not in page and str(tmp_path) not in page
    assert "<title>traceq report: after.nsys.sqlite</title>" in page
    assert str(tmp_path) not in summary and summary.startswith("after.nsys.sqlite\n")
    assert json.loads((out / "r.json").read_text())["source"]["files"][0]["path"] == str(trace)


def test_full_paths_keeps_the_paths_on_the_page(tmp_path: Path) -> None:
    _, _, trace = private(tmp_path)
    summary = invoke("report", trace, "-o", tmp_path / "r.html", "--full-paths")
    assert f"<title>traceq report: {trace}</title>" in (tmp_path / "r.html").read_text()
    assert summary.startswith(str(tmp_path))  # cut to the terminal's width


def test_a_diff_page_shows_the_file_names_unless_full_paths(tmp_path: Path) -> None:
    folder, before, after = private(tmp_path)
    summary = invoke("diff", before, after, "-o", tmp_path / "d.html")
    page = (tmp_path / "d.html").read_text()
    assert str(tmp_path) not in page and str(tmp_path) not in summary
    assert "runs/before.pt.trace.json.gz" in page and "runs/after.nsys.sqlite" in summary
    invoke("diff", before, after, "-o", tmp_path / "full.html", "--full-paths")
    assert str(folder) in (tmp_path / "full.html").read_text()


@dataclass(frozen=True)
class _Leaf:
    note: str
    count: int
    by_name: Mapping[str, int]


def test_every_string_that_holds_a_path_is_rewritten_keys_of_mappings_too() -> None:
    path = "/home/ada/runs/step.sqlite"
    value = (_Leaf(f"read {path}", 3, {path: 1, "other": 2}), [path], {"k": (path, 7)})
    assert with_display_paths(value, [path]) == (
        _Leaf("read step.sqlite", 3, {"step.sqlite": 1, "other": 2}),
        ["step.sqlite"],
        {"k": ("step.sqlite", 7)},
    )


def test_a_part_that_holds_no_path_is_returned_as_it_is_not_rebuilt() -> None:
    report = traceq.report(SAMPLES / "training_step.nsys.sqlite")
    shown = with_display_paths(report, [f.path for f in report.source.files])
    assert shown.source.files[0].path == "training_step.nsys.sqlite"
    # The steps (numbers, step names and a mapping of idle causes) hold no path: the same objects.
    assert shown.steps is report.steps
    assert shown.steps[0].idle_by_cause_ns is report.steps[0].idle_by_cause_ns
