"""The JSON diff: valid against the checked-in schema, deterministic, and a report of it in plain values."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema

import traceq
from traceq.diff.model import diff_json_schema

from ..conftest import REPO

SCHEMA = json.loads((REPO / "schemas" / "diff.schema.json").read_text())


def test_the_checked_in_schema_is_the_generated_one() -> None:
    assert diff_json_schema() == SCHEMA


def test_a_diff_validates_against_the_schema_and_is_deterministic(samples: Path) -> None:
    before, after = samples / "ranks", samples / "training_step.pt.trace.json.gz"
    payload = traceq.diff(before, after).to_dict()
    jsonschema.validate(payload, SCHEMA)
    assert payload["schema_version"] == 1 and payload["basis"] == "per-rank mean"
    again = json.dumps(traceq.diff(before, after).to_dict(), sort_keys=True)
    assert json.dumps(payload, sort_keys=True) == again


def test_a_diff_with_paired_devices_and_mfu_validates(samples: Path) -> None:
    model = traceq.ModelSpec(flops_per_step=1e15, tokens_per_step=4096)
    payload = traceq.diff(samples / "ranks", samples / "ranks", model=model, peak_tflops=989).to_dict()
    jsonschema.validate(payload, SCHEMA)
    assert len(payload["devices"]) == 4 and payload["mfu"]["mfu_before"] == payload["mfu"]["mfu_after"]
    assert payload["verdict"].startswith("step unchanged")
