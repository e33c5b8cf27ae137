"""A training step of an arbitrary module (workload/module_graph.py) on a cluster: data parallel, plain
(DDP) or fully sharded (FSDP / ZeRO-3). Tensor, pipeline, context and expert parallelism need the
model's structure and are refused for such modules.

Per op of one micro-batch on one GPU (efficiency.py's device model):
- GEMM: gemm_s at its (M, N, K);
- convolution: cuDNN's implicit GEMM at (N·H_out·W_out, C_out, C_in/groups·k_h·k_w), saturating at
  min(C_out·k_h·k_w, K) because each loaded input pixel serves every filter tap, with the HBM floor of
  the tensors it moves (efficiency.conv_s; checked on an H100's cuDNN convolutions of ResNet-50); an
  ungrouped convolution of fewer than 8 input channels (an RGB stem) at the CUDA cores' FP32 rate;
- fused attention: FlashAttention-2's time for its shape (efficiency.flash_attention_s: the device's measured
  table or the published FA2 curve for its head dim and sequence), forward or backward by phase; an
  attention op without a recorded shape, its FLOPs at FLASH_ETA_REL of the GEMM ceiling;
- any other kernel: its bytes at the HBM model's streaming rate (elementwise_s), one launch each; a
  batch norm's bytes, and a group norm backward's, include the second read of its input their two-pass
  kernels make (REREADS); a group norm forward's statistics pass runs one thread block per (sample, group)
  row at a measured per-row rate (group_norm_stats_s), then its normalising pass streams; a bf16 batch
  norm in training runs PyTorch's own kernels, not cuDNN's, at NATIVE_BN_MEM_ETA of HBM;
- an NCHW model (`--input x:...:bf16:nchw`; channels-last is the default): cuDNN's layout transforms around
  each tensor-core convolution that is not a 1x1 unit-stride GEMM (layout_transform_bytes), and cuDNN's
  NCHW batch norm at its element rate (NCHW_BN_MEM_ETA).
Each pass is at least its eager ops' host time (model/host.py: OP_S per op, or --host-op-us; no MoE sync,
so the host may run ahead across the pass: max(GPU, host)).

Data parallel (all GPUs; the leading input dim is the per-GPU micro-batch):
- DDP: the gradients' all-reduce overlaps the last micro-batch's backward bucket by bucket; the last
  bucket (estimate.DDP_BUCKET_PARAMS) is never hidden: exposed = max(last bucket, t_ar − t_bwd).
- FSDP (--zero 3): per micro-batch the weights are all-gathered for the forward and again for the
  backward and the gradients reduce-scattered; exposed = max(0, t_ag − t_fwd) + max(0, t_ag + t_rs − t_bwd).
The optimizer is Adam over the local shard at HBM speed (estimate.ADAM_BYTES_PER_PARAM).

Full recompute (`--recompute full`: `torch.utils.checkpoint` around each top-level child): the backward
runs each child's forward again first, so the backward pass gains the children's forward ops (GPU and
host time; the root's own ops are not recomputed), and the activations kept between the passes shrink
to the children's inputs plus the root's own saved tensors, with one child's saved tensors at a time
on top while its backward runs (recompute_activation_bytes). MFU counts the model's FLOPs only.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from distscope.comm import Collective, collective_s, group_net
from distscope.dtypes import DType
from distscope.errors import DistscopeError
from distscope.model import efficiency as eff
from distscope.model import host
from distscope.model.estimate import ADAM_BYTES_PER_PARAM, DDP_BUCKET_PARAMS, MASTER_BYTES_PER_PARAM
from distscope.model.memory import WORKSPACE_BYTES
from distscope.system.device import Device
from distscope.system.topology import Cluster
from distscope.workload.module_graph import AttnShape, Layout, ModuleGraph, Op, OpKind, Phase


@dataclasses.dataclass(frozen=True)
class ModuleEstimate:
    step_time_s: float
    breakdown_s: dict[str, float]  # sums to step_time_s
    micro_batches: int
    samples_per_s: float
    flops_per_gpu: float  # per step, forward + backward
    mfu: float
    memory_bytes: dict[str, float]
    capacity_bytes: float

    @property
    def feasible(self) -> bool:
        return sum(self.memory_bytes.values()) <= self.capacity_bytes

    def to_dict(self) -> dict[str, Any]:
        return {"step_time_s": self.step_time_s, "breakdown_s": dict(self.breakdown_s),
                "micro_batches": self.micro_batches, "samples_per_s": self.samples_per_s,
                "flops_per_gpu_per_step": self.flops_per_gpu, "mfu": self.mfu,
                "memory_per_gpu_bytes": sum(self.memory_bytes.values()), "memory_breakdown_bytes": dict(self.memory_bytes),
                "capacity_bytes": self.capacity_bytes, "feasible": self.feasible}


# Batch norm reads its activation twice: PyTorch's CUDA kernels first reduce the statistics, then normalise
# (batch_norm_collect_statistics + batch_norm_elemt), and the backward reduces over (dy, x) before a second
# pass writes dx (batch_norm_backward_reduce + batch_norm_backward_elemt; group norm's backward likewise:
# ComputeInternalGradients, then its dx kernel). The traced op records each tensor once; these are the extra
# reads, in units of its first argument (x forward, dy backward; x is as large). Layer norm keeps a row in
# registers: one pass forward. A group norm forward's statistics pass is priced on its own
# (group_norm_stats_s).
REREADS = {"native_batch_norm": 1, "cudnn_batch_norm": 1, "_native_batch_norm_legit": 1,
           "native_batch_norm_backward": 2, "cudnn_batch_norm_backward": 2, "native_group_norm_backward": 2}

# PyTorch runs cuDNN's batch norm unless the input or the weight is bf16 (aten/src/ATen/native/Normalization.cpp,
# _select_batch_norm_backend): fp16 under AMP (fp32 weights) and fp32 get cuDNN's persistent NHWC kernels, bf16
# gets PyTorch's own (channels-last: a Welford statistics pass, then the transform; backward a reduction, then
# the element-wise pass). Those reach a lower share of HBM bandwidth: on an H100 (data/device/
# nvidia-h100-2026-11-27, module_profile, training steps at batch 128) ResNet-50's bf16 batch norms took 14.1 ms
# and ResNeXt-101's 27.0 ms, where their bytes (with REREADS) at MEM_ETA take 8.9 and 17.1 ms: 0.51 of the HBM
# bandwidth in both, while the fp32 steps' cuDNN batch norms took 16.0 and 30.4 ms against 17.4 and 33.3 at
# MEM_ETA. A kernel-level measurement, taken as one (benchmarks/device_check.py prints it).
NATIVE_BN_MEM_ETA = 0.50
NATIVE_BATCH_NORMS = frozenset({"native_batch_norm", "_native_batch_norm_legit", "native_batch_norm_backward"})

# cuDNN's NCHW batch norm (bn_fw_tr_1C11 / bn_bw_1C11: one block per channel over N·H·W) moves its elements at a
# rate set by their count, not their width: on the H100 (data/device/nvidia-h100-2026-11-27,
# module_profile_layouts, ResNet-50 at batch 128) the NCHW batch norms took 24.2 ms in TF32 and 20.4 ms under
# fp16 autocast, where the fp16 bytes would take half the TF32 time. Priced at 4 bytes per element (fp32, the
# accumulation type) at this share of HBM bandwidth: 0.8 · 17.41 / 24.2 from the TF32 step (the fp16 step and
# ResNeXt-101's TF32 step are the check, out of sample).
NCHW_BN_MEM_ETA = 0.58


# PyTorch's group norm forward (aten/src/ATen/native/cuda/group_norm_kernel.cu) reduces its statistics in
# RowwiseMomentsCUDAKernel: one thread block per (sample, group) row, which walks its row an element per
# thread at a time. Stable Diffusion's group norms have 32 groups at batch 1-2: 32-64 blocks on a 132-SM GPU,
# so the pass runs at the blocks' latency-bound rate, not HBM's. Measured with nn.GroupNorm(32, C), fp16 NCHW
# (data/device/nvidia-h200-2026-11-27 and nvidia-h100-2026-11-27, device_probe's group_norm section; the
# normalising pass at the streaming rate taken off): 1.15-1.17e9 elements/s per row for rows of 2-33 M
# elements (past the L2), the same on both GPUs; per row it falls as rows share SMs, to 0.82 at 256 rows and
# 0.61-0.68 at 512, which rate · rows / (1 + rows / GN_ROWS_SAT) follows with GN_ROWS_SAT = 630. Elements, not
# bytes: the kernel loads one element per thread per step, so fp32 is assumed to run at the same element rate
# (not measured). Channels-last group norm measured 1.3-2.4x its NCHW time (not priced). Other GPUs (A100
# included) are assumed to run at the Hopper rate: not measured.
GN_ROW_ELEMS_PER_S = 1.16e9
GN_ROWS_SAT = 630.0


def group_norm_stats_s(elements: float, rows: int) -> float:
    """Seconds of a group norm forward's statistics pass over `elements` in `rows` (sample, group) rows, one
    thread block each: elements / (r · rows / (1 + rows / GN_ROWS_SAT)), r = GN_ROW_ELEMS_PER_S (above)."""
    return elements * (1.0 + rows / GN_ROWS_SAT) / (rows * GN_ROW_ELEMS_PER_S)


def layout_transform_bytes(op: Op, dtype: DType) -> float:
    """Bytes cuDNN's NCHW <-> NHWC transforms move around one tensor-core convolution of an NCHW model
    (nchwToNhwcKernel / nhwcToNchwKernel): every tensor the pass reads is transformed in and every one it
    writes transformed out (a read and a write each), the weights (KCRS to KRSC) and the weight gradient
    included, the output gradient twice in the backward (its data and weight gradients each take it); a
    1x1 unit-stride convolution is a plain GEMM on NCHW and has none. The counts say the weights move too:
    the H100's NCHW ResNet-50 TF32 step issued 151 and 65 of them per step for its 21 other convolutions
    (7 in and 3 out per convolution: x and w forward, dy twice, w and x backward; y, dx and dw out), and the
    H200's Stable Diffusion 1.5 UNet forward 101 in and 51 out for its 52 (data/device/nvidia-h200-2026-11-27,
    diffusion: x and w in, y out), where its weights outweigh its activations 4 to 1 at batch 2."""
    if op.gemm is None or op.pointwise:
        return 0.0
    return 2.0 * op.bytes if op.phase is Phase.FORWARD else 2.0 * (op.bytes + op.in_bytes)


def op_s(op: Op, device: Device, graph: ModuleGraph) -> float:
    """One op's GPU time (module docstring)."""
    dt = graph.dtype
    if op.kind is OpKind.GEMM and op.gemm is not None:
        return eff.gemm_s(device, dt, *op.gemm)
    if op.kind is OpKind.CONV and op.gemm is not None:
        if not op.flops:
            return 0.0
        t = eff.conv_s(device, dt, *op.gemm, op.taps, op.flops, op.bytes, op.groups, op.winograd)
        if (graph.layout is Layout.NCHW and dt is not DType.FP32  # on tensor cores: cuDNN's NHWC kernels
                and not eff.conv_on_cuda_cores(op.gemm[2], op.taps, op.groups)):
            t += eff.elementwise_s(device, layout_transform_bytes(op, dt), 2 if op.phase is Phase.FORWARD else 3)
        return t
    if op.kind is OpKind.ATTENTION and op.attn is not None:
        return attention_s(op.attn, op.phase, device, dt)
    if op.kind is OpKind.ATTENTION:
        return op.flops / (device.flops(dt) * eff.FLASH_ETA_REL * eff.gemm_eta_max(device.name, dt)) + eff.KERNEL_S
    if op.reduce_rows:  # a group norm forward: the statistics pass, then the normalising pass
        return group_norm_stats_s(op.in_bytes / dt.bytes, op.reduce_rows) + eff.elementwise_s(device, op.bytes, 1)
    nbytes = op.bytes + REREADS.get(op.name, 0) * op.in_bytes
    if dt is DType.BF16 and op.name in NATIVE_BATCH_NORMS:
        return eff.elementwise_s(device, nbytes, 1) * eff.MEM_ETA / NATIVE_BN_MEM_ETA
    if graph.layout is Layout.NCHW and op.name in NATIVE_BATCH_NORMS:  # cuDNN's NCHW kernels
        return eff.elementwise_s(device, nbytes * 4.0 / dt.bytes, 1) * eff.MEM_ETA / NCHW_BN_MEM_ETA
    return eff.elementwise_s(device, nbytes, 1)


