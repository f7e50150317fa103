"""The generator tests' written files: the single-rank default and a 4-rank job, in both formats."""

from __future__ import annotations

from pathlib import Path

import pytest

from tracegen import write_kineto_json, write_kineto_ranks, write_nsys_sqlite

from .planted import timeline


@pytest.fixture(scope="session")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The single-rank default and the 4-rank straggler job, written in both formats."""
    out = tmp_path_factory.mktemp("synthetic")
    paths = {
        "nsys": write_nsys_sqlite(timeline("training_step"), out / "training_step.nsys.sqlite"),
        "kineto": write_kineto_json(timeline("training_step"), out / "training_step.pt.trace.json.gz"),
        "job_nsys": write_nsys_sqlite(timeline("straggler_job"), out / "job.nsys.sqlite"),
    }
    for r, p in enumerate(write_kineto_ranks(timeline("straggler_job"), out / "job")):
        paths[f"job_rank{r}"] = p
    return paths
