"""Kernel classes: what kind of work a GPU kernel does, read from its name.

The classes follow the seeds' three regimes (``../shared/seeds/000_*.txt``, section 2: overhead-,
memory- and compute-bound; ``003_*.txt``, "Anatomy of Model's Operations": tensor contractions,
statistical normalisations, element-wise operators):

* **math** (compute-bound, tensor cores): ``gemm`` (cuBLAS, CUTLASS, Triton templates, rocBLAS),
  ``conv`` (cuDNN convolutions, Winograd, FFT), ``attention`` (FlashAttention, fused MHA);
* **memory-bound**: ``norm`` (layer/RMS/batch/group norm), ``softmax``, ``loss``, ``optimizer``
  (fused Adam, ``multi_tensor_apply``), ``reduction`` (sums, pooling, Triton ``red``/``per``),
  ``memory`` (copies, fills, concatenation, gather/scatter, layout changes, sorts),
  ``elementwise`` (activations, residual adds, casts, Triton ``poi``);
* ``comm`` (a communication kernel) and ``other`` (anything not recognised).

A kernel is ``comm`` exactly when the analyses count it as communication: its ``is_comm`` where the
caller has the flag (``kernel_class_expr(comm=pl.col("is_comm"))``), else its name by
:data:`traceq.comm_kernels.DEFAULT_COMM_PATTERNS`.  Other names are matched case-insensitively
against one ordered list of patterns, first match wins (:data:`KERNEL_CLASS_PATTERNS`), vectorised
with polars (Rust ``regex`` syntax: no look-around).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Final

import polars as pl

from traceq.comm_kernels import comm_name_expr

KERNEL_CLASSES: Final = (
    "gemm",
    "conv",
    "attention",
    "norm",
    "softmax",
    "loss",
    "optimizer",
    "reduction",
    "memory",
    "elementwise",
    "comm",
    "other",
)
"""Every class :func:`classify_kernel` returns."""

MATH_CLASSES: Final = frozenset({"gemm", "conv", "attention"})
"""Classes whose time is set by FLOPs / peak: the tensor-core work."""

MEMORY_BOUND_CLASSES: Final = frozenset({"norm", "softmax", "loss", "optimizer", "reduction", "memory", "elementwise"})
"""Classes whose time is set by bytes / bandwidth: what fusion speeds up."""

# Order matters: the first pattern that matches decides.  Norms, softmax, losses and optimizers
# come before gemm/conv because cuDNN batch norms and fused optimizers carry "cudnn"/"Functor" in
# their names; layout changes come before conv for the same reason; gemm before reduction and
# memory because cuBLAS split-K reductions and transposes belong to their matmul (but fbgemm_gpu's
# embedding kernels are not matmuls).
KERNEL_CLASS_PATTERNS: Final[tuple[tuple[str, str], ...]] = (
    ("attention", r"flash|fmha|attention|_attn|attn_|sdpa|xformers|cutlassF|mha_fwd|mha_bwd"),
    (
        "norm",
        r"layer_?norm|rms_?norm|batch_?norm|group_?norm|instance_?norm|\bbn_|::bn_|bn_fw|bn_bw"
        r"|GammaBeta|RowwiseMoments|welford|cuApplyLayerNorm|cuComputeGradInput|cuComputePartGradGammaBeta",
    ),
    ("softmax", r"softmax"),
    ("loss", r"nll_loss|ClassNLLCriterion|cross_entropy|mse_loss|smooth_l1|binary_cross|ctc_loss|_loss_"),
    ("optimizer", r"(^|[^h])adam|adagrad|rmsprop|sgd_|_sgd|optimizer|multi_tensor_apply|_foreach_|lamb_|amsgrad"),
    ("memory", r"nchwToNhwc|nhwcToNchw|nchw2nhwc|nhwc2nchw|tensor_?transform"),
    ("conv", r"convol|conv\d|conv_|_conv|cudnn|implicit_gemm|fprop|dgrad|wgrad|winograd|fft\d|fft_|im2col"),
    (
        "gemm",
        r"(^|[^b])gemm|gemv|matmul|cublas|cutlass|xmma|wgmma|hmma|triton_tem_|_mm_|bmm|tensorop|nvjet|rocblas"
        r"|hipblaslt|^Cijk_",
    ),
    (
        "reduction",
        r"reduce|reduction|triton_red_|triton_per_|argmax|argmin|cumsum|cumprod|DeviceScan|topk"
        r"|sum_kernel|mean_kernel|norm_kernel|pool",
    ),
    (
        "memory",
        r"memcpy|memset|copy|CatArray|\bcat_|fill|gather|scatter|index|embedding|transpose|permute"
        r"|sort|\bflip_|\broll_|repeat_|\bpad_",
    ),
    (
        "elementwise",
        r"elementwise|pointwise|triton_poi_|Functor|gelu|relu|silu|swish|sigmoid|tanh|dropout|bias"
        r"|clamp|threshold|axpy|_add|add_|_mul|mul_|where|masked|cast|convert|activation|exp_|pow_",
    ),
)
"""(class, pattern) in the order they are tried, after ``comm``; names matching none are ``other``."""


def kernel_class_expr(name: pl.Expr | None = None, comm: pl.Expr | None = None) -> pl.Expr:
    """A polars expression classifying kernel names (default: the ``name`` column) into
    :data:`KERNEL_CLASSES`; a String column, named ``kernel_class``.  ``comm``: whether each is a
    communication kernel (the ``is_comm`` column); default: its name by the default patterns."""
    text = (pl.col("name") if name is None else name).cast(pl.String)
    out = pl.lit("other")
    for cls, pattern in reversed(KERNEL_CLASS_PATTERNS):  # innermost is tried last: first pattern wins
        out = pl.when(text.str.contains(f"(?i){pattern}")).then(pl.lit(cls)).otherwise(out)
    is_comm = comm_name_expr(text) if comm is None else comm.fill_null(False)
    return pl.when(is_comm).then(pl.lit("comm")).otherwise(out).alias("kernel_class")


def with_kernel_class(kernels: pl.DataFrame) -> pl.DataFrame:
    """``kernels`` (with ``name`` and ``is_comm``) plus ``kernel_class`` (:func:`kernel_class_expr`
    of each row's name and flag; Categorical), in row order.  Classified once per distinct (name,
    is_comm) pair, and each row's class looked up by one integer key made of the name's Categorical
    code and the flag: one column added, where a join would copy every column of ``kernels`` (and
    a join by the two columns costs twice as much again)."""
    pairs = kernels.lazy().select("name", "is_comm").unique().collect()  # (lazy: eager, 0.26 s and 430 MB at 10 M)
    classes = pairs.with_columns(kernel_class_expr(comm=pl.col("is_comm")).cast(pl.Categorical))
    if kernels.is_empty():
        return kernels.with_columns(pl.lit(None, dtype=pl.Categorical).alias("kernel_class"))
    if not isinstance(kernels.schema["name"], pl.Categorical):
        return kernels.join(classes, on=["name", "is_comm"], how="left", nulls_equal=True, maintain_order="left")
    flag = pl.col("is_comm").cast(pl.Int64).fill_null(2)
    code = pl.col("name").to_physical().cast(pl.Int64)
    pair = pl.when(code.is_null()).then(-1 - flag).otherwise(code * 3 + flag)  # one per pair
    lookup = classes.select(pair.alias("_pair"), "kernel_class")
    found = pair.replace_strict(
        lookup.get_column("_pair"), lookup.get_column("kernel_class"), return_dtype=pl.Categorical
    )
    return kernels.with_columns(found.alias("kernel_class"))


def names_in_classes(names: pl.Series, classes: Collection[str]) -> pl.Series:
    """The distinct ``names`` (Categorical or String) that a kernel not flagged as communication
    with that name is classed as one of ``classes`` (Strings): a row is of those classes exactly
    when its ``is_comm`` is not true and its name is among them, read without a class per row.
    Neither ``comm`` (a flag's class, not a name's) nor ``other`` (a null name's too) can be asked for."""
    if {"comm", "other"} & set(classes):
        raise ValueError("names_in_classes: 'comm' is read from the flag and 'other' from null names too")
    distinct = names.unique().cast(pl.String).drop_nulls()
    frame = pl.DataFrame({"name": distinct}).with_columns(kernel_class_expr(comm=pl.lit(False)))
    return frame.filter(pl.col("kernel_class").is_in(sorted(classes))).get_column("name")


def classify_kernels(names: pl.Series) -> pl.Series:
    """The class of every name in ``names`` (a String Series named ``kernel_class``)."""
    return pl.DataFrame({"name": names.cast(pl.String)}).select(kernel_class_expr()).to_series()


def classify_kernel(name: str) -> str:
    """The class of one kernel name, e.g. ``"gemm"`` for ``ampere_sgemm_128x64_tn``."""
    return str(classify_kernels(pl.Series([name]))[0])