@dataclasses.dataclass(frozen=True)
class ChildCost:
    """One top-level child of a module (its ops in forward order; "" for the root's own ops) per
    micro-batch: GPU time per pass stretched to the pass's host time (module docstring), FLOPs, bytes."""

    name: str
    fwd_s: float
    bwd_s: float  # with recompute: its forward rerun first
    fwd_flops: float
    bwd_flops: float
    fwd_bytes: float
    bwd_bytes: float


def child_costs(graph: ModuleGraph, device: Device, recompute: bool = False) -> tuple[ChildCost, ...]:
    """The top-level children in forward order (module docstring): a pass shorter than its ops' host time
    (host.op_s each) is stretched to it, spread over the children in proportion."""
    order: list[str] = []
    cost: dict[str, dict[Phase, list[float]]] = {}
    n_ops = dict.fromkeys(Phase, 0)
    for op in graph.ops:
        if op.module not in cost:
            order.append(op.module)
            cost[op.module] = {p: [0.0, 0.0, 0.0] for p in Phase}
        t = op_s(op, device, graph)
        c = cost[op.module][op.phase]
        c[0] += t
        c[1] += op.flops
        c[2] += op.bytes
        n_ops[op.phase] += 1
        if recompute and op.phase is Phase.FORWARD and op.module:
            cost[op.module][Phase.BACKWARD][0] += t
            n_ops[Phase.BACKWARD] += 1
    stretch = {}
    for p in Phase:
        gpu = sum(cost[m][p][0] for m in order)
        stretch[p] = max(gpu, n_ops[p] * host.op_s(device)) / gpu if gpu > 0 else 1.0
    F, B = Phase.FORWARD, Phase.BACKWARD
    return tuple(ChildCost(name=m, fwd_s=cost[m][F][0] * stretch[F], bwd_s=cost[m][B][0] * stretch[B],
                           fwd_flops=cost[m][F][1], bwd_flops=cost[m][B][1], fwd_bytes=cost[m][F][2],
                           bwd_bytes=cost[m][B][2]) for m in order)


