"""Kernel classes read from names: the generator's kernels and real kernel names from the samples."""

from __future__ import annotations

import polars as pl
import pytest

from tracegen import KERNELS
from tracegen import MEMORY_BOUND_CLASSES as GENERATOR_MEMORY_BOUND
from traceq.analyses.kernel_classes import (
    KERNEL_CLASSES,
    MATH_CLASSES,
    MEMORY_BOUND_CLASSES,
    classify_kernel,
    classify_kernels,
    kernel_class_expr,
    names_in_classes,
    with_kernel_class,
)

# The generator's classes, in traceq's names: its log-softmax "loss" kernels are softmax kernels.
GENERATOR_TO_TRACEQ = {"reduce": {"reduction"}, "loss": {"loss", "softmax"}}


@pytest.mark.parametrize("key", sorted(KERNELS))
def test_every_generated_kernel_gets_the_generators_class(key: str) -> None:
    spec = KERNELS[key]
    got = classify_kernel(spec.name)
    assert got in GENERATOR_TO_TRACEQ.get(spec.kernel_class, {spec.kernel_class})
    assert (got in MEMORY_BOUND_CLASSES) == (spec.kernel_class in GENERATOR_MEMORY_BOUND)


REAL_NAMES = {
    # names as they appear in ../shared/sample_traces (nsys and Kineto, NVIDIA and AMD)
    "volta_sgemm_128x64_nn": "gemm",
    "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x256x8_stage3_warpsize1x4x1_ffma_aligna4_alignc4_execute_kernel"
    "__5x_cublas": "gemm",
    "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x64_16x4_tn_align1>(cutlass_80_tensorop_s1688gemm_256x64"
    "_16x4_tn_align1::Params)": "gemm",
    "nvjet_tst_192x192_64x4_2x1_v_bz_coopB_bias_TNN": "gemm",
    "void splitKreduce_kernel<float, float, float, float, true>(cublasSplitKParams<float>, float const*)": "gemm",
    "void implicit_convolve_sgemm<float, float, 1024, 6, 7, 3, 3, 5, 1, false, true, true>(int, int, int)": "conv",
    "volta_scudnn_winograd_128x128_ldg1_ldg4_relu_tile148t_nt_v1": "conv",
    "void cudnn::cnn::wgrad_alg0_engine<float, 128, 6, 7, 3, 3, 5, false, 512>(int, int, int)": "conv",
    "void fft2d_r2c_16x16<float>(float2*, float const*, int, int, int, int, int, int, int, int)": "conv",
    "void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<(int)128, (int)128, (int)64, (int)4, (bool)0, (bool)0, "
    "cutlass::bfloat16_t>>(Flash_fwd_params)": "attention",
    "void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, 512, true, 1>(cudnnTensorStruct, float const*)": "norm",
    "void at::native::(anonymous namespace)::RowwiseMomentsCUDAKernel<float, float>(long, float, float const*)": "norm",
    "void (anonymous namespace)::softmax_warp_forward<float, float, float, 10, true>(float*, float const*, int)": (
        "softmax"
    ),
    "void cunn_ClassNLLCriterion_updateOutput_kernel<float, float>(float*, float*, float*, long*)": "loss",
    "void multi_tensor_apply_kernel<TensorListMetadata<4>, AdamFunctor<float>, float>(int, int volatile*)": "optimizer",
    "void at::native::reduce_kernel<128, 4, at::native::ReduceOp<float, at::native::func_wrapper_t<float, "
    "at::native::sum_functor<float, float, float>>>>(at::native::ReduceOp<float>)": "reduction",
    "void at::native::(anonymous namespace)::max_pool_forward_nchw<float, float>(int, float const*)": "reduction",
    "void at::native::(anonymous namespace)::CatArrayBatchedCopy<float, unsigned int, 2, 128, 1>(float*)": "memory",
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, at::detail::Array<char*, 1> >"
    "(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)": "memory",
    "void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true, (cudnnKernelDataType_t)2>(float const*)": (
        "memory"
    ),
    "void cub::DeviceRadixSortOnesweepKernel<cub::DeviceRadixSortPolicy<long, int, int>::Policy800>(int*)": "memory",
    "void at::native::unrolled_elementwise_kernel<at::native::AUnaryFunctor<float, float, float, "
    "at::native::binary_internal::MulFunctor<float> >, at::detail::Array<char*, 2>, TrivialOffsetCalculator<1, "
    "unsigned int>, at::native::memory::LoadWithoutCast, at::native::memory::StoreWithoutCast>(int)": "elementwise",
    "void at::native::vectorized_elementwise_kernel<4, at::native::threshold_kernel_impl<float>"
    "(at::TensorIteratorBase&, float, float)::{lambda(float, float)#1}, at::detail::Array<char*, 3> >(int)": (
        "elementwise"
    ),
    "saxpy(double *, double *, double *, double, int)": "elementwise",
    "triton_poi_fused_add_mul_0": "elementwise",
    "triton_red_fused_sum_1": "reduction",
    "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)": "comm",
    "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<(unsigned long)4096>)": "comm",
    "void fbgemm_gpu::_block_bucketize_sparse_features_cuda_kernel1<int, int>(int, int, int const*)": "other",
    "[CUDA graph 1]": "other",
}


