"""Kernel names normalised for matching across builds, and the rounds of matching."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import traceq
from traceq.analyses.model import KernelStat
from traceq.diff.kernels import is_complete, kernel_diff, normalise_kernel_name
from traceq.report.model import Report


@pytest.mark.parametrize(
    ("name", "normalised"),
    [
        ("triton_poi_fused_add_0", "triton_poi_fused_add"),
        ("triton_poi_fused_add_1", "triton_poi_fused_add"),
        ("triton_red_fused_native_layer_norm_12", "triton_red_fused_native_layer_norm"),
        ("triton_poi_fused_add_mul_0d1d2de", "triton_poi_fused_add_mul"),  # Triton's specialisation signature
        ("triton_per_fused_sum_3_0d1d2de3", "triton_per_fused_sum"),
        ("triton_tem_fused_mm_0_5c3f1a9be2", "triton_tem_fused_mm"),  # a hash
        ("triton_poi_fused_max_pool2d_with_indices_0", "triton_poi_fused_max_pool2d_with_indices"),
        (
            "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
            "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)",
            "at::native::vectorized_elementwise_kernel<…>",
        ),
        ("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", "ncclDevKernel_SendRecv"),
        ("ampere_sgemm_128x64_tn", "ampere_sgemm_128x64_tn"),  # not Triton: its numbers stay
        ("gemm_0", "gemm_0"),
        ("kernel (int)", "kernel"),
        ("f<a<b>(x)", "f<a<b>"),  # unbalanced brackets: left unfolded
        ("f<a>>b", "f<a>>b"),
    ],
)
def test_a_kernel_name_normalised(name: str, normalised: str) -> None:
    assert normalise_kernel_name(name) == normalised


def _with_kernels(report: Report, kernels: dict[str, tuple[int, int]], names: int | None = None) -> Report:
    stats = tuple(KernelStat(n, c, t, t // c, t, 0.0) for n, (c, t) in kernels.items())
    return dataclasses.replace(report, kernels=stats, kernel_names=len(stats) if names is None else names)


@pytest.fixture(scope="module")
def base(samples: Path) -> Report:
    return traceq.report(samples / "training_step.pt.trace.json.gz")


def test_matching_by_name_then_by_normalised_name_then_added_and_removed(base: Report) -> None:
    windows = len(base.steps)
    before = _with_kernels(
        base,
        {
            "gemm": (4, 400 * windows),
            "triton_poi_fused_add_0": (4, 100 * windows),
            "triton_poi_fused_add_7": (4, 50 * windows),  # two builds of one kernel on the same side count together
            "old_kernel": (1, 30 * windows),
        },
    )
    after = _with_kernels(
        base, {"gemm": (4, 380 * windows), "triton_poi_fused_add_2": (4, 160 * windows), "new_kernel": (2, 5 * windows)}
    )
    rows = {r.name: r for r in kernel_diff(before, after).changes}
    assert (rows["gemm"].status, rows["gemm"].matched_by, rows["gemm"].delta_per_step_ns) == ("faster", "name", -20)
    fused = rows["triton_poi_fused_add"]
    assert (fused.status, fused.matched_by) == ("slower", "normalised name")
    assert fused.names_before == ("triton_poi_fused_add_0", "triton_poi_fused_add_7")
    assert (fused.per_step_before_ns, fused.per_step_after_ns, fused.count_before) == (150, 160, 8)
    assert (rows["old_kernel"].status, rows["new_kernel"].status) == ("removed", "added")
    assert [r.name for r in kernel_diff(before, after).changes][:2] == ["old_kernel", "gemm"]  # by |change| per step


def test_a_truncated_kernel_list_shows_the_others_as_unlisted(base: Report) -> None:
    before = _with_kernels(base, {"gemm": (1, 10), "k2": (1, 5)}, names=40)
    after = _with_kernels(base, {"gemm": (1, 10), "k3": (1, 5)})
    assert not is_complete(before) and is_complete(after)
    status = {r.name: r.status for r in kernel_diff(before, after).changes}
    assert status == {"gemm": "unchanged", "k2": "removed", "k3": "unlisted"}


def test_an_older_saved_report_counts_as_complete_only_below_the_default_top_kernels(base: Report) -> None:
    old = dataclasses.replace(base, kernel_names=None)
    assert is_complete(dataclasses.replace(old, kernels=old.kernels[:19]))
    assert not is_complete(dataclasses.replace(old, kernels=(old.kernels * 2)[:20]))


def test_communication_kernels_are_classed_as_the_side_counted_them(samples: Path) -> None:
    report = traceq.report(samples / "ranks", top_kernels=1000)
    classes = {r.name: r.kernel_class for r in kernel_diff(report, report).changes}
    comm = {k.name for d in report.devices for k in d.comm_kernels}
    assert comm and all(classes[n] == "comm" for n in comm)
    assert all(r.status == "unchanged" for r in kernel_diff(report, report).changes)