def attention_s(a: AttnShape, phase: Phase, device: Device, dtype: DType) -> float:
    """One fused-attention pass of shape `a` (efficiency.flash_attention_s, FlashAttention-2)."""
    fwd, bwd = eff.flash_attention_s(device, dtype, a.batch_heads, a.seq_q, a.seq_kv, a.d_qk, a.d_v, causal=a.causal)
    return fwd if phase is Phase.FORWARD else bwd


def optimizer_s(graph: ModuleGraph, device: Device, shard: int) -> float:
    """Adam over the local 1/shard of the parameters at HBM speed (estimate.ADAM_BYTES_PER_PARAM)."""
    return eff.mem_time_s(ADAM_BYTES_PER_PARAM * graph.params / shard, device.hbm_Bps)


def recompute_activation_bytes(graph: ModuleGraph, names: set[str] | None = None) -> float:
    """Activations kept under full recompute of every top-level child (module docstring):
    saved(root) + Σ_child input bytes + max_child saved(child), over the children in `names` (a
    pipeline stage's; "" the root's own ops) or all of them."""
    saved, inputs = dict(graph.child_saved), dict(graph.child_inputs)
    keep = set(saved) | set(inputs) if names is None else names
    kids = [m for m in keep if m]
    return (saved.get("", 0.0) * ("" in keep) + sum(inputs.get(m, 0.0) for m in kids)
            + max((saved.get(m, 0.0) for m in kids), default=0.0))


