"""Renderers are chosen by the output suffix; `traceq report` writes where it says it does."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

import traceq
from traceq.cli import cli, default_html_path
from traceq.errors import InvalidArgumentError
from traceq.report.render import HtmlRenderer, JsonRenderer, TextRenderer, renderer_for


@pytest.mark.parametrize(
    ("name", "kind"),
    [("r.html", HtmlRenderer), ("R.HTM", HtmlRenderer), ("r.json", JsonRenderer), ("r.txt", TextRenderer)],
)
def test_the_suffix_picks_the_renderer(name: str, kind: type) -> None:
    assert isinstance(renderer_for(Path(name)), kind)


def test_an_unknown_suffix_is_refused() -> None:
    with pytest.raises(InvalidArgumentError, match=r"cannot tell what to write to r\.pdf"):
        renderer_for(Path("r.pdf"))


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("runs/step.nsys-rep", "runs/step.report.html"),
        ("runs/step.sqlite", "runs/step.report.html"),
        ("runs/worker0.pt.trace.json.gz", "runs/worker0.pt.trace.report.html"),
        ("runs/ranks", "runs/ranks.report.html"),
        ("events.parquet", "events.report.html"),
    ],
)
def test_the_default_html_report_sits_next_to_the_input(given: str, expected: str) -> None:
    assert default_html_path((Path(given),)) == Path(expected)


@pytest.fixture()
def sample(samples: Path, tmp_path: Path) -> Path:
    return Path(shutil.copy(samples / "training_step.pt.trace.json.gz", tmp_path))


def test_report_writes_html_next_to_the_input_and_never_overwrites_without_force(sample: Path) -> None:
    result = CliRunner().invoke(cli, ["report", str(sample)])
    assert result.exit_code == 0, result.output
    html = sample.parent / "training_step.pt.trace.report.html"
    assert html.read_text().startswith("<!DOCTYPE html>")
    assert f"wrote {html}" in result.stdout
    again = CliRunner().invoke(cli, ["report", str(sample)])
    assert again.exit_code == 73
    assert "exists" in again.stderr and "--force" in again.stderr
    assert CliRunner().invoke(cli, ["report", str(sample), "--force"]).exit_code == 0


def test_report_output_format_follows_the_suffix(sample: Path) -> None:
    out = sample.parent / "summary.txt"
    result = CliRunner().invoke(cli, ["report", str(sample), "-o", str(out)])
    assert result.exit_code == 0, result.output
    text = out.read_text()
    assert "where the step time went" in text and "\x1b[" not in text
    as_json = sample.parent / "r.json"
    assert CliRunner().invoke(cli, ["report", str(sample), "-o", str(as_json)]).exit_code == 0
    assert json.loads(as_json.read_text())["schema_version"] == 1


def test_no_html_writes_nothing(sample: Path) -> None:
    result = CliRunner().invoke(cli, ["report", str(sample), "--no-html"])
    assert result.exit_code == 0
    assert sorted(p.name for p in sample.parent.iterdir()) == [sample.name]


def test_mfu_options_add_the_mfu_section(sample: Path) -> None:
    args = ["report", str(sample), "--no-html", "--flops-per-step", "1e13", "--gpus", "8", "--peak-tflops", "989"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert "model FLOPs utilisation" in result.stdout
    # 1e13 FLOP per step over 8 GPUs at 989 TFLOP/s: total FLOPs over total step time
    steps = traceq.report(traceq.load(sample)).steps
    expected = 1e13 * len(steps) / (sum(s.dur_ns for s in steps) * 1e-9 * 8 * 989e12)
    assert f"MFU {100 * expected:.1f}% over {len(steps)} step windows, 8 GPUs" in result.stdout


def test_an_incomplete_model_shape_is_one_line(sample: Path) -> None:
    result = CliRunner().invoke(cli, ["report", str(sample), "--no-html", "--params", "7e9"])
    assert result.exit_code == 2
    assert "the model shape lacks" in result.stderr
