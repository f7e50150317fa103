"""The compiled readers are optional, and every way traceq reads without them gives the same reports.

Specification (issue 17, "install"): an install with no C compiler still installs (``setup.py``
marks the extensions optional), reads every trace with the pure-Python readers and merges intervals
with NumPy (``traceq.interval_union``) -- the same report, with one ``traceq: warning:`` line
saying why it is slower; ``TRACEQ_REQUIRE_EXTENSIONS=1`` makes a failed build fail the install.
The plain-C code an ARM or non-Linux build runs (no SSE2, no Linux page moves, no compiler
builtins: ``TRACEQ_PORTABLE_C=1``) is built and checked here on Linux, against the same reports.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

import pytest

from traceq import interval_union
from traceq.importers.compiled import READERS, build

from ..conftest import REPO, SAMPLES

TRACES = ("training_step.pt.trace.json.gz", "training_step.nsys.sqlite", "ranks")
KERNEL = "traceq._interval_kernels"
WARNING = "traceq: warning: traceq was installed without the Kineto JSON scanner and the nsys column reader"

# Run the CLI in a fresh interpreter after `prelude` has arranged which compiled modules it finds.
_RUNNER = """
import sys
{prelude}
from traceq.cli import main
sys.argv = ["traceq", *sys.argv[1:]]
main()
"""
# (the interval kernel too: the reports of an install built without a compiler)
_WITHOUT = "\n".join(
    f"sys.modules[{name!r}] = None  # an import of it raises ImportError" for name in (*READERS, KERNEL)
)
_FROM_BUILD = """
import importlib.machinery, importlib.util
for name, path in {paths!r}.items():
    spec = importlib.util.spec_from_loader(name, importlib.machinery.ExtensionFileLoader(name, path))
    sys.modules[name] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sys.modules[name])
assert sys.modules["traceq.importers.kineto._scanner"].SSE2 == 0
assert sys.modules["traceq.importers.kineto._scanner"].PAGE_MOVES == 0
"""


def _report(trace: str, out: Path, prelude: str = "") -> tuple[dict[str, Any], str]:
    """The JSON report of the shipped sample ``trace`` and the command's stderr."""
    options = ["--no-cache", "--no-html", "--json", str(out)]
    done = subprocess.run(
        [sys.executable, "-c", _RUNNER.format(prelude=prelude), "report", *options, str(SAMPLES / trace)],
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(out.read_text())
    return report, done.stderr


def _without_provenance(report: dict[str, Any]) -> dict[str, Any]:
    """``report`` less what says which parser read each source (the one thing allowed to differ)."""
    for source in report["source"]["files"]:
        source["properties"].pop("traceq.parser", None)
        source["warnings"] = [w for w in source["warnings"] if "compiled scanner" not in w]
    return report


def _build(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``setup.py build_ext`` of a copy of the sources, into ``tmp_path`` (the checkout untouched)."""
    source = tmp_path / "src"
    shutil.copytree(
        REPO / "traceq" / "importers",
        source / "traceq" / "importers",
        ignore=shutil.ignore_patterns("*.so", "*.py", "*.pyi"),
    )
    shutil.copy(REPO / "traceq" / "_interval_kernels.c", source / "traceq")
    shutil.copy(REPO / "setup.py", source)
    shutil.copy(REPO / "pyproject.toml", source)
    shutil.copy(REPO / "README.md", source)
    shutil.copy(REPO / "LICENSE", source)
    return subprocess.run(
        [
            sys.executable,
            "setup.py",
            "-q",
            "build_ext",
            "--build-lib",
            str(tmp_path / "lib"),
            "--build-temp",
            str(tmp_path / "tmp"),
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd=source,
        env={**os.environ, **env},
    )


def _built(tmp_path: Path) -> dict[str, str]:
    return {name: str(next((tmp_path / "lib").glob(name.replace(".", "/") + ".*"))) for name in READERS}


def _has_compiler() -> bool:
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    return shutil.which(compiler) is not None and Path(sysconfig.get_paths()["include"], "Python.h").exists()


needs_compiler = pytest.mark.skipif(not _has_compiler(), reason="needs a C compiler and Python's headers")


def test_this_install_has_both_compiled_readers_and_the_kernel_where_the_build_required_them() -> None:
    if os.environ.get("TRACEQ_REQUIRE_EXTENSIONS") != "1":
        pytest.skip("the install was not built with TRACEQ_REQUIRE_EXTENSIONS=1 (CI sets it)")
    assert build().missing == ()
    assert interval_union.COMPILED


@pytest.mark.parametrize("trace", TRACES)
def test_without_the_compiled_readers_the_report_is_the_same_and_one_warning_says_why(
    trace: str, tmp_path: Path
) -> None:
    compiled, compiled_stderr = _report(trace, tmp_path / "compiled.json")
    pure, pure_stderr = _report(trace, tmp_path / "pure.json", prelude=_WITHOUT)

    assert _without_provenance(pure) == _without_provenance(compiled)
    assert pure_stderr.count(WARNING) == 1, pure_stderr
    assert WARNING not in compiled_stderr


@needs_compiler
def test_the_plain_c_build_an_arm_or_non_linux_machine_runs_gives_the_same_reports(tmp_path: Path) -> None:
    built = _build(tmp_path, {"TRACEQ_PORTABLE_C": "1", "TRACEQ_REQUIRE_EXTENSIONS": "1"})
    assert built.returncode == 0, built.stderr
    prelude = _FROM_BUILD.format(paths=_built(tmp_path))

    for trace in TRACES:
        compiled, _ = _report(trace, tmp_path / f"{trace}.compiled.json")
        portable, stderr = _report(trace, tmp_path / f"{trace}.portable.json", prelude=prelude)
        assert portable == compiled, trace
        assert "warning" not in stderr


def test_with_no_compiler_the_build_goes_on_without_the_readers(tmp_path: Path) -> None:
    built = _build(tmp_path, {"CC": "false", "TRACEQ_REQUIRE_EXTENSIONS": ""})
    assert built.returncode == 0, built.stderr
    assert not list((tmp_path / "lib").rglob("*.so")) and not list((tmp_path / "lib").rglob("*.pyd"))
    assert built.stderr.count("failed") >= len(READERS) + 1  # and the interval kernel


def test_with_no_compiler_a_build_that_requires_the_readers_fails(tmp_path: Path) -> None:
    built = _build(tmp_path, {"CC": "false", "TRACEQ_REQUIRE_EXTENSIONS": "1"})
    assert built.returncode != 0