def micro_batch_count(micro_batch: int, *, dp: int, zero: int, global_batch: int) -> int:
    """Micro-batches per step of a data-parallel module step (DDP or FSDP), or one line on a bad --zero or
    a global batch that the micro-batch (the --input's leading dim) times dp does not divide."""
    if zero not in (0, 3):
        raise DistscopeError(f"--zero={zero}: a torch module is trained with DDP (--zero 0) or FSDP (--zero 3)")
    per_step = micro_batch * dp
    if global_batch % per_step:
        raise DistscopeError(f"--global-batch={global_batch} is not a multiple of micro-batch {micro_batch} "
                             f"(the --input's leading dim) x dp {dp} = {per_step}")
    return global_batch // per_step


def estimate_module(graph: ModuleGraph, cluster: Cluster, *, dp: int, zero: int, global_batch: int,
                    recompute: bool = False) -> ModuleEstimate:
    """Step time, breakdown and memory of `graph` trained data-parallel over `dp` GPUs of `cluster`, with
    full recompute of each top-level child when `recompute` (module docstring)."""
    m = micro_batch_count(graph.micro_batch, dp=dp, zero=zero, global_batch=global_batch)
    dev = cluster.device
    kinds = {k: 0.0 for k in OpKind}
    passes = {p: 0.0 for p in Phase}
    n_ops = {p: 0 for p in Phase}
    redo, n_redo = 0.0, 0
    for op in graph.ops:
        t = op_s(op, dev, graph)
        kinds[op.kind] += t
        passes[op.phase] += t
        n_ops[op.phase] += 1
        if recompute and op.phase is Phase.FORWARD and op.module:
            redo += t
            n_redo += 1
    fwd = max(passes[Phase.FORWARD], n_ops[Phase.FORWARD] * host.op_s(dev))
    bwd = max(passes[Phase.BACKWARD] + redo, (n_ops[Phase.BACKWARD] + n_redo) * host.op_s(dev))
    host_wait = (fwd + bwd) - (passes[Phase.FORWARD] + passes[Phase.BACKWARD] + redo)
    b = graph.dtype.bytes
    g = group_net(cluster, dp, 1)
    dp_exposed = 0.0
    if dp > 1 and zero == 0:
        t_ar = collective_s(Collective.ALL_REDUCE, graph.params * b, g)
        dp_exposed = max(t_ar * min(1.0, DDP_BUCKET_PARAMS / max(graph.params, 1)), t_ar - bwd)
    elif dp > 1:
        t_ag = collective_s(Collective.ALL_GATHER, graph.params * b, g)
        t_rs = collective_s(Collective.REDUCE_SCATTER, graph.params * b, g)
        dp_exposed = m * (max(0.0, t_ag - fwd) + max(0.0, t_ag + t_rs - bwd))
    shard = dp if zero == 3 else 1
    opt = optimizer_s(graph, dev, shard)
    gpu = {k: v * m for k, v in kinds.items()}
    breakdown = {k.value: gpu[k] for k in OpKind} | ({"recompute": redo * m} if recompute else {}) | {
        "host": host_wait * m, "dp": dp_exposed, "optimizer": opt}
    step = sum(breakdown.values())
    flops = graph.flops() * m
    memory = {"weights": graph.params * b / shard, "grads": graph.params * b / shard,
              "optimizer": graph.params * MASTER_BYTES_PER_PARAM / shard,
              "activations": recompute_activation_bytes(graph) if recompute else graph.saved_bytes,
              "workspace": WORKSPACE_BYTES}
    return ModuleEstimate(step_time_s=step, breakdown_s=breakdown, micro_batches=m,
                          samples_per_s=global_batch / step, flops_per_gpu=flops,
                          mfu=flops / (step * dev.flops(graph.dtype)), memory_bytes=memory,
                          capacity_bytes=cluster.memory_capacity_bytes)


