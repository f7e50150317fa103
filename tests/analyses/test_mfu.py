"""MFU and HFU: the seeds' worked examples, per-step and mean definitions, and the peak table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import traceq
from traceq.analyses import analyze
from traceq.analyses.gpu_peaks import GPU_PEAKS, match_gpu, normalise_gpu_name
from traceq.analyses.mfu import ModelSpec, compute_mfu, model_flops_per_token, resolve_peak
from traceq.analyses.model import Analysis
from traceq.errors import InvalidArgumentError
from traceq.meta import GpuInfo

from ..builders import Row, kernel, step, table

S = 1_000_000_000  # ns per second

LLAMA2_7B: dict[str, Any] = dict(params=6.74e9, layers=32, attn_width=4096, seq_len=4096)


def steps_of(*durations_ns: int, devices: int = 1) -> Analysis:
    """An analysis whose every device has back-to-back step windows of the given lengths."""
    rows: list[Row] = []
    for dev in range(devices):
        pid, t = 100 + dev, 0
        for n, dur in enumerate(durations_ns):
            rows += [step(t, t + dur, n, pid=pid, tid=pid, rank=dev), kernel(t, t + dur, device=dev, pid=pid, rank=dev)]
            t += dur
    return analyze(table(*rows))


# --- the seeds' worked examples ----------------------------------------------------------------------


def test_model_flops_per_token_of_llama2_7b() -> None:
    """Seed 000, section 4: F = 6Ψ + 12·L·h·s = 4.044e10 + 6.44e9 = 4.688e10, attention 13.7%."""
    flops = model_flops_per_token(ModelSpec(**LLAMA2_7B, tokens_per_step=1))
    assert flops == 6 * 6.74e9 + 12 * 32 * 4096 * 4096
    assert f"{flops:.4g}" == "4.688e+10"
    assert f"{12 * 32 * 4096 * 4096 / flops:.1%}" == "13.7%"


def test_7b_on_32_h100s_is_43_1_percent_mfu_and_57_5_percent_hfu() -> None:
    """Seed 000, section 4: 256 × 4096 tokens per 3.60 s step on 32 H100s, full recomputation."""
    spec = ModelSpec(**LLAMA2_7B, tokens_per_step=256 * 4096, recompute=True)
    mfu = compute_mfu(steps_of(3_600_000_000), spec, gpu_names=["NVIDIA H100 80GB HBM3"], gpus=32)
    assert f"{mfu.mean_mfu:.1%}" == "43.1%"
    assert mfu.mean_hfu is not None and f"{mfu.mean_hfu:.1%}" == "57.5%"
    assert mfu.peak_flops_per_gpu == 989e12
    assert mfu.peak_source == "NVIDIA H100 80GB HBM3 = H100 SXM, 989 TFLOP/s dense bf16"
    assert mfu.tokens_per_step == 1_048_576 and mfu.gpus == 32
    assert mfu.hardware_flops_per_token == pytest.approx(4 / 3 * mfu.model_flops_per_token)
    (only,) = mfu.steps
    assert (only.mfu, only.hfu) == (mfu.mean_mfu, mfu.mean_hfu)
    assert only.dur_ns == 3_600_000_000 and only.step == 0 and only.rank == 0


def test_the_1_2b_exercise_is_42_5_percent_mfu_and_56_7_percent_hfu() -> None:
    """Seed 000, section 8: 6Ψ = 7.2e9, L = 24, h = s = 2048, 400,000 tokens/s on 8 H100s."""
    spec = ModelSpec(params=7.2e9 / 6, layers=24, attn_width=2048, seq_len=2048, tokens_per_step=4e5, recompute=True)
    mfu = compute_mfu(steps_of(S), spec, gpu_names=["NVIDIA H100 80GB HBM3"], gpus=8)
    assert f"{mfu.mean_mfu:.1%}" == "42.5%"
    assert mfu.mean_hfu is not None and f"{mfu.mean_hfu:.1%}" == "56.7%"


def test_without_the_attention_term_the_7b_mfu_is_37_2_percent() -> None:
    """Seed 000, section 4 ("37.2% without the attention term"): FLOPs given directly, 6Ψ per token."""
    tokens = 256 * 4096
    spec = ModelSpec(flops_per_step=6 * 6.74e9 * tokens, tokens_per_step=tokens)
    mfu = compute_mfu(steps_of(3_600_000_000), spec, gpu_names=["NVIDIA H100 80GB HBM3"], gpus=32)
    assert f"{mfu.mean_mfu:.1%}" == "37.2%"
    assert mfu.mean_hfu is None and mfu.hardware_flops_per_token is None
    assert mfu.model_flops_per_token == 6 * 6.74e9


def test_palm_540b_is_46_2_percent_with_its_attention_width_and_a_given_peak() -> None:
    """Seed 000, section 5: PaLM 540B on 6144 TPU v4 chips (275 TFLOP/s), attention width 48 × 256."""
    spec = ModelSpec(params=540.35e9, layers=118, attn_width=48 * 256, seq_len=2048, tokens_per_step=238.3e3)
    mfu = compute_mfu(steps_of(S), spec, gpu_names=["TPU v4"], gpus=6144, peak_tflops=275)
    assert f"{mfu.mean_mfu:.1%}" == "46.2%"
    assert mfu.peak_source == "--peak-tflops"


# --- per step and mean -----------------------------------------------------------------------------


def test_per_step_mfu_and_the_mean_is_total_flops_over_total_time() -> None:
    spec = ModelSpec(flops_per_step=8 * 312e12)  # a step at peak on 8 A100s would take 1 s
    mfu = compute_mfu(steps_of(S, 3 * S, devices=2), spec, gpu_names=["NVIDIA A100-SXM4-80GB"], gpus=8)
    assert [(s.rank, s.step) for s in mfu.steps] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert [s.mfu for s in mfu.steps] == pytest.approx([1.0, 1 / 3, 1.0, 1 / 3])
    assert mfu.mean_mfu == pytest.approx(0.5)  # 2 steps' FLOPs in 4 s, not the mean of 1 and 1/3
    assert mfu.tokens_per_step == 1.0  # FLOPs given without tokens: the step is the unit of work
    assert all(s.hfu is None for s in mfu.steps)


def test_a_trace_without_step_ranges_has_no_mfu() -> None:
    analysis = analyze(table(kernel(0, 100)))
    with pytest.raises(InvalidArgumentError, match="step ranges"):
        compute_mfu(analysis, ModelSpec(flops_per_step=1e12), gpu_names=[], gpus=1, peak_tflops=100)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(params=1e9, layers=2, attn_width=64), "lacks seq_len"),
        (dict(LLAMA2_7B), "needs tokens_per_step"),
        (dict(LLAMA2_7B, tokens_per_step=1, flops_per_step=1e12), "not both"),
        (dict(LLAMA2_7B, tokens_per_step=0), "tokens_per_step must be a positive number"),
        (dict(flops_per_step=-1.0), "flops_per_step must be a positive number"),
        (dict(params=float("nan"), layers=2, attn_width=64, seq_len=8, tokens_per_step=1), "params must be"),
    ],
)
def test_an_incomplete_or_contradictory_model_is_an_error(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        ModelSpec(**kwargs)


def test_gpus_must_be_a_positive_integer() -> None:
    with pytest.raises(InvalidArgumentError, match="gpus must be a positive integer"):
        compute_mfu(steps_of(S), ModelSpec(flops_per_step=1e12), gpu_names=["NVIDIA H200"], gpus=0)


# --- the peak table ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "model", "tflops"),
    [
        ("NVIDIA H100 80GB HBM3", "H100 SXM", 989),
        ("NVIDIA H100 PCIe", "H100 PCIe", 756),
        ("NVIDIA H100 NVL", "H100 NVL", 835),
        ("NVIDIA H200", "H200", 989),
        ("NVIDIA H20", "H20", 148),
        ("NVIDIA GH200 480GB", "GH200", 989),
        ("NVIDIA B200", "B200", 2250),
        ("NVIDIA A100-SXM4-80GB", "A100", 312),
        ("NVIDIA A100-SXM4-40GB", "A100", 312),
        ("NVIDIA A100 80GB PCIe", "A100", 312),
        ("NVIDIA A100-PCIE-40GB", "A100", 312),
        ("NVIDIA A100-PG509-200", "A100", 312),
        ("NVIDIA A30", "A30", 165),
        ("NVIDIA A10", "A10", 125),
        ("NVIDIA A10G", "A10G", 125),
        ("NVIDIA L4", "L4", 121),
        ("NVIDIA L40S", "L40S", 362.05),
        ("Tesla V100-SXM2-32GB", "V100 SXM2", 125),
        ("Tesla V100-SXM2-16GB", "V100 SXM2", 125),
        ("Tesla V100-DGXS-32GB", "V100 SXM2", 125),
        ("Tesla V100-PCIE-16GB", "V100 PCIe", 112),
        ("Tesla T4", "T4", 65),
        ("Quadro RTX 6000", "Quadro RTX 6000", 130.5),
        ("NVIDIA GeForce RTX 3060", "RTX 3060", 25.5),
        ("GeForce RTX 3080", "RTX 3080", 59.5),
        ("NVIDIA GeForce RTX 3090", "RTX 3090", 71),
        ("NVIDIA GeForce RTX 4090", "RTX 4090", 165.2),
        ("AMD Instinct MI250X", "MI250X GCD", 191.5),
        ("AMD Instinct MI250", "MI250 GCD", 181.05),
        ("AMD Instinct MI300X", "MI300X", 1307.4),
        ("nvidia h100 80gb hbm3", "H100 SXM", 989),
    ],
)
def test_gpu_names_find_their_dense_peak(name: str, model: str, tflops: float) -> None:
    peak = match_gpu(name)
    assert peak is not None and (peak.model, peak.dense_tflops) == (model, tflops)
    assert peak.dense_flops == tflops * 1e12


@pytest.mark.parametrize(
    "name",
    [
        "NVIDIA GeForce RTX 3060 Ti",
        "NVIDIA GeForce RTX 3080 Laptop GPU",
        "NVIDIA GeForce RTX 4090 D",
        "NVIDIA RTX 6000 Ada Generation",
        "Intel Data Center GPU Max 1550",
        "AMD Radeon Graphics",
    ],
)
def test_other_chips_and_variants_match_nothing(name: str) -> None:
    assert match_gpu(name) is None


def test_generic_amd_names_are_told_apart_by_compute_units() -> None:
    """ROCm names an MI250's GCD ``AMD Radeon Graphics``; the sample trace reports 104 CUs."""
    assert match_gpu("AMD Radeon Graphics", sm_count=104) == GPU_PEAKS["MI250 GCD"]
    assert match_gpu("AMD Instinct MI250X / MI250", sm_count=110) == GPU_PEAKS["MI250X GCD"]
    assert match_gpu("AMD Instinct MI250X / MI250") is None
    peak, source = resolve_peak([GpuInfo(device=0, name="AMD Radeon Graphics", sm_count=104)])
    assert peak == 181.05e12 and "MI250 GCD" in source