@pytest.mark.parametrize(("name", "expected"), sorted(REAL_NAMES.items()))
def test_real_kernel_names(name: str, expected: str) -> None:
    assert classify_kernel(name) == expected


def test_the_vectorised_and_scalar_forms_agree() -> None:
    names = pl.Series(list(REAL_NAMES) + [s.name for s in KERNELS.values()])
    assert classify_kernels(names).to_list() == [classify_kernel(n) for n in names]
    frame = pl.DataFrame({"name": names}).with_columns(kernel_class_expr())
    assert frame["kernel_class"].to_list() == classify_kernels(names).to_list()


def test_the_class_sets_partition_the_classes() -> None:
    assert MATH_CLASSES.isdisjoint(MEMORY_BOUND_CLASSES)
    assert MATH_CLASSES | MEMORY_BOUND_CLASSES | {"comm", "other"} == set(KERNEL_CLASSES)


def test_case_does_not_matter_and_unknown_names_are_other() -> None:
    assert classify_kernel("AMPERE_SGEMM_128X64_TN") == "gemm"
    assert classify_kernel("my_custom_kernel") == "other"
    assert classify_kernel("") == "other"


@pytest.mark.parametrize("names", [pl.Categorical, pl.String])
def test_each_row_gets_the_class_of_its_own_name_and_flag_in_row_order(names: pl.DataType) -> None:
    """The per-pair lookup (by Categorical code where it can) answers what the expression says of
    every row, nulls included: a null name, a null flag, one name both comm and not."""
    rows = pl.DataFrame(
        {
            "name": ["volta_sgemm_128x64", "ncclKernel_AllReduce", None, "volta_sgemm_128x64", None, "softmax_fwd"],
            "is_comm": [False, True, True, True, None, None],
            "i": range(6),
        },
        schema_overrides={"name": names},
    )
    got = with_kernel_class(rows)
    want = rows.with_columns(kernel_class_expr(comm=pl.col("is_comm")))
    assert got.get_column("i").to_list() == list(range(6))
    assert got.get_column("kernel_class").cast(pl.String).to_list() == want.get_column("kernel_class").to_list()
    assert want.get_column("kernel_class").to_list()[:4] == ["gemm", "comm", "comm", "comm"]


@pytest.mark.parametrize("names", [pl.Categorical, pl.String])
def test_no_kernels_get_an_empty_categorical_class_column(names: pl.DataType) -> None:
    rows = pl.DataFrame(
        {"name": [], "is_comm": [], "i": []}, schema={"name": names, "is_comm": pl.Boolean, "i": pl.Int64}
    )
    got = with_kernel_class(rows)
    assert got.columns == ["name", "is_comm", "i", "kernel_class"]
    assert got.height == 0 and got.schema["kernel_class"] == pl.Categorical


@pytest.mark.parametrize("names", [pl.Categorical, pl.String])
@pytest.mark.parametrize("classes", [MEMORY_BOUND_CLASSES, MATH_CLASSES, frozenset({"gemm", "softmax"})])
def test_a_rows_class_is_among_some_classes_when_its_name_is_among_their_names_and_it_is_not_comm(
    names: pl.DataType, classes: frozenset[str]
) -> None:
    """What the regimes read without a class per row, against each row's class: a name both comm and
    not, a comm-looking name not flagged, null names and flags (a null flag is not comm)."""
    rows = pl.DataFrame(
        {
            "name": [
                *("volta_sgemm_128x64", "ncclKernel_AllReduce", None, "volta_sgemm_128x64", None, "softmax_fwd"),
                *("ncclKernel_AllReduce", "my_custom_kernel", "softmax_fwd"),
            ],
            "is_comm": [False, True, True, True, None, None, False, None, True],
        },
        schema_overrides={"name": names},
    )
    chosen = names_in_classes(rows.get_column("name"), classes)
    got = rows.select((~pl.col("is_comm").fill_null(False) & pl.col("name").is_in(chosen.implode())).fill_null(False))
    want = with_kernel_class(rows).get_column("kernel_class").cast(pl.String).is_in(sorted(classes))
    assert got.to_series().to_list() == want.to_list()
    assert any(want) and not all(want)


@pytest.mark.parametrize("asked", ["comm", "other"])
def test_the_flags_class_and_the_null_names_class_cannot_be_asked_for_by_names(asked: str) -> None:
    with pytest.raises(ValueError, match="flag"):
        names_in_classes(pl.Series(["my_custom_kernel"]), {"gemm", asked})