@dataclasses.dataclass(frozen=True)
class ModuleInference:
    """One forward of a batch on one GPU: latency, throughput and achieved FLOP/s over peak, per model
    and per top-level child (a CNN's stages, a transformer's blocks)."""

    batch: int
    latency_s: float
    samples_per_s: float
    utilization: float  # model FLOPs / (latency · dense peak of the dtype)
    per_module: tuple[tuple[str, float, float], ...]  # (child, GPU seconds, utilization)

    def to_dict(self) -> dict[str, Any]:
        return {"batch": self.batch, "latency_s": self.latency_s, "samples_per_s": self.samples_per_s,
                "utilization": self.utilization,
                "per_module": [{"module": m, "gpu_s": t, "utilization": u} for m, t, u in self.per_module]}


def infer_module(graph: ModuleGraph, device: Device) -> ModuleInference:
    """Forward-only latency of `graph` (traced with inference=True): its ops' GPU time, at least the host's
    time to issue them (host.op_s each: eager PyTorch, no CUDA graph)."""
    peak = device.flops(graph.dtype)
    times: dict[str, float] = {}
    flops: dict[str, float] = {}
    for op in graph.ops:
        t = op_s(op, device, graph)
        times[op.module] = times.get(op.module, 0.0) + t
        flops[op.module] = flops.get(op.module, 0.0) + op.flops
    gpu = sum(times.values())
    latency = max(gpu, len(graph.ops) * host.op_s(device))
    per = tuple((m, t, flops[m] / (t * peak) if t > 0 else 0.0) for m, t in times.items())
    return ModuleInference(batch=graph.micro_batch, latency_s=latency, samples_per_s=graph.micro_batch / latency,
                           utilization=graph.flops() / (latency * peak), per_module=per)
