"""The dense tensor-core peak of a GPU, looked up by the name the trace gives it.

MFU divides by the *dense* (no structured sparsity) bf16/fp16 tensor-core peak of one GPU
(``../shared/seeds/000_*.txt``, section 3: "use the dense peak (989 TFLOP/s for H100 bf16), not
the 'with sparsity' number"). :data:`GPU_PEAKS` holds the vendors' datasheet numbers (sources in
``docs/mfu.md``); :func:`match_gpu` finds the entry for a name such as ``NVIDIA H100 80GB HBM3``
(TARGET_INFO_GPU in nsys, ``deviceProperties`` in Kineto), case-insensitively and ignoring
punctuation.  ROCm shows each of an MI250/MI250X's two dies (GCDs) as one GPU, often under the
generic name ``AMD Radeon Graphics``: the table's peak is per GCD, and the generic name is
resolved by its compute-unit count (``sm_count``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final


@dataclass(frozen=True)
class GpuPeak:
    """One GPU model's dense tensor-core peak."""

    model: str
    """The model, as the table names it (``H100 SXM``)."""
    dense_tflops: float
    """Dense (no sparsity) peak, TFLOP/s, in :attr:`precision`."""
    precision: str
    """``bf16`` where the GPU has bf16 tensor cores, else ``fp16`` (V100, T4, Turing)."""
    source: str
    """The datasheet the number comes from."""

    @property
    def dense_flops(self) -> float:
        """The peak in FLOP/s."""
        return self.dense_tflops * 1e12


def _peaks(*rows: tuple[str, float, str, str]) -> Mapping[str, GpuPeak]:
    return MappingProxyType({model: GpuPeak(model, tflops, prec, src) for model, tflops, prec, src in rows})


GPU_PEAKS: Final = _peaks(
    ("V100 SXM2", 125.0, "fp16", "NVIDIA Tesla V100 datasheet (SXM2: 125 TFLOPS tensor)"),
    ("V100 PCIe", 112.0, "fp16", "NVIDIA Tesla V100 datasheet (PCIe: 112 TFLOPS tensor)"),
    ("V100S PCIe", 130.0, "fp16", "NVIDIA Tesla V100S datasheet (130 TFLOPS tensor)"),
    ("T4", 65.0, "fp16", "NVIDIA T4 datasheet (mixed precision FP16/FP32: 65 TFLOPS)"),
    ("Quadro RTX 6000", 130.5, "fp16", "NVIDIA Quadro RTX 6000 datasheet (tensor performance 130.5 TFLOPS)"),
    ("Quadro RTX 8000", 130.5, "fp16", "NVIDIA Quadro RTX 8000 datasheet (tensor performance 130.5 TFLOPS)"),
    ("A100", 312.0, "bf16", "NVIDIA A100 datasheet (BF16 tensor core 312 | 624* TFLOPS, SXM and PCIe, 40/80 GB)"),
    ("A800", 312.0, "bf16", "NVIDIA A800 datasheet (BF16 tensor core 312 | 624* TFLOPS)"),
    ("A30", 165.0, "bf16", "NVIDIA A30 datasheet (BF16 tensor core 165 | 330* TFLOPS)"),
    ("A10", 125.0, "bf16", "NVIDIA A10 datasheet (BF16 tensor core 125 | 250* TFLOPS)"),
    ("A10G", 125.0, "bf16", "AWS A10G: no NVIDIA datasheet; the A10's 125 TFLOPS (same GA102 class)"),
    ("RTX 3060", 25.5, "bf16", "GA10x rate (512 dense FLOP/clk/SM, FP32 accumulate) x 28 SMs x 1.777 GHz boost"),
    ("RTX 3080", 59.5, "bf16", "NVIDIA Ampere GA102 whitepaper (RTX 3080: BF16 59.5 | 119* TFLOPS)"),
    ("RTX 3090", 71.0, "bf16", "NVIDIA Ampere GA102 whitepaper (RTX 3090: BF16 71 | 142* TFLOPS)"),
    ("RTX 4090", 165.2, "bf16", "NVIDIA Ada Lovelace whitepaper (RTX 4090: BF16 165.2 | 330.4* TFLOPS)"),
    ("L4", 121.0, "bf16", "NVIDIA L4 datasheet (BF16 tensor core 242* TFLOPS with sparsity)"),
    ("L40", 181.0, "bf16", "NVIDIA L40 datasheet (BF16 tensor core 181 | 362* TFLOPS)"),
    ("L40S", 362.05, "bf16", "NVIDIA L40S datasheet (BF16 tensor core 362.05 | 733* TFLOPS)"),
    ("H100 SXM", 989.0, "bf16", "NVIDIA H100 datasheet (SXM: BF16 tensor core 1,979* TFLOPS with sparsity)"),
    ("H100 PCIe", 756.0, "bf16", "NVIDIA H100 datasheet (PCIe: BF16 tensor core 1,513* TFLOPS with sparsity)"),
    ("H100 NVL", 835.0, "bf16", "NVIDIA H100 NVL datasheet (BF16 tensor core 1,671* TFLOPS with sparsity)"),
    ("H800", 989.0, "bf16", "NVIDIA H800 SXM (BF16 tensor core 1,979* TFLOPS with sparsity)"),
    ("H200", 989.0, "bf16", "NVIDIA H200 datasheet (SXM: BF16 tensor core 1,979* TFLOPS with sparsity)"),
    ("H200 NVL", 835.0, "bf16", "NVIDIA H200 datasheet (NVL: BF16 tensor core 1,671* TFLOPS with sparsity)"),
    ("H20", 148.0, "bf16", "NVIDIA H20 product brief (BF16 tensor core 148 | 296* TFLOPS)"),
    ("GH200", 989.0, "bf16", "NVIDIA GH200 datasheet (BF16 tensor core 1,979* TFLOPS with sparsity)"),
    ("B200", 2250.0, "bf16", "NVIDIA HGX B200 datasheet (FP16/BF16 tensor core 4.5* PFLOPS per GPU, sparsity)"),
    ("MI250 GCD", 181.05, "bf16", "AMD Instinct MI250 datasheet (peak BF16 362.1 TFLOPS per two-GCD module)"),
    ("MI250X GCD", 191.5, "bf16", "AMD Instinct MI250X datasheet (peak BF16 383 TFLOPS per two-GCD module)"),
    ("MI300X", 1307.4, "bf16", "AMD Instinct MI300X datasheet (peak BF16 1,307.4 | 2,614.9* TFLOPS)"),
)
"""Dense tensor-core peaks by model (``*``: the datasheet's with-sparsity figure, halved here)."""

