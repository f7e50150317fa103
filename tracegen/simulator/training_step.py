"""The step program: what one rank does in one profiled step of a DDP transformer training job.

:func:`step_program` drives a :class:`~tracegen.simulator.rank.RankSim` through the phases of a
training step: data loading, the host-to-device input copy, forward (layer norm, attention and
MLP GEMMs, softmax, GELU, residual adds per layer; with ``host_sync`` a ``.item()`` check after
each layer), the loss, backward with a DDP bucketed all-reduce per layer on the NCCL stream
(one large all-reduce after backward when communication is not overlapped), the stream-wait that
orders the compute stream after the last all-reduce, the fused optimizer and a ``loss.item()``.
Unfused GELU and layer norm (``small_kernels``) are written out op by op.  The program is a
generator: it yields a :class:`~tracegen.simulator.rank.CollectiveCall` at each all-reduce and
is sent back the time the collective ends.
"""

from __future__ import annotations

from collections.abc import Generator

from tracegen.catalogue import (
    DATALOADER_NEXT,
    DDP_FORWARD,
    KERNELS,
    LAUNCH_KERNEL,
    MEM_DEVICE,
    MEM_PAGEABLE,
    MEM_PINNED,
    NCCL_ALL_REDUCE,
    OPTIMIZER_STEP,
    OPTIMIZER_ZERO_GRAD,
    CommInfo,
)
from tracegen.simulator.rank import CollectiveCall, RankSim


def _all_reduce(sim: RankSim, elements: int, transfer_ns: int) -> Generator[CollectiveCall, int, None]:
    sc = sim.sc
    comm = CommInfo("allreduce", elements, "BFloat16", tuple(range(sc.world_size)))
    with sim.annotation(NCCL_ALL_REDUCE), sim.op("record_param_comms", 9_000):
        event = sim.event_record(sc.compute_stream)
        sim.stream_wait_event(sc.nccl_stream, event, sc.compute_stream)
        api_start, api_end, corr = sim.api_call(LAUNCH_KERNEL, sim.cpu_ns(9_000))
        ready = max(api_start + sim.cpu_ns(sim.c.launch_latency), sim.stream_free[sc.nccl_stream])
        end = yield CollectiveCall(ready, transfer_ns)
        sim.stream_free[sc.nccl_stream] = end
        spec = KERNELS["allreduce"]
        sim.gpu_row("kernel", ready, end, spec.name, sc.nccl_stream, corr, kernel=spec, comm=comm)
        sim.t = api_end + sim.cpu_ns(sim.c.launch_gap)


def _layer_norm(sim: RankSim) -> None:
    c = sim.c
    if not c.unfused:
        with sim.op("aten::layer_norm", 4_000), sim.op("aten::native_layer_norm"):
            sim.kernel("layer_norm", c.norm)
        return
    # x - mean, / sqrt(var + eps), * w + b, written out in Python: one tiny kernel per op.
    for op_name, key in (
        ("aten::mean", "mul_scalar"),
        ("aten::sub", "add"),
        ("aten::pow", "mul"),
        ("aten::mean", "mul_scalar"),
        ("aten::add", "add"),
        ("aten::rsqrt", "tanh"),
        ("aten::mul", "mul"),
        ("aten::mul", "mul"),
        ("aten::add", "add"),
    ):
        with sim.op(op_name):
            sim.kernel(key, c.tiny)


def _gelu(sim: RankSim) -> None:
    c = sim.c
    if not c.unfused:
        with sim.op("aten::gelu"):
            sim.kernel("gelu", c.gelu)
        return
    # 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))), op by op.
    for op_name, key in (
        ("aten::pow", "mul"),
        ("aten::mul", "mul_scalar"),
        ("aten::add", "add"),
        ("aten::mul", "mul_scalar"),
        ("aten::tanh", "tanh"),
        ("aten::add", "add"),
        ("aten::mul", "mul"),
        ("aten::mul", "mul_scalar"),
    ):
        with sim.op(op_name):
            sim.kernel(key, c.tiny)


def _gemm(sim: RankSim, op_name: str, which: str, key: int = 0) -> None:
    with sim.op(op_name):
        sim.kernel(sim.c.gemm_kernels[key], sim.c.gemm[which])


def _forward_layer(sim: RankSim) -> None:
    c = sim.c
    _layer_norm(sim)
    _gemm(sim, "aten::addmm", "qkv")
    _gemm(sim, "aten::bmm", "scores", 3)
    with sim.op("aten::_softmax"):
        sim.kernel("softmax", c.softmax)
    _gemm(sim, "aten::bmm", "pv", 3)
    _gemm(sim, "aten::addmm", "out")
    with sim.op("aten::add"):
        sim.kernel("add", c.add)
    _layer_norm(sim)
    _gemm(sim, "aten::addmm", "fc1")
    _gelu(sim)
    _gemm(sim, "aten::addmm", "fc2")
    with sim.op("aten::add"):
        sim.kernel("add", c.add)


def _backward_gemm(sim: RankSim, node: str, which: str, bmm: bool = False) -> None:
    with sim.op(f"autograd::engine::evaluate_function: {node}", 5_000), sim.op(node, 3_000):
        for key, op_name in ((1, "aten::bmm" if bmm else "aten::mm"), (2, "aten::bmm" if bmm else "aten::mm")):
            with sim.op(op_name):
                sim.kernel(sim.c.gemm_kernels[3 if bmm else key], sim.c.gemm[which])


