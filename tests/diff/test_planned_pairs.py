"""Issue 15's hand-built pairs: traceq diff finds, to the ns, the change each pair was planned with.

Each pair of ``tracegen.planned.scenarios.pairs`` is written as nsys exports and as Kineto traces;
the diff of the two files must give, per steady step, each side's step and parts as the two planted
truths state them (:func:`~tracegen.planned.scenarios.pairs.steady_means`, arithmetic on the plan,
no traceq code) and the change the pair states by hand; the findings resolved, new and changed; and
for the fusion pair the kernels removed, added and matched by normalised name, and the class times.
"""

from __future__ import annotations

import pytest

import traceq
from tracegen.planned import FORMATS, Format
from tracegen.planned.scenarios import BY_PAIR, PAIRS
from tracegen.planned.scenarios.pairs import PARTS, steady_means
from traceq.diff.labels import FINDING_LABELS
from traceq.diff.model import Diff

from ..analyses.planted import PlantedTraces

CASES = [pytest.param(p.name, fmt, id=f"{p.name}-{fmt}") for p in PAIRS for fmt in FORMATS]


def diff_of(planted: PlantedTraces, name: str, fmt: Format) -> Diff:
    pair = BY_PAIR[name]
    return traceq.diff(planted.path(pair.before, fmt), planted.path(pair.after, fmt), cache=False)


@pytest.mark.parametrize(("name", "fmt"), CASES)
def test_the_step_change_decomposes_as_planted_to_the_ns(planted_pairs: PlantedTraces, name: str, fmt: Format) -> None:
    pair = BY_PAIR[name]
    d = diff_of(planted_pairs, name, fmt).decomposition
    before, after = steady_means(pair.before), steady_means(pair.after)
    assert (d.step_before_ns, d.step_after_ns) == (float(before["step"]), float(after["step"]))
    assert d.delta_ns == pair.delta_ns["step"]
    terms = {t.key: t for t in d.terms}
    assert list(terms) == list(PARTS)
    for key in PARTS:
        assert (terms[key].before_ns, terms[key].after_ns) == (float(before[key]), float(after[key])), key
        assert terms[key].delta_ns == pair.delta_ns.get(key, 0), key


@pytest.mark.parametrize(("name", "fmt"), CASES)
def test_the_one_device_pairs_with_itself_and_decomposes_the_same(
    planted_pairs: PlantedTraces, name: str, fmt: Format
) -> None:
    diff = diff_of(planted_pairs, name, fmt)
    [device] = diff.devices
    assert device.decomposition == diff.decomposition
    ranked = device.rank_before is not None
    assert diff.basis == ("rank and GPU" if ranked else "process order and GPU")
    assert diff.warnings == ()
    assert diff.before.steps.count == diff.after.steps.count == len(BY_PAIR[name].before.devices[0].steps)


@pytest.mark.parametrize(("name", "fmt"), CASES)
def test_the_findings_resolved_new_and_changed(planted_pairs: PlantedTraces, name: str, fmt: Format) -> None:
    pair = BY_PAIR[name]
    diff = diff_of(planted_pairs, name, fmt)
    status = {f.id: f.status for f in diff.findings}
    assert sorted(k for k, v in status.items() if v == "resolved") == sorted(pair.resolved)
    assert sorted(k for k, v in status.items() if v == "new") == sorted(pair.new)
    assert set(pair.changed) <= {k for k, v in status.items() if v == "changed"}


@pytest.mark.parametrize(("name", "fmt"), CASES)
def test_the_verdict_names_the_change_its_largest_part_and_the_resolved_findings(
    planted_pairs: PlantedTraces, name: str, fmt: Format
) -> None:
    pair = BY_PAIR[name]
    text = diff_of(planted_pairs, name, fmt).verdict
    largest = max((k for k in PARTS if pair.delta_ns.get(k)), key=lambda k: abs(pair.delta_ns[k]))
    labels = {
        "input": "input stall",
        "sync": "sync idle",
        "compute": "compute",
        "exposed_comm": "exposed communication",
    }
    assert text.startswith("step " + ("+" if pair.delta_ns["step"] > 0 else "\u2212"))
    assert labels[largest] in text
    for fid in pair.resolved:
        assert f"resolved the {FINDING_LABELS[fid]} finding" in text


@pytest.mark.parametrize("fmt", FORMATS)
def test_fusion_shows_as_kernels_removed_and_added_and_the_class_time_down(
    planted_pairs: PlantedTraces, fmt: Format
) -> None:
    pair = BY_PAIR["kernels_fused"]
    kernels = diff_of(planted_pairs, "kernels_fused", fmt).kernels
    by_status: dict[str, list[str]] = {}
    for change in kernels.changes:
        by_status.setdefault(change.status, []).extend(change.names_before or change.names_after)
    assert sorted(by_status["removed"]) == sorted(pair.kernels.removed)
    assert sorted(by_status["added"]) == sorted(pair.kernels.added)
    [renumbered] = [c for c in kernels.changes if c.matched_by == "normalised name"]
    [(before, after)] = pair.kernels.matched_by_normalised_name
    assert (renumbered.names_before, renumbered.names_after) == ((before,), (after,))
    assert renumbered.status == "unchanged" and renumbered.name == "triton_red_fused_sum"
    classes = {c.kernel_class: c for c in kernels.classes}
    assert {k: classes[k].delta_per_step_ns for k in pair.kernels.class_delta_ns} == pair.kernels.class_delta_ns
    assert (classes["elementwise"].removed, classes["elementwise"].added) == (4, 1)
    assert kernels.changes[0].delta_per_step_ns == 60_000  # the fused kernel: largest change first
    assert kernels.complete_before and kernels.complete_after


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_slower_kernel_shows_as_slower_by_its_time_per_step(planted_pairs: PlantedTraces, fmt: Format) -> None:
    kernels = diff_of(planted_pairs, "regression", fmt).kernels
    [gemm] = kernels.changes
    assert (gemm.status, gemm.matched_by, gemm.kernel_class) == ("slower", "name", "gemm")
    assert (gemm.per_step_before_ns, gemm.per_step_after_ns) == (400_000, 460_000)
    assert gemm.count_before == gemm.count_after == 16


@pytest.mark.parametrize("fmt", FORMATS)
def test_fewer_syncs_per_step_after_the_sync_is_removed(planted_pairs: PlantedTraces, fmt: Format) -> None:
    diff = diff_of(planted_pairs, "sync_removed", fmt)
    assert (diff.pace_before.syncs_per_step, diff.pace_after.syncs_per_step) == (2, 1)
    assert (diff.pace_before.launches_per_step, diff.pace_after.launches_per_step) == (6, 5)
