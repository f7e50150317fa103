"""``traceq report``'s analysis options reach :class:`~traceq.analyses.options.Options`:
``--comm-pattern``, ``--no-default-comm-patterns``, ``--input-pattern`` and ``--all-steps``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from traceq import api
from traceq.analyses.options import Options
from traceq.cli import cli


def run(*args: str | Path) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, [str(a) for a in args])
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture()
def asked(monkeypatch: pytest.MonkeyPatch) -> list[Options]:
    """The Options every report is built with."""
    seen: list[Options] = []
    real = api.report_paths

    def spy(paths: Any, options: Options, **kw: Any) -> Any:
        seen.append(options)
        return real(paths, options, **kw)

    monkeypatch.setattr(api, "report_paths", spy)
    return seen


def test_the_flags_become_options(samples: Path, asked: list[Options]) -> None:
    code, _, err = run(
        "report",
        samples / "training_step.pt.trace.json.gz",
        "--no-html",
        "--comm-pattern",
        "alltoall",
        "--comm-pattern",
        "dispatch<",
        "--no-default-comm-patterns",
        "--input-pattern",
        "^load_batch$",
        "--all-steps",
    )
    assert code == 0, err
    (options,) = asked
    assert options.comm_patterns == ("alltoall", "dispatch<")
    assert options.default_comm_patterns is False
    assert (options.input_pattern, options.all_steps) == ("^load_batch$", True)
    code, _, err = run("report", samples / "training_step.pt.trace.json.gz", "--no-html")
    assert code == 0, err
    assert asked[1] == Options()


def test_without_the_defaults_nccl_is_compute_and_a_pattern_brings_it_back(samples: Path, tmp_path: Path) -> None:
    def devices(*extra: str) -> list[dict[str, Any]]:
        out = tmp_path / "r.json"
        code, _, err = run("report", samples / "ranks", "--no-html", "-j", "1", "-o", out, "--force", *extra)
        assert code == 0, err
        found: list[dict[str, Any]] = json.loads(out.read_text())["devices"]
        return found

    default = devices()
    assert all(d["comm_ns"] > 0 for d in default)
    assert all(d["comm_ns"] == 0 for d in devices("--no-default-comm-patterns"))
    again = devices("--no-default-comm-patterns", "--comm-pattern", "^nccl")
    keys = ("dur_ns", "compute_ns", "comm_ns", "exposed_comm_ns", "idle_ns")
    assert [[d[k] for k in keys] for d in again] == [[d[k] for k in keys] for d in default]


def test_a_bad_pattern_is_one_line_before_anything_is_read(tmp_path: Path) -> None:
    code, out, err = run("report", tmp_path / "missing.json", "--no-html", "--comm-pattern", "(")
    assert code == 2 and out == ""
    assert err.startswith("traceq: error: comm pattern '(' is not a valid regex") and err.count("\n") == 1
    code, _, err = run("report", tmp_path / "missing.json", "--no-html", "--input-pattern", "[")
    assert code == 2 and "input pattern '['" in err


def test_the_help_documents_them() -> None:
    code, out, _ = run("report", "--help")
    assert code == 0
    for flag in ("--comm-pattern REGEX", "--no-default-comm-patterns", "--input-pattern REGEX", "--all-steps"):
        assert flag in out