def _backward_norm(sim: RankSim) -> None:
    c = sim.c
    if c.unfused:
        with sim.op("autograd::engine::evaluate_function: MulBackward0", 5_000):
            for op_name, key in (
                ("aten::mul", "mul"),
                ("aten::sum", "mul_scalar"),
                ("aten::mul", "mul"),
                ("aten::sub", "add"),
                ("aten::mul", "mul"),
                ("aten::add", "add"),
            ):
                with sim.op(op_name):
                    sim.kernel(key, c.tiny)
        return
    with (
        sim.op("autograd::engine::evaluate_function: NativeLayerNormBackward0", 5_000),
        sim.op("NativeLayerNormBackward0", 3_000),
        sim.op("aten::native_layer_norm_backward"),
    ):
        sim.kernel("layer_norm_bwd_input", c.norm_bwd_input)
        sim.kernel("layer_norm_bwd_params", c.norm_bwd_params)


def _backward_layer(sim: RankSim) -> None:
    c = sim.c
    with sim.op("autograd::engine::evaluate_function: AddBackward0", 5_000), sim.op("aten::add"):
        sim.kernel("add", c.add)
    _backward_gemm(sim, "AddmmBackward0", "fc2")
    if c.unfused:
        with sim.op("autograd::engine::evaluate_function: TanhBackward0", 5_000):
            for op_name, key in (
                ("aten::mul", "mul"),
                ("aten::tanh_backward", "tanh"),
                ("aten::mul", "mul_scalar"),
                ("aten::add", "add"),
                ("aten::mul", "mul"),
                ("aten::pow", "mul"),
            ):
                with sim.op(op_name):
                    sim.kernel(key, c.tiny)
    else:
        with sim.op("autograd::engine::evaluate_function: GeluBackward0", 5_000), sim.op("aten::gelu_backward"):
            sim.kernel("gelu_bwd", c.gelu_bwd)
    _backward_gemm(sim, "AddmmBackward0", "fc1")
    _backward_norm(sim)
    _backward_gemm(sim, "AddmmBackward0", "out")
    _backward_gemm(sim, "BmmBackward0", "pv", bmm=True)
    with sim.op("autograd::engine::evaluate_function: SoftmaxBackward0", 5_000), sim.op("aten::_softmax_backward_data"):
        sim.kernel("softmax_bwd", c.softmax_bwd)
    _backward_gemm(sim, "BmmBackward0", "scores", bmm=True)
    _backward_gemm(sim, "AddmmBackward0", "qkv")
    _backward_norm(sim)


def _finite_check(sim: RankSim) -> None:
    """``if not torch.isfinite(h).all().item(): ...`` followed by host-side bookkeeping."""
    c = sim.c
    with sim.op("aten::isfinite"):
        sim.kernel("isfinite", c.tiny)
    with sim.op("aten::all"):
        sim.kernel("all_reduce_bool", 4_000)
    _item(sim)
    sim.host(c.post_sync_host)


def _item(sim: RankSim) -> None:
    with sim.op("aten::item", 4_000), sim.op("aten::_local_scalar_dense", 6_000):
        sim.memcpy("DtoH", 4, 1_400, MEM_DEVICE, MEM_PAGEABLE, blocking=False)
        sim.stream_synchronize(sim.sc.compute_stream)


def step_program(sim: RankSim, step_number: int) -> Generator[CollectiveCall, int, None]:
    """One ``ProfilerStep#<step_number>`` of ``sim``'s rank; yields at each all-reduce (see the module)."""
    sc, c = sim.sc, sim.c
    with sim.annotation(f"ProfilerStep#{step_number}", step_range=True):
        with sim.annotation(DATALOADER_NEXT):
            sim.host(c.data_loading)
        with sim.op("aten::to", 4_000), sim.op("aten::_to_copy", 3_000), sim.op("aten::copy_"):
            src = MEM_PINNED if c.input_pinned else MEM_PAGEABLE
            sim.memcpy("HtoD", c.input_bytes, c.input_copy, src, MEM_DEVICE, blocking=not c.input_pinned)
        with sim.annotation(OPTIMIZER_ZERO_GRAD):
            sim.host(20_000)
        with sim.annotation(DDP_FORWARD):
            for _ in range(sc.layers):
                _forward_layer(sim)
                if c.sync_checks:
                    _finite_check(sim)
            with sim.op("aten::cross_entropy_loss", 5_000):
                with sim.op("aten::log_softmax"):
                    sim.kernel("log_softmax", c.loss)
                with sim.op("aten::nll_loss_nd"):
                    sim.kernel("nll_loss", c.loss // 4)
        with sim.op("autograd::engine::evaluate_function: NllLossBackward0", 5_000):
            with sim.op("aten::zero_"):
                sim.memset(c.memset_bytes, c.memset)
            sim.kernel("nll_loss_bwd", c.loss // 4)
            sim.kernel("log_softmax_bwd", c.loss)
        n_buckets = sc.layers
        for layer in range(sc.layers):
            _backward_layer(sim)
            if c.overlap_comm:
                last = layer == n_buckets - 1
                yield from _all_reduce(sim, c.bucket_elements, c.last_bucket_transfer if last else c.bucket_transfer)
        if not c.overlap_comm:
            yield from _all_reduce(sim, c.bucket_elements, c.bucket_transfer)
        with sim.op("DDP::finalize_backward", 4_000):  # the compute stream waits for the last all-reduce
            event = sim.event_record(sc.nccl_stream)
            sim.stream_wait_event(sc.compute_stream, event, sc.nccl_stream)
        with sim.annotation(OPTIMIZER_STEP), sim.op("aten::_fused_adamw_", 20_000):
            for _ in range(c.optimizer_chunks):
                sim.kernel("fused_adam", c.optimizer_chunk)
        _item(sim)
        sim.host(25_000)
