"""The analytical step-time estimator: (workload, system, plan) -> Estimate.

Per pipeline stage and micro-batch, stage time = compute (layer.py) + exposed TP/CP/EP communication
+ exposed pipeline send/recv. A GPipe or (interleaved) 1F1B pipeline then takes
    m·t_max + (Σ_i t_i − t_max)/vp
(for uniform stages this is the textbook (m + (pp−1)/vp)·t of Narayanan et al. 2021, §2.2), plus the
transfers of fill and drain where sends are asynchronous (schedules.flush_pipeline_s; interleaved 1F1B
takes its fill and drain from its graph, schedules.interleaved_path_s, but in the planner's screening
pass, `screen`); the other schedules take their closed forms or their graph's longest path
(schedules.pipeline_s), and the
step adds the exposed data-parallel communication and the optimizer step. A plan's `compression`
prices DP gradient reductions, sharded-weight all-gathers and TP activation collectives on their
compressed wire bytes and adds their quantize/dequantize passes as compute (compressed_wire,
distscope.compress.spec); the LM-head/embedding TP collectives stay uncompressed.
Each cost function is pure; this file only composes them. Where the trace generator
(trace/from_plan.py) must make the same choice, the rule is a function here that both call
(tp_all_gather_scale, tp_point_collectives, compressed_wire, tp_regather_hide_s,
zero3_reduce_last_share, recomputes_forward, rank_chunks); tests/sim/test_plan_space_consistency.py
checks over random plans that the simulation of the trace stays within 3% of this estimate.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence

from distscope.comm import Collective, collective_s, group_net
from distscope.comm.group import GroupNet
from distscope.compress.spec import METHOD_SPECS, CompressionMethod, compressed_comm_cost, hbm_bound_GBps, ratio_vs
from distscope.errors import DistscopeError
from distscope.model import efficiency as eff
from distscope.model import fp8, host, refusal, sparse_attention
from distscope.model.efficiency import mem_time_s
from distscope.model.framework_memory import FRAMEWORK_MEMORY
from distscope.model.layer import LayerCost, cp_exchange, head_cost, layer_cost
from distscope.model.memory import WORKSPACE_BYTES, Memory, activation_bytes_per_layer, wgrad_input_bytes_per_layer
from distscope.model.moe import moe_pass_comm_s, overlap_budget_s, overlapped_a2a_s
from distscope.model.result import Estimate, LayerTimes
from distscope.model.routing import routed_load
from distscope.model.schedules import (
    DpLane,
    StagePass,
    StepUpdate,
    final_grad_passes,
    final_grads_windows_s,
    flush_pipeline_s,
    inflight_sets,
    interleaved_path_s,
    lane_path_s,
    pipedream_2bw_s,
    pipeline_s,
    weight_versions,
)
from distscope.model.stages import StageLayers, chunk_sizes, stage_layers
from distscope.plan import AttentionImpl, Dim, Placement, Plan, Recompute, Schedule, chunk_rank
from distscope.software.presets import DEFAULT as DEFAULT_SOFTWARE
from distscope.software.presets import KernelStack, SoftwareProfile
from distscope.system.device import Device
from distscope.system.topology import Cluster
from distscope.workload import params as P
from distscope.workload.spec import ModelSpec
from distscope.workload.training import TrainingShape

_FLUSH_FORMULA = frozenset({Schedule.GPIPE, Schedule.ONE_F_ONE_B, Schedule.INTERLEAVED})


@dataclasses.dataclass(frozen=True, slots=True)
class LayerComm:
    """One layer's communication per micro-batch: totals, and exposed time in the forward pass (F)
    and the backward pass (B, with the recomputed forward)."""

    tp_tot: float
    tp_f: float
    tp_b: float
    cp_tot: float
    cp_f: float
    cp_b: float
    ep_tot: float
    ep_f: float
    ep_b: float

    @property
    def exposed_s(self) -> float:
        return self.tp_f + self.tp_b + self.cp_f + self.cp_b + self.ep_f + self.ep_b

    def plus(self, o: LayerComm, n: float) -> LayerComm:
        """self + n·o."""
        return LayerComm(self.tp_tot + n * o.tp_tot, self.tp_f + n * o.tp_f, self.tp_b + n * o.tp_b,
                         self.cp_tot + n * o.cp_tot, self.cp_f + n * o.cp_f, self.cp_b + n * o.cp_b,
                         self.ep_tot + n * o.ep_tot, self.ep_f + n * o.ep_f, self.ep_b + n * o.ep_b)


_ZERO_COMM = LayerComm(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
_NONE = CompressionMethod.NONE
ADAM_BYTES_PER_PARAM = 32.0  # read fp32 master/m/v/grad (16) + write master/m/v (12) + bf16 weight (2) + zero grad (2)
MASTER_BYTES_PER_PARAM = 12.0  # fp32 master weights + Adam m and v
DDP_BUCKET_PARAMS = 40e6  # Megatron DDP bucket size: the last bucket's reduction is never hidden
# Quantize/dequantize kernels are memory-bound element-wise passes; distscope.compress.spec assumes they
# reach 60% of HBM bandwidth (its GPU default), here applied to the plan's device and the tensor's dtype.
QUANT_HBM_EFFICIENCY = 0.6


def compressed_wire(nbytes: float, method: CompressionMethod, dtype_bytes: float, hbm_Bps: float,
                    quant_GBps: float | None = None) -> tuple[float, float]:
    """(bytes on the wire, quantize + dequantize seconds) of one collective that moves `nbytes` per rank
    of `dtype_bytes`-wide elements compressed with `method`:

        wire  = nbytes·r,   r = ratio_vs(method, dtype) = (b + s/g) / (8·dtype_bytes)   (compress/spec.py)
        codec = passes·nbytes/q + passes·nbytes/q   (compressed_comm_cost; q = quant_GBps, by default
                HBM-bound: η·HBM·in/(in+out) bytes of input per second, η = QUANT_HBM_EFFICIENCY)

    The collective is then priced on its wire bytes (latency and algorithm choice unchanged: quantization
    shrinks the payload, not the number of steps; ZeRO++ qwZ/qgZ, Wang et al. 2023, and `simulate
    --compress` price it so). A method that does not shrink the payload (r >= 1: a bf16 cast of bf16
    gradients, fp8 on an FP8 all-gather) is not applied: the tensor goes out as it is, with no codec.
    One rule for the estimator and the trace (trace/from_plan.py)."""
    if method is CompressionMethod.NONE or nbytes <= 0:
        return nbytes, 0.0
    db = max(int(dtype_bytes), 1)
    ms = METHOD_SPECS[method]
    r = ratio_vs(ms, db)
    if r >= 1.0:
        return nbytes, 0.0
    q = quant_GBps or hbm_bound_GBps(hbm_Bps / 1e9, QUANT_HBM_EFFICIENCY, db, db * r)
    cc = compressed_comm_cost(uncompressed_bytes=nbytes, uncompressed_comm_s=0.0, method=method,
                              uncompressed_dtype_bytes=db, quant_GBps=q, dequant_GBps=q, spec=ms)
    return cc.comm_bytes, cc.quant_s + cc.dequant_s


def tp_point_collectives(D: float, sp: bool, ag_scale: float = 1.0) -> tuple[tuple[Collective, float, float], ...]:
    """One TP communication point of a layer as (collective, bytes, bytes per element relative to the
    activation dtype's): an all-reduce of D, or with sequence parallelism an all-gather of `ag_scale`·D
    (tp_all_gather_scale: FP8 elements) and a reduce-scatter of D. One rule for the estimator and the
    trace."""
    if sp:
        return ((Collective.ALL_GATHER, D * ag_scale, ag_scale), (Collective.REDUCE_SCATTER, D, 1.0))
    return ((Collective.ALL_REDUCE, D, 1.0),)


def recompute_fraction(layers: int, plan: Plan) -> float:
    """Share of layers whose forward is recomputed (block method: recompute_layers per chunk)."""
    if plan.recompute is not Recompute.FULL or plan.recompute_layers == 0:
        return 1.0
    per_chunk = max(plan.stage_layers) if plan.stage_layers else layers / (plan.pp * plan.vp)
    return min(1.0, plan.recompute_layers / per_chunk)


def _mixed(layers: list[tuple[LayerComm, LayerComm | None, int, int]]) -> LayerComm:
    """Σ over layer kinds of their LayerComm: n layers, r of them with their forward recomputed (the
    second LayerComm)."""
    if len(layers) == 1 and not (layers[0][1] is not None and layers[0][3]):  # one kind, nothing recomputed
        k0, _, n, r = layers[0]
        return k0 if n - r == 1 else _ZERO_COMM.plus(k0, n - r)
    out = _ZERO_COMM
    for k0, k1, n, r in layers:
        out = out.plus(k0, n - r)
        if k1 is not None and r:
            out = out.plus(k1, r)
    return out


@functools.lru_cache(maxsize=4096)
def rank_chunks(stage: int, pp: int, vp: int, placement: Placement) -> tuple[int, ...]:
    """Model chunks (positions) that pipeline rank `stage` holds, by its local chunk index (LOOP: v·pp +
    stage; ZB-V's V: stage and 2pp−1−stage; DualPipe's mirror: stage and pp−1−stage)."""
    if pp == 1:
        return tuple(range(vp))
    if placement is Placement.MIRROR:
        return (stage, pp - 1 - stage)
    if placement is Placement.V:
        return (stage, 2 * pp - 1 - stage)
    return tuple(c * pp + stage for c in range(vp))


def recomputes_forward(plan: Plan, index_in_chunk: int) -> bool:
    """Whether full recompute re-runs the forward of the layer at `index_in_chunk` of its model chunk:
    every layer, or with recompute_layers = k the first k of each chunk (Megatron's
    --recompute-method block --recompute-num-layers k counts per virtual pipeline stage, whatever
    the chunk's size). One rule for the estimator and the trace."""
    return plan.recompute is Recompute.FULL and (plan.recompute_layers == 0 or index_in_chunk < plan.recompute_layers)


def recomputed_layers(plan: Plan, sizes: tuple[int, ...], chunks: tuple[int, ...], dense_first: int) -> tuple[int, int]:
    """(dense, MoE) layers of a rank's chunks (`chunks` into the per-chunk layer counts `sizes`) whose
    forward full recompute re-runs (recomputes_forward: the first k of each chunk)."""
    if plan.recompute is not Recompute.FULL:
        return 0, 0
    dense = moe = 0
    for v in chunks:
        start, n = sum(sizes[:v]), sizes[v]
        k = n if plan.recompute_layers == 0 else min(plan.recompute_layers, n)
        d = max(0, min(start + k, dense_first) - start)
        dense, moe = dense + d, moe + k - d
    return dense, moe


def _tp_layer_comm(D: float, g: GroupNet, sp: bool, ag_scale: float = 1.0, method: CompressionMethod = CompressionMethod.NONE,
                   e: float = 2.0, hbm_Bps: float = 1.0, quant_GBps: float | None = None) -> tuple[float, float]:
    """(collective seconds, codec seconds) of one TP communication point (tp_point_collectives), each
    collective compressed with `method` (compressed_wire) on elements of `e` bytes."""
    t = codec = 0.0
    for kind, nbytes, width in tp_point_collectives(D, sp, ag_scale):
        wire, c = compressed_wire(nbytes, method, e * width, hbm_Bps, quant_GBps) if method is not _NONE else (nbytes, 0.0)
        t += collective_s(kind, wire, g)
        codec += c
    return t, codec


@functools.lru_cache(maxsize=65536)  # pure; the planner asks for the same ranks and links over and over
def stage_sends_s(rank: int, pp: int, vp: int, placement: Placement, p2p_s: float, wrap_s: float) -> tuple[float, float]:
    """(forward, backward) seconds of the stage-boundary sends `rank` makes per micro-batch: each of its
    chunks (rank_chunks) sends its output to the next model chunk and its input gradient to the
    previous one, when another rank holds it (ZB-V's turn at the last rank stays local). Looped chunks
    (1F1B, interleaved) pass between rounds from the last rank to the first and back (`wrap_s`:
    (pp−1)·tp·cp·dp ranks apart, across nodes when that is more than a node), every other send goes
    to a neighbour (`p2p_s`). A DualPipe micro-batch runs one of the rank's two chunks: half of each."""
    if placement is Placement.MIRROR:  # both directions pass rank r between ranks r-1 and r+1
        n = (rank < pp - 1) + (rank > 0)
        return 0.5 * n * p2p_s, 0.5 * n * p2p_s

    def holder(v: int) -> int:
        return (v if v < pp else 2 * pp - 1 - v) if placement is Placement.V else v % pp

    f = b = 0.0
    for v in rank_chunks(rank, pp, vp, placement):
        if v + 1 < pp * vp and holder(v + 1) != rank:
            f += wrap_s if placement is Placement.LOOP and rank == pp - 1 else p2p_s
        if v > 0 and holder(v - 1) != rank:
            b += wrap_s if placement is Placement.LOOP and rank == 0 else p2p_s
    return f, b


def _dp_collective(kind: Collective, params: tuple[float, float], bytes_per_param: float, method: CompressionMethod,
                   groups: tuple[GroupNet, GroupNet], hbm_Bps: float, quant_GBps: float | None) -> tuple[float, float]:
    """(seconds, codec seconds) of one DP collective over a stage's (dense, expert) parameters, each on
    its group (DP, expert DP) and compressed with `method` (compressed_wire); nothing on a group of one."""
    t = codec = 0.0
    for n, g in zip(params, groups, strict=True):
        if n and g.n > 1:
            wire, c = (compressed_wire(n * bytes_per_param, method, bytes_per_param, hbm_Bps, quant_GBps)
                       if method is not _NONE else (n * bytes_per_param, 0.0))
            t += collective_s(kind, wire, g)
            codec += c
    return t, codec


def _chunk_fractions(sizes: Sequence[int], chunks: Sequence[int]) -> tuple[float, ...]:
    """Each of a rank's model chunks' share of its layers (trace/builder.py splits per-micro-batch ZeRO
    traffic so)."""
    n = [sizes[v] for v in chunks]
    return tuple(x / (sum(n) or 1) for x in n)


def _chunk_shares(per_mb: float, head_s: float, sizes: Sequence[int], rank: int, pp: int, vp: int,
                  placement: Placement) -> tuple[float, ...]:
    """Each of a ZB-V or interleaved rank's model chunks' share of its per-micro-batch work
    (schedules.StagePass.chunk_shares): its layers' share of the layers' part (_chunk_fractions), and the
    LM head's passes (`head_s`) on the model's last chunk. The chunks are uneven under --stage-layers
    (2 and 3 layers: halves would price them 2.5 each) and where the LM head is."""
    own = rank_chunks(rank, pp, vp, placement)
    last = len(sizes) - 1
    w = [(per_mb - head_s) * f + (head_s if v == last else 0.0)
         for f, v in zip(_chunk_fractions(sizes, own), own, strict=True)]
    return tuple(x / (sum(w) or 1.0) for x in w)


def _mb_lane(dp_coll: Callable[..., tuple[float, float]], params: tuple[float, float],
             gather: tuple[float, CompressionMethod] | None, grad: tuple[float, CompressionMethod],
             groups: tuple[GroupNet, GroupNet], last_share: float, fractions: tuple[float, ...],
             prefetch: bool, step_gather_s: float = 0.0) -> DpLane:
    """A rank's per-micro-batch ZeRO collectives per model chunk (schedules.DpLane), as the trace issues
    them (trace/from_plan.py): each chunk's fraction of the weights gathered (ZeRO-3; ZeRO-2 gathers
    once per step, `step_gather_s`), and of the gradients reduce-scattered in two parts, the last
    `last_share` after the chunk's last gradient pass."""
    def coll(kind: Collective, f: float, nbytes: tuple[float, CompressionMethod]) -> float:
        return dp_coll(kind, (params[0] * f, params[1] * f), nbytes[0], nbytes[1], groups)[0] if f > 0 else 0.0

    return DpLane(gather_s=tuple(coll(Collective.ALL_GATHER, f, gather) if gather else 0.0 for f in fractions),
                  reduce_early_s=tuple(coll(Collective.REDUCE_SCATTER, f * (1 - last_share), grad) for f in fractions),
                  reduce_last_s=tuple(coll(Collective.REDUCE_SCATTER, f * last_share, grad) for f in fractions),
                  prefetch=prefetch, step_gather_s=step_gather_s)


def tp_regather_hide_s(c: LayerCost, *, split: bool, rec_s: float, cp: bool) -> float:
    """Compute that a layer's two re-gathered sequence-parallel inputs (per-op selective recompute) run
    beside with TP overlap: one forward GEMM time, but no more than its backward pass has left after
    the two backward TP points (dgrad + wgrad GEMMs; dgrad alone when a zero-bubble schedule moves
    wgrad to a W pass) and, with CP, the KV/dKV ring (twice the attention core) took theirs:
    communication cannot hide behind more compute than the pass has (a Llama 3 70B layer at 1k tokens
    has little besides its GEMMs). One rule for the estimator and the trace."""
    gemm = c.gemm_fwd_s
    b_s = c.bwd_s + rec_s - (gemm if split else 0.0)  # the backward (B) pass
    taken = (gemm if split else 2 * gemm) + (2 * c.attn_fwd_s if cp else 0.0)
    return max(0.0, min(gemm, b_s - taken))


def tp_all_gather_scale(plan: Plan, sw: SoftwareProfile) -> float:
    """Bytes of a layer's sequence-parallel all-gather relative to the activation dtype's: f/e when an
    FP8 run's stack gathers the FP8-cast linear inputs and output gradients (torchao float8 tensor
    parallel: the cast runs before the all-gather, torchao/float8/float8_tensor_parallel.py; torchtitan
    docs/float8.md "float8 all-gather ... for TP (by default for Float8Linear)"), else 1. The LM head and
    a MoE block (its router and token dispatch take the BF16 input) keep their all-gathers in the
    activation dtype."""
    prec = plan.precision
    return prec.gemm_dtype.bytes / prec.activation_dtype.bytes if prec.low_precision and sw.fp8_tp_all_gather and plan.sp else 1.0


def zero3_reduce_last_share(plan: Plan, sw: SoftwareProfile, layers: float) -> float:
    """Share of a ZeRO-3 micro-batch's gradient reduce-scatter that must follow its backward: 1/layers
    where the stack reduce-scatters each layer's gradients behind the backward of the layers before it
    (FSDP2 / Megatron-FSDP; preset zero3_grad_reduce_overlap) and DP overlap is on, so only the stage's
    last layer's is never hidden; else all of it. `layers`: those of one model chunk of the rank (a rank
    with several chunks, interleaved, ZB-V or DualPipe, gathers and reduces per chunk: the last layer of
    each chunk's backward). One rule for the estimator and the trace."""
    return 1.0 / max(layers, 1.0) if sw.zero3_grad_reduce_overlap and Dim.DP in plan.overlap else 1.0


def stage_fp8_weight_cast_s(spec: ModelSpec, sl: StageLayers, local_p: float, first: bool, last: bool, plan: Plan,
                            m: int, dev: Device, sw: SoftwareProfile) -> float:
    """FP8/FP4 weight casts of one GPU of a stage per step (model/fp8.py weight_cast_bytes over its linear
    layers' weights): once per step when the stack caches FP8 weights (TE is_first_microbatch) or
    gathers them in FP8 (each rank casts its own shard), else once per micro-batch (torchao, or FSDP
    re-gathering BF16 weights every micro-batch). 0 outside FP8."""
    prec = plan.precision
    e = prec.activation_dtype.bytes
    if not prec.low_precision:
        return 0.0
    per_mb_z3 = plan.zero_stage == 3 and plan.reshard_after_forward
    lin_p = local_p - (P.embedding_params(spec) / plan.tp if first else 0.0) - (P.head_params(spec) / plan.tp if last else 0.0)
    if per_mb_z3 and sw.fp8_param_gather:
        lin_p /= plan.dp * plan.cp  # each rank casts its own shard once, then gathers FP8
    scaling = fp8.resolve(prec, sw.fp8_current_scaling)
    cast = eff.elementwise_s(dev, fp8.weight_cast_bytes(lin_p, e, prec.gemm_dtype.bytes, scaling, dev.fp8_non_tn), sl.total)
    return cast * (1 if (sw.fp8_weight_cache and not per_mb_z3) or sw.fp8_param_gather else m)


def weight_gather_bytes(plan: Plan, sw: SoftwareProfile) -> float:
    """Bytes per parameter of a sharded-weight all-gather: FP8 when the stack gathers FP8 weights."""
    prec = plan.precision
    return prec.gemm_dtype.bytes if prec.low_precision and sw.fp8_param_gather else prec.activation_dtype.bytes


# compute_costs per (model, micro-batch, the plan's choices they depend on, device, stack, π): the planner
# evaluates thousands of plans that differ only in what this does not read (clear_cost_cache empties it
# when the calibration changes)
_COSTS: dict[tuple[object, ...], tuple[dict[bool, LayerCost], LayerCost]] = {}


def clear_cost_cache() -> None:
    _COSTS.clear()


def compute_costs(spec: ModelSpec, b: int, s: int, plan: Plan, dev: Device,
                  sw: SoftwareProfile) -> tuple[dict[bool, LayerCost], LayerCost]:
    """Per-layer costs (dense, MoE) and the LM head's on one GPU for one micro-batch under the stack's
    FP8 recipe and kernel stack (efficiency.PYTORCH_STACK), each pass no faster than the host issues
    its kernels (model/host.py). The result is shared: callers must not modify it."""
    key = (spec, b, s, plan.tp, plan.cp, plan.sp, plan.attention, plan.recompute, plan.precision, plan.expert_tp,
           plan.ep, plan.balance, plan.capacity_factor, dev, sw, eff.PYTORCH_STACK)
    hit = _COSTS.get(key)
    if hit is None:
        if len(_COSTS) >= 65536:
            _COSTS.clear()
        hit = _COSTS[key] = _compute_costs(spec, b, s, plan, dev, sw)
    return hit


def _compute_costs(spec: ModelSpec, b: int, s: int, plan: Plan, dev: Device,
                   sw: SoftwareProfile) -> tuple[dict[bool, LayerCost], LayerCost]:
    prec = plan.precision
    fp8_kw = ({"fp8_attention": sw.fp8_attention, "scaling": fp8.resolve(prec, sw.fp8_current_scaling)}
              if prec.low_precision else {})
    fcap = routed_load(spec, plan, b * s // plan.cp) if spec.moe is not None else 1.0
    etp, tp, cp = plan.expert_tp, plan.tp, plan.cp
    costs: dict[bool, LayerCost] = {
        moe: layer_cost(spec, moe, b, s, tp, cp, plan.sp, plan.attention, plan.recompute, prec, dev,
                        *((etp, fcap) if moe and (etp != tp or fcap != 1.0) else ()), **fp8_kw,
                        **({"ep": plan.ep} if moe else {}))
        for moe in ((False, True) if spec.moe is not None else (False,))
    }
    head = head_cost(spec, b, s, tp, cp, prec, dev)
    if sw.kernels is KernelStack.PYTORCH and eff.PYTORCH_STACK != 1.0:  # efficiency.py: π
        costs = {moe: c.slowed(eff.PYTORCH_STACK) for moe, c in costs.items()}
        head = head.slowed(eff.PYTORCH_STACK)
    local = max(1, spec.moe.experts // plan.ep) if spec.moe is not None else 0
    costs = {moe: c.host_floored(host.layer_host_work(
        moe_layer=moe, linears=host.linear_layers(spec, moe), low_precision=prec.low_precision,
        local_experts=local, per_expert_gemms=sw.kernels is KernelStack.FUSED, op_s=host.op_s(dev),
        layer_ops=host.layer_ops(spec)))
        for moe, c in costs.items()}
    return costs, head


def stage_params(spec: ModelSpec, sl: StageLayers, first: bool, last: bool, plan: Plan) -> tuple[float, float]:
    """(dense params, expert params) held by one GPU of a stage: TP splits the dense weights except
    those every TP rank holds whole (norms, row-parallel biases, router, learned positions:
    params.tp_replicated_*)."""
    return _stage_params(spec, sl, first, last, plan.tp, plan.pp, plan.ep * plan.expert_tp)


@functools.lru_cache(maxsize=65536)  # pure; a search asks for the same stages of the same model over and over
def _stage_params(spec: ModelSpec, sl: StageLayers, first: bool, last: bool, tp: int, pp: int,
                  expert_split: int) -> tuple[float, float]:
    dense = float(sl.dense * P.dense_params_per_layer(spec, False))
    whole = float(sl.dense * P.tp_replicated_per_layer(spec, False))
    experts = 0.0
    if spec.moe is not None:
        dense += sl.moe * P.dense_params_per_layer(spec, True)
        whole += sl.moe * P.tp_replicated_per_layer(spec, True)
        experts = sl.moe * P.expert_params_per_moe_layer(spec) / expert_split
    if first:
        dense += P.embedding_params(spec)
        whole += P.tp_replicated_embedding(spec)
    if last:
        dense += P.head_params(spec) + spec.mtp_layers * P.mtp_own_params(spec)  # MTP: norms + projection
        whole += P.norm_params(spec) * (1 + 2 * spec.mtp_layers)  # the final norm (and MTP's two each)
        if spec.tied_embeddings and pp > 1 and not first:
            dense += spec.vocab * spec.hidden  # Megatron keeps a copy of the word embedding on the last stage
    return (dense - whole) / tp + whole, experts


def estimate(spec: ModelSpec, shape: TrainingShape, cluster: Cluster, plan: Plan, *,
             quant_GBps: float | None = None, software: SoftwareProfile | None = None,
             screen: bool = False) -> Estimate:
    """Predict one optimizer step. The plan must already be checked against the model (Plan.check).
    `quant_GBps` overrides the quantize/dequantize throughput of compressed communication (GB of
    uncompressed input per second, e.g. from `distscope compress bench`). `software` is the stack's
    profile (software/presets.py: ZeRO-3 engine traits, FP8 recipe, per-step fixed cost); None = a
    current stack (software.presets.DEFAULT). Its attention kernel and overlap are the plan's.
    `screen`: the planner's first pass over thousands of plans, where interleaved 1F1B's pipeline takes
    its closed form (schedules.flush_pipeline_s) instead of the walk of its graph, and a flush pipeline's
    per-micro-batch ZeRO streams (1F1B, GPipe or interleaved) are folded into its passes instead of walked
    beside them (each walk costs 1-4 ms: walking them took 43% of the Llama 3 70B search on 64 GPUs). The
    closed form lies from 11% under to 6.6% over the full estimate (uneven stages), folded streams from
    25% under to 20% over it (benchmarks/screen_check.py); the Estimate says `screened`, and the planner
    estimates in full every candidate it keeps."""
    if (why := refusal.refusal(spec, plan)) is not None:
        raise DistscopeError(f"invalid plan: {why} [plan: {plan.degrees()}]")
    sw = software or DEFAULT_SOFTWARE
    rho = eff.OVERLAP_COST  # compute slowdown per second of communication hidden behind it
    dev = cluster.device
    prec = plan.precision
    e = prec.activation_dtype.bytes
    b, s = plan.micro_batch, shape.seq_len
    m = plan.microbatches(shape.global_batch)
    tp, cp, pp, dp = plan.tp, plan.cp, plan.pp, plan.dp
    T = b * s // cp

    g_tp = group_net(cluster, tp, 1)
    g_cp = group_net(cluster, cp, tp)
    etp, ep = plan.expert_tp, plan.ep
    # Megatron's expert grid folds a stage's tp x cp x dp ranks as etp x ep x edp, etp fastest
    # (Liu et al. 2025, MoE parallel folding; megatron/core/parallel_state.py expert groups)
    g_ep = group_net(cluster, ep, etp)
    g_etp = group_net(cluster, etp, 1)
    g_dp = group_net(cluster, dp * cp, tp)  # gradients are reduced over dp x cp (same weights)
    g_edp = group_net(cluster, plan.expert_dp, etp * ep)  # expert gradients: the expert-data-parallel group
    # ZeRO-3 gathers and reduces per parameter group across the whole DP group. The published
    # DeepSpeed ZeRO-3 runs (Narayanan et al. 2021, Table 2: 175B and 530B at 384-2240 A100s) are
    # communication-bound at the per-GPU NIC rate, not the node's aggregated NIC rate that NCCL's
    # multi-channel rings reach for one large buffer, so ZeRO-3 traffic is priced without rail
    # aggregation. Kept across micro-batches (no reshard), FSDP moves one flat buffer per stage per
    # step: priced like the distributed optimizer's.
    per_mb_z3 = plan.zero_stage == 3 and plan.reshard_after_forward
    rails = sw.zero3_rail_aggregation
    g_z3 = group_net(cluster, dp * cp, tp, rails=rails) if per_mb_z3 else g_dp
    g_z3e = group_net(cluster, plan.expert_dp, etp * ep, rails=rails) if per_mb_z3 else g_edp
    g_pp = group_net(cluster, 2, tp * cp * dp) if pp > 1 else None
    traits = plan.traits

    costs, head = compute_costs(spec, b, s, plan, dev, sw)
    rfrac = recompute_fraction(spec.layers, plan)

    # --- per-layer communication (seconds per micro-batch) ---
    D_tp = T * spec.hidden * e
    ag = tp_all_gather_scale(plan, sw)
    # a layer's two TP points (attention, then MLP): an FP8 stack's all-gathers are FP8 where the
    # point feeds FP8 linears, which a MoE block's dispatch is not (tp_all_gather_scale)
    cmp = plan.compression
    none = CompressionMethod.NONE
    tp_m = cmp.tp if cmp is not None else none

    def tp_point(ag_scale: float) -> tuple[float, float]:
        return _tp_layer_comm(D_tp, g_tp, plan.sp, ag_scale, tp_m, e, dev.hbm_Bps, quant_GBps) if tp > 1 else (0.0, 0.0)

    # (seconds, codec seconds) of the two points: the codec (quantize + dequantize of a compressed point)
    # is compute, never hidden
    # a hybrid layer (spec.linear_mixer) has attention_share + linear_share mixer points, each one of D
    mixers = spec.attention_share + spec.linear_share
    mix_t, mix_codec = tp_point(ag)
    tp_points = {moe: ((mix_t * mixers, mix_codec * mixers), tp_point(1.0 if moe else ag)) for moe in costs}
    # per-op selective recompute re-runs a layer's two sequence-parallel all-gathers (its reduce-scatter
    # outputs are saved, op_sac.py)
    tp_regather: dict[bool, tuple[float, float]] = {}
    for moe in costs:
        t_rg = c_rg = 0.0
        if tp > 1 and plan.sp and plan.recompute is Recompute.SELECTIVE_OP:
            for scale in (ag, 1.0 if moe else ag):
                wire, c = compressed_wire(D_tp * scale, tp_m, e * scale, dev.hbm_Bps, quant_GBps)
                t_rg += collective_s(Collective.ALL_GATHER, wire, g_tp)
                c_rg += c
        tp_regather[moe] = (t_rg, c_rg)
    full_rc = plan.recompute is Recompute.FULL
    ep_pass = moe_pass_comm_s(spec, plan, T, e, g_ep, g_etp, cluster) if spec.moe is not None else 0.0
    # DSA's indexer all-gathers its inputs (sequence parallel) and its loss all-reduces its head-summed target
    # over the TP group, both exposed (model/sparse_attention.py)
    dsa_tp = 0.0
    if (sa := spec.sparse_attention) is not None and tp > 1:
        dsa_tp = collective_s(Collective.ALL_REDUCE, sparse_attention.loss_all_reduce_bytes(sa, spec.layers, T, s), g_tp)
        if plan.sp:
            dsa_tp += collective_s(Collective.ALL_GATHER, sparse_attention.sp_gather_bytes(sa, spec, T, e), g_tp)
    cp_x = cp_exchange(spec, T, tp, e)  # the chunk sent per ring step
    cp_step = collective_s(Collective.SEND_RECV, cp_x.nbytes, g_cp) if cp > 1 else 0.0
    cp_hides = cp > 1 and cp_x.overlapped  # ring attention runs beside the core; an all-gather blocks
    a2a_overlap = plan.moe_a2a_overlap and m > 1  # needs another micro-batch's compute to hide behind
    tp_overlap = Dim.TP in plan.overlap and tp > 1
    split = plan.traits.split_backward and pp > 1

    def layer_comm(moe: bool, rec: float) -> LayerComm:
        """Communication of one layer per micro-batch: totals and what stays exposed in the forward
        pass (F) and in the backward pass (B, which includes the recomputed forward when `rec` = 1)."""
        c = costs[moe]
        points = tuple(t for t, _ in tp_points[moe])
        tp_pass = sum(points)  # one pass's two points
        codec_pass = sum(k for _, k in tp_points[moe])
        regather, codec_regather = tp_regather[moe]
        rg_hide = (tp_regather_hide_s(c, split=split, rec_s=rfrac * c.recompute_s, cp=cp_hides)
                   if regather and tp_overlap else 0.0)
        tp_rec = rec * tp_pass + regather  # recomputed forward: the full pass, or the re-gathers
        tp_tot = 2 * tp_pass + tp_rec
        if tp_overlap:
            # forward points hide behind half the forward GEMMs each, backward ones behind dgrad+wgrad
            # (dgrad only when a zero-bubble schedule moves wgrad to a later W pass)
            tp_f = sum(max(0.0, p - c.gemm_fwd_s / 2) for p in points)
            bwd_hide = c.gemm_fwd_s if split else 2 * c.gemm_fwd_s
            tp_b = rec * tp_f + max(0.0, regather - rg_hide) + max(0.0, tp_pass - bwd_hide)
        else:
            tp_f, tp_b = tp_pass, tp_rec + tp_pass
        # hidden communication still slows the compute it runs beside (efficiency.OVERLAP_COST)
        tp_f, tp_b = tp_f + rho * (tp_pass - tp_f), tp_b + rho * (tp_rec + tp_pass - tp_b)
        tp_f += codec_pass + dsa_tp
        tp_b += (1 + rec) * codec_pass + codec_regather + rec * dsa_tp
        tp_tot += (1 + rec) * dsa_tp
        cp_tot = cp_f = cp_b = 0.0
        if cp > 1:
            f = (cp - 1) * cp_step  # cp-1 exchanges of the chunk: ring attention's beside the core (cp_hides)
            bwd = cp_x.backward * f  # ring: KV again plus dKV; DSA's all-gather: the dKV reduce-scatter
            cp_tot = f + bwd + f * rec
            hide = c.attn_fwd_s if cp_hides else 0.0
            cp_f = max(0.0, f - hide)
            cp_b = cp_f * rec + max(0.0, bwd - 2 * hide)
            cp_f, cp_b = cp_f + rho * (f - cp_f), cp_b + rho * (bwd + f * rec - cp_b)
        ep_tot = ep_f = ep_b = 0.0
        if moe:
            ep_tot = ep_pass * (2 + rec)  # dispatch + combine in the forward, the recompute and the backward
            ep_f, ep_b = ep_pass, ep_pass * (1 + rec)
            if a2a_overlap:
                # another micro-batch's all-to-all runs beside this pass's compute (DeepSeek-V3 3.2.1)
                f_avail, b_avail = overlap_budget_s(c, tp_overlap=tp_overlap, cp=cp_hides, rec=rec, split=split,
                                                    regather_s=rg_hide)
                ep_f = overlapped_a2a_s(ep_f, f_avail)[0]
                ep_b = overlapped_a2a_s(ep_b, b_avail)[0]
        return LayerComm(tp_tot=tp_tot, tp_f=tp_f, tp_b=tp_b, cp_tot=cp_tot, cp_f=cp_f, cp_b=cp_b,
                         ep_tot=ep_tot, ep_f=ep_f, ep_b=ep_b)

    # per layer kind, without and (full recompute) with the layer's forward recomputed
    comm = {(moe, rec): layer_comm(moe, float(rec)) for moe in costs for rec in ((False, True) if full_rc else (False,))}

    def layer_s(moe: bool) -> float:
        """One layer's share of its stage's per-micro-batch time (compute + exposed TP/CP/EP)."""
        if moe not in costs:
            return 0.0
        c = costs[moe]
        exposed = (rfrac * comm[moe, True].exposed_s + (1 - rfrac) * comm[moe, False].exposed_s if full_rc
                   else comm[moe, False].exposed_s)
        return c.fwd_s + c.bwd_s + rfrac * c.recompute_s + exposed

    # --- pipeline stages ---
    n_dense_first = spec.moe.dense_layers if spec.moe is not None else spec.layers
    placement = traits.placement
    walk_il = pp > 1 and plan.schedule is Schedule.INTERLEAVED and plan.vp > 1  # more than one chunk per rank
    stages = stage_layers(spec.layers, n_dense_first, pp, plan.vp, plan.stage_layers, placement, spec.mtp_layers)
    n_chunks = pp * plan.vp
    first_ranks = {0, pp - 1} if placement is Placement.MIRROR else {chunk_rank(0, pp, placement)}
    last_ranks = {0, pp - 1} if placement is Placement.MIRROR else {chunk_rank(n_chunks - 1, pp, placement)}
    # per micro-batch a MIRROR rank runs one of its two stages: half its layers on average
    share = 0.5 if placement is Placement.MIRROR else 1.0
    # model chunks a rank holds (per-micro-batch ZeRO traffic moves per chunk, around its own passes)
    chunks_per_rank = 2 if placement is Placement.MIRROR and pp > 1 else plan.vp
    D_pp = T * spec.hidden * spec.residual_streams * e / (tp if plan.sp else 1)  # mHC sends its n streams
    p2p = collective_s(Collective.SEND_RECV, D_pp, g_pp) if g_pp is not None else 0.0
    p2p_per_mb = 2 * p2p * plan.vp if pp > 1 else 0.0
    # interleaved chunks pass from the last rank to the first: (pp-1)·tp·cp·dp ranks apart
    p2p_wrap = (collective_s(Collective.SEND_RECV, D_pp, group_net(cluster, 2, (pp - 1) * tp * cp * dp))
                if pp > 1 and plan.vp > 1 and placement is Placement.LOOP else p2p)

    def blocking_sends(ranks: list[int]) -> tuple[float, float]:
        """(forward, backward) stage-boundary sends per micro-batch on the compute chain without PP
        overlap (the slowest of `ranks`)."""
        if pp == 1 or Dim.PP in plan.overlap:
            return 0.0, 0.0
        sends = [stage_sends_s(i, pp, plan.vp, placement, p2p, p2p_wrap) for i in ranks]
        return max(f for f, _ in sends), max(b for _, b in sends)
    edge_s = p2p if pp > 1 and Dim.PP in plan.overlap else 0.0  # asynchronous sends: latency on the edges

    first_extra = last_extra = 0.0
    parts: list[dict[str, float]] = []
    passes: list[StagePass] = []
    lanes: list[DpLane] = []  # per stage kind, with lane_mode
    stage_after: list[float] = []  # per stage kind: its exposed DP step traffic and optimizer after its last pass
    stage_after_dp: list[float] = []  # per stage kind, 2BW: the DP traffic's part of it
    updates: list[StepUpdate] = []  # per stage kind: its PipeDream-2BW weight update
    # per stage kind of a DualPipe step reducing its gradients once: (reduction, its last bucket,
    # exposed gather, DP traffic, codec and pair sum) for final_grads_windows_s
    mirror_dp: dict[int, tuple[float, float, float, float, float]] = {}
    # overlapped ZeRO-3 in a pipeline: the ranks' DP streams enter the schedule's graph (lane_path_s)
    # instead of each pass carrying its share of them
    # (ZeRO-2's per-micro-batch reduce-scatters too, overlapped)
    # (screening, the streams' exposure is folded into the passes instead: no walk)
    streams = per_mb_z3 or (plan.zero_stage == 2 and Dim.DP in plan.overlap)
    piped_streams = streams and pp > 1 and traits.flush
    lane_mode = piped_streams and not screen
    mem_worst: Memory | None = None
    dp_tot = dp_exp = opt_s = lane = 0.0
    model_flops = hw_flops = 0.0
    # stages with the same layers and role cost the same: evaluate each distinct one once (memory at
    # the kind's first rank, which holds the most in-flight micro-batches)
    kinds: dict[tuple[StageLayers, bool, bool], tuple[int, int]] = {}
    kind_ranks: dict[tuple[StageLayers, bool, bool], list[int]] = {}  # the ranks of each kind
    rank_kind: list[int] = []  # the kind (its index in `kinds`) of each rank
    for i, sl in enumerate(stages):
        key = (sl, i in first_ranks, i in last_ranks)
        n_, at = kinds.get(key, (0, i))
        kinds[key] = (n_ + 1, at)
        ranks_ = kind_ranks.setdefault(key, [])
        ranks_.append(i)
        rank_kind.append(list(kind_ranks).index(key) if len(ranks_) == 1 else rank_kind[ranks_[0]])
    wbytes = weight_gather_bytes(plan, sw)
    fp8_run = prec.low_precision
    dp_coll = functools.partial(_dp_collective, hbm_Bps=dev.hbm_Bps, quant_GBps=quant_GBps)
    sizes = chunk_sizes(spec.layers, pp, plan.vp, plan.stage_layers)
    # the pipeline priced on its graph per model chunk (ZB-V; interleaved 1F1B but in screening)
    walk_chunks = (pp > 1 and placement is Placement.V) or (walk_il and not screen)
    for (sl, first, last), (count, at), kranks in zip(kinds, kinds.values(), kind_ranks.values(), strict=True):
        # (layer kind, layers, of which their forward recomputed); selective recompute: every layer's part
        recs = recomputed_layers(plan, sizes, rank_chunks(at, pp, plan.vp, placement), n_dense_first) if full_rc else (0, 0)
        layers = ((False, sl.dense, recs[0]), (True, sl.moe, recs[1]))
        lc = [(costs[moe], comm[moe, False], comm.get((moe, True)), n, r) for moe, n, r in layers if n]
        fwd = sum(c.fwd_s * n for c, _, _, n, _ in lc)
        bwd = sum(c.bwd_s * n + c.recompute_s * (r if full_rc else rfrac * n) for c, _, _, n, r in lc)
        wgrad = sum(c.gemm_fwd_s * n for c, _, _, n, _ in lc)  # weight-gradient GEMMs
        flops = sum(c.model_flops * n for c, _, _, n, _ in lc)
        rflops = sum(c.recompute_flops * (r if full_rc else rfrac * n) for c, _, _, n, r in lc)
        sc = _mixed([(k0, k1, n, r) for _, k0, k1, n, r in lc])
        tp_tot, tp_f, tp_b, cp_tot, cp_f, cp_b = sc.tp_tot, sc.tp_f, sc.tp_b, sc.cp_tot, sc.cp_f, sc.cp_b
        ep_tot, ep_f, ep_exp = sc.ep_tot, sc.ep_f, sc.ep_f + sc.ep_b
        head_s = 0.0  # the LM head's passes (and their TP traffic), on the model's last chunk
        if last:
            fwd += head.fwd_s
            bwd += head.bwd_s
            wgrad += head.gemm_fwd_s
            flops += head.model_flops
            x = 0.0
            if tp > 1:  # LM head input: all-gather forward + reduce-scatter backward (SP), or one backward all-reduce
                x = _tp_layer_comm(D_tp, g_tp, plan.sp)[0]
                tp_tot += x
                tp_f += x / 2 if plan.sp else 0.0
                tp_b += x / 2 if plan.sp else x
            last_extra = head_s = head.fwd_s + head.bwd_s + x
        if first and tp > 1:  # vocab-parallel embedding output reduction
            x = _tp_layer_comm(D_tp, g_tp, plan.sp)[0] / (1 if not plan.sp else 2)
            tp_tot += x
            tp_f += x
            first_extra = x
        tp_exp, cp_exp = tp_f + tp_b, cp_f + cp_b
        dense_p, expert_p = stage_params(spec, sl, first, last, plan)
        local_p = dense_p + expert_p
        gbytes = plan.grad_reduce_dtype.bytes
        g_m = cmp.dp_grad if cmp is not None else none
        w_m = cmp.weights if cmp is not None else none

        params = (dense_p, expert_p)

        # --- data-parallel communication of this stage ---
        # codec: quantize + dequantize of compressed DP traffic, compute, never hidden: per micro-batch
        # in its forward (z3_codec_f) and backward (z3_codec_b) where the collective is per micro-batch,
        # else once per step (codec)
        # z3_codec_f: one gather's codec, z3_codec_rs: the reduce-scatter's
        z3_ag = z3_rs = z3_codec_f = z3_codec_rs = codec = 0.0
        on_stream = (0.0, 0.0, 0.0)  # 2BW with DP overlap: (reduction, gather, exposed beyond the window)
        if per_mb_z3:
            # per micro-batch: all-gather weights for forward and again for backward, reduce-scatter grads
            z3_ag, z3_codec_f = dp_coll(Collective.ALL_GATHER, params, wbytes, w_m, (g_z3, g_z3e))
            z3_rs, z3_codec_rs = dp_coll(Collective.REDUCE_SCATTER, params, gbytes, g_m, (g_z3, g_z3e))
            z3_ag *= 2
            t_dp_step = 0.0
        elif plan.shards_optimizer:
            t_rs, rs_codec = dp_coll(Collective.REDUCE_SCATTER, params, gbytes, g_m, (g_dp, g_edp))
            t_ag, codec = dp_coll(Collective.ALL_GATHER, params, wbytes, w_m, (g_dp, g_edp))
            if plan.zero_stage == 2:
                z3_codec_rs = rs_codec  # reduce-scattered every micro-batch
            else:
                codec += rs_codec
            t_dp_step = t_rs + t_ag
        else:
            t_rs, codec = dp_coll(Collective.ALL_REDUCE, params, gbytes, g_m, (g_dp, g_edp))
            t_ag = 0.0
            t_dp_step = t_rs
        pair = 0.0
        if placement is Placement.MIRROR and g_pp is not None:
            # DualPipe: ranks r and pp-1-r hold the same two stages; their (DP-reduced) gradient shards
            # are summed between the pair after the DP reduction (DeepSeek-V3 sec. 3.2.1: two copies of
            # the parameters); nothing is left to hide it behind
            # the pair of rank i is (i, pp-1-i), (pp-1-2i)·tp·cp·dp ranks apart: the outer pairs span the
            # most of the topology (the slowest rank of the kind counts)
            shard_ways = dp * cp if plan.shards_optimizer else 1
            pair = max(collective_s(Collective.ALL_REDUCE, local_p * gbytes / shard_ways,
                                    group_net(cluster, 2, abs(pp - 1 - 2 * i) * tp * cp * dp))
                       for i in kranks)
        # a micro-batch's gradient reduce-scatter needs its weight gradients: behind the backward, or
        # only behind the W pass (with its own codec) when a zero-bubble schedule splits it off, where its
        # exposed part then sits (z3_w)
        # (the DP stream runs beside everything else the micro-batch's pass does on the compute chain:
        # its compute, codec passes and exposed TP/CP/EP communication on their own streams)
        # the rank's forward / backward passes on the compute chain, exposed TP/CP/EP communication
        # included: step-level DP traffic hides behind the first forward and the last backward of each
        # of the rank's chunks (one micro-batch's; a DualPipe rank's two chunks in two micro-batches),
        # the gradient reduction behind the last pass that makes each chunk's weight gradients (a W
        # pass where a zero-bubble schedule splits it off: schedules.final_grad_passes)
        fwd_wall = fwd + tp_f + cp_f + ep_f
        bwd_wall = bwd + tp_b + cp_b + ep_exp - ep_f
        # (DualPipe splits a backward only in its zero-bubble phases; its steady-state B passes are whole
        # and each runs beside another micro-batch's forward, which the reduce-scatter has too)
        rs_split = split and plan.schedule is not Schedule.DUALPIPE
        rs_hide = (wgrad if rs_split else bwd_wall) + z3_codec_rs + (fwd_wall if placement is Placement.MIRROR else 0.0)
        last_share = zero3_reduce_last_share(plan, sw, sl.total / chunks_per_rank)
        # each model chunk's share of the rank's per-micro-batch ZeRO traffic (lane_mode)
        fractions = (_chunk_fractions(sizes, rank_chunks(at, pp, plan.vp, placement))
                     if lane_mode and chunks_per_rank > 1 else (1.0,))
        # z3_tail: what a micro-batch waits for on the DP stream after its last gradient pass sent its
        # input gradient on (builder.py: overlapped gathers joined there, then the reduce-scatter): on
        # the rank's own timeline, not on the path between stages that fills and drains the pipeline;
        # in the W pass when a zero-bubble schedule splits the backward (z3_w)
        z3_w = z3_tail = 0.0
        if per_mb_z3:
            # Overlap prefetches the gathers behind compute; the gradient reduce-scatter stays on the
            # critical path (the ZeRO-3 rows of Narayanan et al. 2021, Table 2 are only consistent
            # with that: their step time is max(compute, gathers) + reduce-scatter). One gather is
            # issued with the micro-batch's forward, the other with its backward (FSDP's pre-forward
            # and pre-backward hooks); communication hides behind any of the micro-batch's compute, its
            # codec passes included, but the gathers and the reduce-scatter share the DP group's one
            # stream (one NCCL communicator per process group, as the simulator runs them), so a
            # micro-batch takes at least their sum.
            codecs = 2 * z3_codec_f + z3_codec_rs
            ag1 = z3_ag / 2
            z3_rs_exp = max(z3_rs * last_share, z3_rs - rs_hide)
            if Dim.DP not in plan.overlap:  # blocking: each gather when its pass starts, the reduce-scatter after
                z3_hid = z3_ag + z3_rs
                z3_f = ag1 + z3_codec_f
            else:
                # the backward's gather and the reduce-scatter go with the backward, waited for at its end;
                # the forward's gather has the forward, and with a pipeline interleaving micro-batches
                # (1F1B) the passes between a micro-batch's forward and backward too, but right after
                # its forward comes its own backward without one (pp = 1) or in GPipe: what does not
                # fit beside the forward spills into the backward's share of the stream
                # (DualPipe runs a backward beside another micro-batch's forward: that pair is the window)
                spill = max(0.0, ag1 - fwd_wall - z3_codec_f) if pp == 1 or plan.schedule is Schedule.GPIPE else 0.0
                busy_b = bwd_wall + z3_codec_f + z3_codec_rs
                if placement is Placement.MIRROR:
                    busy_b += fwd_wall + z3_codec_f
                z3_hid = max(max(0.0, ag1 + spill - busy_b) + z3_rs_exp, ag1 + spill + z3_rs - busy_b,
                             z3_ag + z3_rs - (fwd_wall + bwd_wall + codecs))
                z3_f = z3_codec_f
            z3_exp = z3_hid + rho * (z3_ag + z3_rs - z3_hid) + codecs
            # overlapped gathers are waited for after the micro-batch's last gradient pass, with the
            # reduce-scatter; blocking ones run when their pass starts, on the path between stages
            z3_tail = z3_exp - codecs - (0.0 if Dim.DP in plan.overlap else z3_ag)
            if lane_mode:  # the stream's own timeline prices the collectives (lane_path_s)
                lanes.append(_mb_lane(dp_coll, params, (wbytes, w_m), (gbytes, g_m), (g_z3, g_z3e), last_share,
                                      fractions, Dim.DP in plan.overlap))
                z3_exp -= z3_hid
                z3_f = z3_codec_f
                z3_tail = 0.0
            z3_w = z3_tail + z3_codec_rs if rs_split else 0.0
            stage_dp_tot, stage_dp_exp = (z3_ag + z3_rs + codecs) * m * share, 0.0
        elif plan.zero_stage == 2:
            # ZeRO-2 keeps only a gradient shard, so every micro-batch's gradients are reduce-scattered
            # before the next one accumulates (DeepSpeed stage 2; FSDP SHARD_GRAD_OP with gradient
            # sync), layer by layer behind its backward as ZeRO-3's (zero3_reduce_last_share); only the
            # weight all-gather is once per step, after the optimizer (hidden behind the next forward).
            rs_exp = max(t_rs * last_share, t_rs - rs_hide) if Dim.DP in plan.overlap else t_rs
            z3_exp = rs_exp + rho * (t_rs - rs_exp) + z3_codec_rs
            z3_tail = z3_exp - z3_codec_rs
            z3_f = 0.0
            stage_dp_tot = (t_rs + z3_codec_rs) * m * share + t_ag + codec
            stage_dp_exp = (max(0.0, t_ag - fwd_wall) if Dim.DP in plan.overlap else t_ag) + codec
            if lane_mode:  # the reduce-scatters and the step's gather on the stream's timeline (lane_path_s)
                lanes.append(_mb_lane(dp_coll, params, None, (gbytes, g_m), (g_dp, g_edp), last_share,
                                      fractions, True, t_ag))
                z3_exp -= rs_exp
                z3_tail = 0.0
                stage_dp_exp = codec
            z3_w = z3_tail + z3_codec_rs if rs_split else 0.0
        else:
            # DDP, distributed optimizer, and FSDP keeping parameters gathered across micro-batches
            # (one all-gather before the first forward, one reduce-scatter after the last backward)
            z3_exp = z3_f = 0.0
            stage_dp_tot = t_dp_step
            if not traits.flush:
                # PipeDream-2BW: the step's gradient reduction and weight gather run beside the next
                # step's micro-batches (no flush; the update is one step stale by design), until the
                # step after that needs the new weights: on rank s, 1F1B leaves m − pp + s + 1 of the
                # next step's forward/backward pairs between the two
                window = max(0, m - pp + at + 1) * share * (fwd_wall + bwd_wall)
                stage_dp_exp = max(0.0, t_dp_step - window) if Dim.DP in plan.overlap else t_dp_step
                if Dim.DP in plan.overlap:  # the DP stream's part, on the steady-state graph's timeline
                    on_stream = (t_rs, t_ag, stage_dp_exp)
            elif Dim.DP in plan.overlap:
                last_bucket = t_dp_step * min(1.0, DDP_BUCKET_PARAMS / max(local_p, 1.0))
                n_b, n_w = final_grad_passes(plan.schedule, at, pp, m, plan.vp)
                window = (n_b * bwd_wall + n_w * wgrad) / chunks_per_rank
                stage_dp_exp = max(last_bucket, t_rs - window) + max(0.0, t_ag - fwd_wall)
                if placement is Placement.MIRROR and pp > 1:
                    # a DualPipe rank's two chunks make their last gradients far apart; the reduction
                    # also runs while the rank waits between them: windowed on the graph below
                    mirror_dp[len(passes)] = (t_rs, last_bucket, max(0.0, t_ag - fwd_wall), stage_dp_tot,
                                              codec + pair)
            else:
                stage_dp_exp = t_dp_step
            stage_dp_exp += rho * max(0.0, stage_dp_tot - stage_dp_exp)
            stage_dp_tot += codec
            stage_dp_exp += codec
        stage_dp_tot += pair
        stage_dp_exp += pair
        # what the stage's data-parallel stream carries in a step, one collective after the other
        # (per-micro-batch ZeRO traffic, the step's gathers, the DualPipe pair's sum): a lower bound on
        # the step, whatever compute its parts hide behind
        if per_mb_z3:
            lane = max(lane, (z3_ag + z3_rs) * m * share + pair)
        elif plan.zero_stage == 2:
            lane = max(lane, t_rs * m * share + t_ag + pair)
        pp_f, pp_b = blocking_sends(kranks)
        f_s = (fwd + tp_f + cp_f + ep_f + z3_f) * share + pp_f
        per_mb = (fwd + bwd + tp_exp + cp_exp + ep_exp + z3_exp) * share + pp_f + pp_b
        w_s = (wgrad + z3_w) * share if split else 0.0
        passes.append(StagePass(f_s=f_s, b_s=per_mb - f_s - w_s, w_s=w_s, tail_s=0.0 if rs_split else z3_tail * share,
                                chunk_shares=_chunk_shares(per_mb, head_s, sizes, at, pp, chunks_per_rank, placement)
                                if walk_chunks else ()))
        parts.append({"compute": (fwd + bwd) * share, "tp": tp_exp * share, "cp": cp_exp * share,
                      "ep": ep_exp * share, "pp": pp_f + pp_b, "dp": z3_exp * share, "tp_tot": tp_tot * share,
                      "cp_tot": cp_tot * share, "ep_tot": ep_tot * share, "dp_tot_step": stage_dp_tot,
                      "dp_exp_step": stage_dp_exp})
        model_flops += flops * count * share
        hw_flops += (flops + rflops) * count * share
        # --- optimizer step (memory-bound Adam over the local shard) ---
        shard = (dp * cp) if plan.shards_optimizer else 1
        stage_opt = mem_time_s(ADAM_BYTES_PER_PARAM * local_p / shard, dev.hbm_Bps)
        if fp8_run:
            stage_opt += stage_fp8_weight_cast_s(spec, sl, local_p, first, last, plan, m, dev, sw)
        opt_s = max(opt_s, stage_opt)
        stage_after.append(stage_dp_exp + stage_opt)
        # PipeDream-2BW: the update on the compute chain is what the DP stream does not hide (all of it
        # when the collectives block), and with DP overlap the codec, interference and optimizer
        if not traits.flush:
            stage_after_dp.append(stage_dp_exp)
            updates.append(StepUpdate(compute_s=stage_dp_exp - on_stream[2] + stage_opt, reduce_s=on_stream[0],
                                      gather_s=on_stream[1]))
        dp_tot = max(dp_tot, stage_dp_tot)
        dp_exp = max(dp_exp, stage_dp_exp)
        # --- memory of this stage ---
        mem = _stage_memory(spec, sl, dense_p, expert_p, first, last, plan, b, s, m, at, sw.fused_cross_entropy)
        if mem_worst is None or mem.total_bytes > mem_worst.total_bytes:
            mem_worst = mem

    stage_t = [p.total_s for p in passes]
    t_max = max(stage_t)
    per_stage = tuple(stage_t[j] for j in rank_kind)
    k = stage_t.index(t_max)
    rank_passes = [passes[j] for j in rank_kind]
    if walk_il and not screen:
        pipe = interleaved_path_s(tuple(rank_passes), m, plan.vp, edge_s, p2p_wrap if edge_s else 0.0)
    elif plan.schedule in _FLUSH_FORMULA:
        pipe = flush_pipeline_s(rank_passes, m, plan.vp, edge_s, p2p_wrap)
    else:
        pipe = pipeline_s(plan.schedule, rank_passes, m, plan.vp, edge_s)
    if not traits.flush and pp > 1:
        # PipeDream-2BW: each rank's per-step update stalls the coupled steady state as far as the
        # other ranks' slack lets it (schedules.pipedream_2bw_s); the exposed part is reported as the
        # largest update splits into DP traffic and optimizer
        exposed = max(0.0, pipedream_2bw_s(rank_passes, m, edge_s, [updates[j] for j in rank_kind]) - pipe)
        big = max(range(len(stage_after)), key=stage_after.__getitem__)
        share_dp = stage_after_dp[big] / stage_after[big] if stage_after[big] > 0 else 0.0
        dp_exp, opt_s = exposed * share_dp, exposed * (1.0 - share_dp)
    if mirror_dp and len(mirror_dp) == len(passes):
        ends = []
        for (finish, window), j in zip(final_grads_windows_s(plan.schedule, rank_passes, m, edge_s, 2), rank_kind,
                                       strict=True):
            red, bucket, gather, tot, extra = mirror_dp[j]
            e = max(bucket, red - window) + gather
            ends.append(finish + e + rho * max(0.0, tot - e) + extra)
        dp_exp = max(0.0, max(ends) - pipe)
    lane_exp = 0.0  # what the DP streams add to the pipeline (lane_mode), reported as dp
    if lane_mode and any(any(ln.gather_s) or any(ln.reduce_last_s) or ln.step_gather_s for ln in lanes):
        lane_exp = max(0.0, lane_path_s(plan.schedule, rank_passes, [lanes[j] for j in rank_kind], m, edge_s,
                                        plan.vp, p2p_wrap if edge_s else 0.0) - pipe)
        pipe += lane_exp
    tied_sync = 0.0
    if spec.tied_embeddings and pp > 1 and placement is Placement.LOOP:  # embedding-gradient all-reduce between first and last stage
        tied_sync = collective_s(Collective.ALL_REDUCE, spec.vocab * spec.hidden / tp * plan.grad_reduce_dtype.bytes,
                                 group_net(cluster, 2, tp * cp * dp * (pp - 1)))
        if not traits.flush and Dim.DP in plan.overlap:
            tied_sync = 0.0  # hidden with the rest of 2BW's gradient traffic
        elif not traits.flush:
            # PipeDream-2BW with blocking gradient collectives (Megatron's finalize_model_grads): every
            # step the last stage waits in the embedding all-reduce for the first stage's last backward,
            # the drain of the step's last micro-batch through the stages before it
            # (a stage sends its input gradient on before its own per-micro-batch tail, the gradient
            # reduce-scatter: only the first stage's tail is on that path, and the last stage's runs
            # while it waits)
            tied_sync += max(0.0, sum(rp.b_s + rp.w_s - rp.tail_s for rp in rank_passes[:-1]) + rank_passes[0].tail_s
                             + (pp - 1) * edge_s - rank_passes[-1].tail_s)
    opt_s += sw.step_overhead_s  # per-step fixed costs the software's timings include
    step = max(pipe + dp_exp, lane) + opt_s + tied_sync
    if plan.schedule in (Schedule.ONE_F_ONE_B, Schedule.GPIPE) and pp > 1 and not lane_exp:
        # each rank reduces its gradients and steps its optimizer after its own last backward; in the
        # drain rank r finishes that backward one backward of rank r - 1 (and a transfer) before rank
        # r - 1 finishes its own, so a larger optimizer on a later rank (the LM head's, or a stage with
        # more layers) need not add to the step in full
        end, ends = pipe, []
        for r, j in enumerate(rank_kind):
            if r:
                prev = rank_passes[r - 1]
                end -= prev.b_s + prev.w_s + edge_s - rank_passes[r].tail_s
            ends.append(end + stage_after[j])
        step = max(max(ends) + sw.step_overhead_s, lane + opt_s) + tied_sync

    bk = parts[k]
    bd = {key: m * bk[key] for key in ("compute", "tp", "cp", "ep", "pp")}
    bd["dp"] = m * bk["dp"] + dp_exp + tied_sync + lane_exp
    bd["optimizer"] = opt_s
    bd["bubble"] = step - sum(bd.values())
    comm_total = {
        "tp": m * max(p["tp_tot"] for p in parts), "cp": m * max(p["cp_tot"] for p in parts),
        "ep": m * max(p["ep_tot"] for p in parts), "pp": m * p2p_per_mb * share, "dp": dp_tot + tied_sync,
    }

    n = cluster.num_gpus
    mf = model_flops * m * dp * cp * tp  # model FLOPs summed over all GPUs (each term is per GPU)
    hf = hw_flops * m * dp * cp * tp
    peak = dev.flops(prec.gemm_dtype)
    assert mem_worst is not None
    return Estimate(
        step_time_s=step, breakdown_s=bd, comm_total_s=comm_total,
        tokens_per_s=shape.tokens / step, model_flops=mf, hardware_flops=hf,
        mfu=mf / (step * n * peak), hfu=hf / (step * n * peak), tflops_per_gpu=mf / (step * n) / 1e12,
        memory=mem_worst, capacity_bytes=cluster.memory_capacity_bytes, usable_bytes=dev.usable_bytes, microbatches=m, stage_time_s=per_stage,
        layer_times=LayerTimes(dense_s=layer_s(False), moe_s=layer_s(True), first_s=first_extra, last_s=last_extra),
        screened=screen and (walk_il or piped_streams),
    )


def _stage_memory(spec: ModelSpec, sl: StageLayers, dense_p: float, expert_p: float, first: bool, last: bool,
                  plan: Plan, b: int, s: int, m: int, stage: int = 0, fused_loss: bool = False) -> Memory:
    e = plan.precision.activation_dtype.bytes
    dpc = plan.dp * plan.cp
    edp = plan.expert_dp
    z3 = plan.zero_stage == 3
    wshard, eshard = (dpc, edp) if z3 and plan.reshard_after_forward else (1, 1)
    wbytes = (dense_p / wshard + expert_p / eshard) * e * weight_versions(plan.schedule)
    fm = FRAMEWORK_MEMORY[plan.framework]
    if z3 and plan.reshard_after_forward:  # two gathered layers in flight (current + prefetch)
        per_layer = dense_p / max(sl.total, 1) + expert_p / max(sl.moe, 1)
        wbytes += 2 * per_layer * e
        if fm.fsdp_fp32_shards:  # no shard in the activation dtype: the fp32 master shard is the parameter
            wbytes -= (dense_p / wshard + expert_p / eshard) * e * weight_versions(plan.schedule)
        if fm.fsdp_root_gathered:  # embedding / final norm and LM head stay gathered all step
            wbytes += ((P.embedding_params(spec) if first else 0.0) + (P.head_params(spec) if last else 0.0)) / plan.tp * e
    g = plan.grad_reduce_dtype.bytes
    # ZeRO-2 and per-micro-batch FSDP keep a gradient shard; FSDP kept across micro-batches
    # accumulates unsharded gradients (torch.distributed.pipelining defers the reduce-scatter to the
    # last backward) and so does the distributed optimizer
    gshard = plan.zero_stage == 2 or (z3 and plan.reshard_after_forward)
    gbytes = (dense_p / (dpc if gshard else 1) + expert_p / (edp if gshard else 1)) * g
    shard = plan.shards_optimizer
    obytes = (dense_p / (dpc if shard else 1) + expert_p / (edp if shard else 1)) * MASTER_BYTES_PER_PARAM
    per_mb = wonly = 0.0
    rfrac = recompute_fraction(spec.layers, plan)
    held, held_w = inflight_sets(plan.schedule, stage, plan.pp, plan.vp, m)
    for moe_layer, n in ((False, sl.dense), (True, sl.moe)):
        if n:
            full = activation_bytes_per_layer(spec, moe_layer, b, s, plan)
            if plan.recompute is Recompute.FULL and rfrac < 1.0:  # block recompute: other layers keep everything
                keep = activation_bytes_per_layer(spec, moe_layer, b, s, plan, Recompute.NONE)
                full = rfrac * full + (1 - rfrac) * keep
            per_mb += n * full
            if held_w:  # zero-bubble schedules: inputs kept for the deferred weight-gradient passes
                wonly += n * wgrad_input_bytes_per_layer(spec, moe_layer, b, s, plan)
    act = per_mb * held + wonly * held_w
    T = b * s / plan.cp
    logits = T * spec.vocab / plan.tp
    loss_held, loss_peak = fm.loss_bytes(logits, e, plan.tp, fused_loss)
    if last:  # the loss's logits copies held through the last stage's backward (framework_memory.py)
        act += loss_held + fm.head_input_bytes(T * spec.hidden, e, plan.tp, plan.sp)
        if fm.pipeline_keeps_outputs and plan.pp > 1:
            act += m * logits * e
        # Transient peak on top of what is held: the loss's own peak (the fp32 gradient of the logits)
        # at the start of the last stage's backward. (One recomputed layer's activations under full or
        # per-op selective recompute would be another, but the published DeepSpeed ZeRO-3 529.6B run —
        # Narayanan et al. 2021 Table 2, mb 4, unfused attention — fits in 80 GB only without it, so it
        # is not added.)
        act += loss_peak
    if first:
        act += T * spec.hidden * e * held / max(sl.total, 1)
    return Memory(weights_bytes=wbytes, grads_bytes=gbytes, optimizer_bytes=obytes, activations_bytes=act,
                  workspace_bytes=WORKSPACE_BYTES)


__all__ = ["AttentionImpl", "estimate"]