# Tried in order against the normalised name (lower case, punctuation as spaces); first match wins.
# Variants with other chips or clocks (Ti, Laptop, 4090 D, RTX 6000 Ada) deliberately match nothing.
_VARIANT_GUARD = r"(?! ti\b)(?! super\b)(?! laptop\b)(?! mobile\b)(?! d\b)\b"
_NAME_PATTERNS: Final[tuple[tuple[str, str], ...]] = (
    (r"\bgh200\b", "GH200"),
    (r"\bh200\b.*\bnvl\b", "H200 NVL"),
    (r"\bh200\b", "H200"),
    (r"\bh100\b.*\bnvl\b", "H100 NVL"),
    (r"\bh100\b.*\bpcie\b", "H100 PCIe"),
    (r"\bh100\b", "H100 SXM"),
    (r"\bh800\b.*\bpcie\b", "H100 PCIe"),
    (r"\bh800\b", "H800"),
    (r"\bh20\b", "H20"),
    (r"\bb200\b", "B200"),
    (r"\ba100\b", "A100"),
    (r"\ba800\b", "A800"),
    (r"\ba30\b", "A30"),
    (r"\ba10g\b", "A10G"),
    (r"\ba10\b", "A10"),
    (r"\bl40s\b", "L40S"),
    (r"\bl40\b", "L40"),
    (r"\bl4\b", "L4"),
    (r"\bt4\b", "T4"),
    (r"\bv100s\b", "V100S PCIe"),
    (r"\bv100\b.*\bpcie\b", "V100 PCIe"),
    (r"\bv100\b", "V100 SXM2"),
    (r"\bquadro rtx 6000\b", "Quadro RTX 6000"),
    (r"\bquadro rtx 8000\b", "Quadro RTX 8000"),
    (r"\brtx 3060" + _VARIANT_GUARD, "RTX 3060"),
    (r"\brtx 3080" + _VARIANT_GUARD, "RTX 3080"),
    (r"\brtx 3090" + _VARIANT_GUARD, "RTX 3090"),
    (r"\brtx 4090" + _VARIANT_GUARD, "RTX 4090"),
    (r"\bmi300x\b", "MI300X"),
)

# Generic AMD names (ROCm's "AMD Radeon Graphics", or one name for both MI250 and MI250X) are told
# apart by compute units per device: an MI250 GCD has 104, an MI250X GCD 110, an MI300X 304.
_AMD_GENERIC = re.compile(r"\bamd radeon graphics\b|\bmi250x\b.*\bmi250\b|\bmi250\b.*\bmi250x\b")
_AMD_BY_CU: Final[Mapping[int, str]] = MappingProxyType({104: "MI250 GCD", 110: "MI250X GCD", 304: "MI300X"})
_AMD_NAMED: Final[tuple[tuple[str, str], ...]] = ((r"\bmi250x\b", "MI250X GCD"), (r"\bmi250\b", "MI250 GCD"))


def normalise_gpu_name(name: str) -> str:
    """``NVIDIA A100-SXM4-80GB`` -> ``nvidia a100 sxm4 80gb``: lower case, punctuation as spaces."""
    return " ".join(re.sub(r"[^0-9a-z]+", " ", name.lower()).split())


def match_gpu(name: str, *, sm_count: int | None = None) -> GpuPeak | None:
    """The peak-table entry for a GPU name, or ``None`` when the name is not recognised.

    ``sm_count`` (SMs, or compute units on AMD) resolves generic AMD names; it is ignored
    otherwise.
    """
    text = normalise_gpu_name(name)
    if _AMD_GENERIC.search(text):
        model = _AMD_BY_CU.get(sm_count) if sm_count is not None else None
        return None if model is None else GPU_PEAKS[model]
    for pattern, model in (*_NAME_PATTERNS, *_AMD_NAMED):
        if re.search(pattern, text):
            return GPU_PEAKS[model]
    return None
