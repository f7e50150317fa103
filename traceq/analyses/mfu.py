"""Model FLOPs utilisation (MFU) and hardware FLOPs utilisation (HFU) of the profiled steps.

From the seeds (``../shared/seeds/000_*.txt``, section 3; ``003_*.txt``, "MFU vs HFU"):

* model FLOPs per token of a dense decoder, PaLM convention: ``F = 6Ψ + 12·L·h·s`` (Ψ the
  parameters in matmuls, L layers, h the attention width = heads × head dimension, s the
  sequence length);
* with full activation recomputation the hardware runs one more forward: ``4/3 · F``;
* ``MFU = τ·F / (n_gpu·P)`` with τ tokens per second over all GPUs and P the dense peak of one
  GPU (:mod:`traceq.analyses.gpu_peaks`).

Per step window of length ``dur_s``: ``MFU = tokens_per_step · F / (dur_s · n_gpu · P)``.  The
mean over the run is total FLOPs over total time (not the mean of the per-step ratios): every
step window of every device is one observation of the global step, so
``mean_mfu = tokens_per_step · F / (mean(dur_s) · n_gpu · P)``.  Definitions: ``docs/mfu.md``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from traceq.analyses.gpu_peaks import GpuPeak, match_gpu
from traceq.analyses.model import Analysis, Mfu, MfuStep
from traceq.errors import InvalidArgumentError
from traceq.meta import GpuInfo, SourceMeta

RECOMPUTE_FACTOR = 4.0 / 3.0
"""Hardware over model FLOPs with full activation recomputation (one extra forward: 8Ψ over 6Ψ)."""

PEAK_FLAG_SOURCE = "--peak-tflops"
"""``Mfu.peak_source`` when the peak was given rather than looked up."""


@dataclass(frozen=True)
class ModelSpec:
    """What the model computes per step: its shape and the global tokens per step, or the FLOPs.

    Give either the shape (``params``, ``layers``, ``attn_width``, ``seq_len``) with
    ``tokens_per_step``, or ``flops_per_step`` (global model FLOPs per step over all GPUs), with
    ``tokens_per_step`` optional.  ``recompute``: full activation recomputation (HFU = 4/3 MFU).
    """

    params: float | None = None
    """Ψ: parameters that take part in matmuls (embedding lookups excluded)."""
    layers: int | None = None
    """L: transformer layers."""
    attn_width: int | None = None
    """h: attention width, heads × head dimension (the hidden size in most models)."""
    seq_len: int | None = None
    """s: sequence length, tokens."""
    tokens_per_step: float | None = None
    """Global tokens per step, over all GPUs (global batch × sequence length)."""
    flops_per_step: float | None = None
    """Global model FLOPs per step over all GPUs, instead of the shape."""
    recompute: bool = False
    """Full activation recomputation: the hardware also runs a second forward (HFU = 4/3 · MFU)."""

    def __post_init__(self) -> None:
        shape = {"params": self.params, "layers": self.layers, "attn_width": self.attn_width, "seq_len": self.seq_len}
        given = [k for k, v in shape.items() if v is not None]
        if self.flops_per_step is not None:
            if given:
                raise InvalidArgumentError(
                    f"give either flops_per_step or the model shape, not both (got {', '.join(given)})",
                    hint="drop the shape or --flops-per-step",
                )
            _check_positive("flops_per_step", self.flops_per_step)
        else:
            missing = [k for k, v in shape.items() if v is None]
            if missing:
                raise InvalidArgumentError(
                    f"the model shape lacks {', '.join(missing)}",
                    hint="give params, layers, attn_width and seq_len, or flops_per_step",
                )
            if self.tokens_per_step is None:
                raise InvalidArgumentError(
                    "MFU from the model shape needs tokens_per_step",
                    hint="give the global tokens per step (global batch x sequence length)",
                )
            for key, value in shape.items():
                _check_positive(key, value)
        if self.tokens_per_step is not None:
            _check_positive("tokens_per_step", self.tokens_per_step)


def _check_positive(name: str, value: float | None) -> None:
    if value is None or not math.isfinite(value) or value <= 0:
        raise InvalidArgumentError(f"{name} must be a positive number, got {value!r}")


def model_flops_per_token(spec: ModelSpec) -> float:
    """``6Ψ + 12·L·h·s`` FLOPs per token (PaLM convention); ``flops_per_step / tokens_per_step``
    when the spec gives FLOPs; ``flops_per_step`` itself when it gives no tokens (a step is the
    unit of work)."""
    if spec.flops_per_step is not None:
        return spec.flops_per_step / (spec.tokens_per_step or 1.0)
    assert spec.params is not None and spec.layers is not None  # checked in __post_init__
    assert spec.attn_width is not None and spec.seq_len is not None
    return 6.0 * spec.params + 12.0 * spec.layers * spec.attn_width * spec.seq_len


def resolve_peak(gpu_names: Sequence[str | GpuInfo], peak_tflops: float | None = None) -> tuple[float, str]:
    """The dense peak FLOP/s of one GPU and where it came from.

    ``peak_tflops`` wins when given (source ``--peak-tflops``).  Otherwise every name is looked
    up in :data:`~traceq.analyses.gpu_peaks.GPU_PEAKS`; unknown names, no names, or names with
    different peaks raise :class:`~traceq.errors.InvalidArgumentError`.
    """
    if peak_tflops is not None:
        _check_positive("peak_tflops", peak_tflops)
        return peak_tflops * 1e12, PEAK_FLAG_SOURCE
    found: dict[str, GpuPeak] = {}
    unknown: list[str] = []
    for gpu in gpu_names:
        name, sm_count = (gpu, None) if isinstance(gpu, str) else (gpu.name, gpu.sm_count)
        if name is None:
            continue
        peak = match_gpu(name, sm_count=sm_count)
        if peak is None:
            unknown.append(name)
        else:
            found[name] = peak
    hint = "pass --peak-tflops with the dense bf16/fp16 tensor-core peak of one GPU"
    if unknown:
        raise InvalidArgumentError(f"no peak FLOP/s known for GPU {sorted(set(unknown))[0]!r}", hint=hint)
    if not found:
        raise InvalidArgumentError("the trace does not name its GPU, so its peak FLOP/s is unknown", hint=hint)
    peaks = {p.model: p for p in found.values()}
    if len({p.dense_tflops for p in peaks.values()}) > 1:
        raise InvalidArgumentError(f"the trace mixes GPUs with different peaks ({', '.join(sorted(peaks))})", hint=hint)
    name, peak = sorted(found.items())[0]
    return peak.dense_flops, f"{name} = {peak.model}, {peak.dense_tflops:g} TFLOP/s dense {peak.precision}"


def job_gpus(sources: Sequence[SourceMeta], analysis: Analysis) -> int:
    """The GPUs that share the tokens by default: the largest world size the sources state, else the
    number of devices in the analysis (at least 1)."""
    sizes = {s.world_size for s in sources if s.world_size}
    return max(sizes) if sizes else max(len(analysis.devices), 1)


def compute_mfu(
    analysis: Analysis,
    spec: ModelSpec,
    *,
    gpu_names: Sequence[str | GpuInfo],
    gpus: int,
    peak_tflops: float | None = None,
) -> Mfu:
    """MFU (and HFU when ``spec.recompute``) of every step window, and over the run.

    ``gpus`` is n_gpu, the GPUs that share ``tokens_per_step`` (the whole job, not only the
    profiled ranks); ``gpu_names`` are the trace's GPU names (or :class:`~traceq.meta.GpuInfo`)
    for the peak lookup, unless ``peak_tflops`` is given.  Only step windows count: a device
    without step ranges has no step time to divide by.  The mean is over the steady steps: warm-up
    steps (``StepBreakdown.warmup``) are listed but left out of it, unless the analysis was asked
    for all steps (or every step is warm-up).
    """
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
        raise InvalidArgumentError(f"gpus must be a positive integer, got {gpus!r}")
    peak_flops, peak_source = resolve_peak(gpu_names, peak_tflops)
    stepped = {(d.rank, d.device, d.pid) for d in analysis.devices if d.window == "steps"}
    windows = [s for s in analysis.steps if (s.rank, s.device, s.pid) in stepped and s.dur_ns > 0]
    steady = [s for s in windows if analysis.options.all_steps or not s.warmup] or windows
    if not windows:
        raise InvalidArgumentError(
            "MFU needs step windows and the trace has no step ranges",
            hint="record ProfilerStep#N or NVTX step ranges, or match yours with --step-pattern",
        )
    flops_per_token = model_flops_per_token(spec)
    tokens = spec.tokens_per_step if spec.tokens_per_step is not None else 1.0
    flops_per_step = tokens * flops_per_token
    hw_factor = RECOMPUTE_FACTOR if spec.recompute else None
    capacity = gpus * peak_flops  # FLOP/s of the whole job at peak

    def utilisation(dur_ns: int) -> float:
        return flops_per_step / (dur_ns * 1e-9 * capacity)

    steps = tuple(
        MfuStep(
            rank=s.rank,
            device=s.device,
            step=s.step,
            dur_ns=s.dur_ns,
            mfu=utilisation(s.dur_ns),
            hfu=None if hw_factor is None else hw_factor * utilisation(s.dur_ns),
            warmup=s.warmup,
        )
        for s in windows
    )
    mean_dur_ns = sum(s.dur_ns for s in steady) / len(steady)
    mean_mfu = flops_per_step / (mean_dur_ns * 1e-9 * capacity)
    return Mfu(
        model_flops_per_token=flops_per_token,
        hardware_flops_per_token=None if hw_factor is None else hw_factor * flops_per_token,
        tokens_per_step=tokens,
        gpus=gpus,
        peak_flops_per_gpu=peak_flops,
        peak_source=peak_source,
        mean_mfu=mean_mfu,
        mean_hfu=None if hw_factor is None else hw_factor * mean_mfu,
        steps=steps,
    )