def test_the_table_lists_dense_peaks_only() -> None:
    """Every peak is the dense figure: where the source quotes only a with-sparsity number, half of it."""
    assert normalise_gpu_name("NVIDIA A100-SXM4-80GB") == "nvidia a100 sxm4 80gb"
    for peak in GPU_PEAKS.values():
        assert peak.dense_tflops > 0 and peak.precision in ("bf16", "fp16") and peak.source


def test_an_unknown_gpu_needs_peak_tflops() -> None:
    with pytest.raises(InvalidArgumentError, match=r"no peak FLOP/s known for GPU 'Mystery GPU'.*--peak-tflops"):
        resolve_peak(["Mystery GPU"])
    with pytest.raises(InvalidArgumentError, match=r"does not name its GPU.*--peak-tflops"):
        resolve_peak([GpuInfo(device=0)])
    with pytest.raises(InvalidArgumentError, match=r"mixes GPUs .*A100, H100 SXM"):
        resolve_peak(["NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3"])
    assert resolve_peak(["Mystery GPU"], 123.0) == (123e12, "--peak-tflops")
    assert resolve_peak(["Tesla V100-SXM2-32GB", "Tesla V100-DGXS-32GB"])[0] == 125e12


@pytest.mark.real
def test_every_gpu_named_in_the_sample_traces_has_a_peak(shared_traces: Path) -> None:
    seen = {}
    for path in sorted([*shared_traces.glob("**/*.sqlite"), *shared_traces.glob("**/*.json.gz")]):
        for gpu in traceq.load(path).meta.gpus:
            if gpu.name is not None:
                seen[gpu.name] = resolve_peak([gpu])[0]
    assert {
        "Tesla V100-SXM2-32GB",
        "NVIDIA A100-SXM4-80GB",
        "NVIDIA H200",
        "Quadro RTX 6000",
        "NVIDIA GeForce RTX 3060",
        "NVIDIA GeForce RTX 3080",
        "AMD Radeon Graphics",
    } <= set(seen)
    assert seen["AMD Radeon Graphics"] == 181.05e12  # the MI250 GCD
