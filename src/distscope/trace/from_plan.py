"""A training step's structure (builder.StepSpec) from (model, training shape, cluster, plan).

Every number comes from the foundation's cost functions, composed the way `model.estimate` composes
them; this file only decides where each piece sits in the per-rank graphs:
* compute per layer: `model.layer.layer_cost` (forward; backward plus the plan's recompute), the LM
  head `head_cost` on the last chunk;
* TP points (2 per layer forward, 2 backward, 2 per recomputed layer): all-reduce, or all-gather +
  reduce-scatter with sequence parallelism; with TP overlap each forward point runs alongside half the
  layer's forward GEMM time and each backward point alongside a full forward GEMM time (estimate.py);
* CP ring attention: (cp-1) KV exchanges per forward, as a ring all-gather of the KV chunk on the CP
  group ((cp-1)(α + kv/B), the estimator's (cp-1) send_recv steps), hidden behind the attention core;
* EP all-to-all dispatch + combine, forward and backward;
* PP activations T·h·e (÷tp with SP) per micro-batch, blocking sends unless PP overlap;
* DP per stage: gradient all-reduce (or reduce-scatter + parameter all-gather with a sharded
  optimizer), with DP overlap all but the last DDP bucket (model.estimate.DDP_BUCKET_PARAMS) start with
  the final backward; ZeRO-3 gathers weights twice and reduce-scatters gradients per micro-batch;
  tied word-embedding gradients between first and last stage; the memory-bound Adam step.
MoE expert gradients are reduced on the DP group (the estimator uses the expert-data-parallel group).
"""

from __future__ import annotations

import dataclasses

from distscope.model.efficiency import mem_time_s
from distscope.model.estimate import (
    ADAM_BYTES_PER_PARAM,
    DDP_BUCKET_PARAMS,
    recompute_fraction,
    stage_params,
)
from distscope.model.layer import head_cost, layer_cost
from distscope.model.stages import chunk_sizes, stage_layers
from distscope.plan import Dim, Plan, Recompute
from distscope.system.topology import Cluster
from distscope.trace.builder import CommOp, Group, LayerCost, StageExtras, StepSpec
from distscope.trace.graph import CollKind
from distscope.workload.spec import ModelSpec
from distscope.workload.training import TrainingShape

AR, AG, RS, A2A = CollKind.ALL_REDUCE, CollKind.ALL_GATHER, CollKind.REDUCE_SCATTER, CollKind.ALL_TO_ALL


def _tp_point(D: int, tp: int, sp: bool, hide_s: float) -> list[CommOp]:
    """One TP communication point: all-reduce of D, or all-gather (shard D/tp) + reduce-scatter of D."""
    if tp == 1:
        return []
    if sp:
        return [
            CommOp(group=Group.TP, kind=AG, size_bytes=D // tp, hide_s=hide_s),
            CommOp(group=Group.TP, kind=RS, size_bytes=D, with_previous=True),
        ]
    return [CommOp(group=Group.TP, kind=AR, size_bytes=D, hide_s=hide_s)]


def step_spec(spec: ModelSpec, shape: TrainingShape, cluster: Cluster, plan: Plan) -> StepSpec:
    """The StepSpec of one optimizer step of `plan` (which must already be checked against the model)."""
    dev = cluster.device
    prec = plan.precision
    e = prec.activation_dtype.bytes
    b, s = plan.micro_batch, shape.seq_len
    tp, cp, pp, dp, vp = plan.tp, plan.cp, plan.pp, plan.dp, plan.vp
    m = plan.microbatches(shape.global_batch)
    T = b * s // cp
    sp = plan.sp
    tp_overlap = Dim.TP in plan.overlap
    full = plan.recompute is Recompute.FULL
    rfrac = recompute_fraction(spec.layers, plan)

    costs = {
        moe: layer_cost(spec, moe, b, s, tp, cp, plan.sp, plan.attention, plan.recompute, prec, dev)
        for moe in ((False, True) if spec.moe is not None else (False,))
    }
    head = head_cost(spec, b, s, tp, cp, prec, dev)
    D_tp = round(T * spec.hidden * e)
    n_dense_first = spec.moe.dense_layers if spec.moe is not None else spec.layers
    sizes = chunk_sizes(spec.layers, pp, vp, plan.stage_layers)
    per_chunk = max(sizes)
    k_recompute = round(rfrac * per_chunk) if full else 0

    chunks: list[tuple[LayerCost, ...]] = []
    start = 0
    for v, n in enumerate(sizes):
        layers: list[LayerCost] = []
        if v == 0 and tp > 1:  # vocab-parallel embedding output reduction (one RS with SP)
            op = CommOp(group=Group.TP, kind=RS if sp else AR, size_bytes=D_tp)
            layers.append(LayerCost(name="embedding", fwd_s=0.0, bwd_s=0.0, fwd_comm=(op,)))
        for i in range(n):
            moe = start + i >= n_dense_first
            c = costs[moe]
            recomputes = full and (plan.recompute_layers == 0 or i < k_recompute)
            fh = c.gemm_fwd_s / 2 if tp_overlap else 0.0
            bh = c.gemm_fwd_s if tp_overlap else 0.0
            fwd: list[CommOp] = _tp_point(D_tp, tp, sp, fh) + _tp_point(D_tp, tp, sp, fh)
            bwd: list[CommOp] = []
            if recomputes:
                bwd += _tp_point(D_tp, tp, sp, fh) + _tp_point(D_tp, tp, sp, fh)
            bwd += _tp_point(D_tp, tp, sp, bh) + _tp_point(D_tp, tp, sp, bh)
            if cp > 1:
                kv = round(2 * T * max(spec.kv_heads // tp, 1) * spec.dhead * e)
                fwd.append(CommOp(group=Group.CP, kind=AG, size_bytes=kv, hide_s=c.attn_fwd_s))
                if recomputes:
                    bwd.append(CommOp(group=Group.CP, kind=AG, size_bytes=kv, hide_s=c.attn_fwd_s))
                bwd.append(CommOp(group=Group.CP, kind=AG, size_bytes=kv, hide_s=2 * c.attn_fwd_s))
                bwd.append(CommOp(group=Group.CP, kind=AG, size_bytes=kv, with_previous=True))
            if moe and plan.ep > 1:
                assert spec.moe is not None
                a2a = CommOp(group=Group.EP, kind=A2A, size_bytes=round(T * spec.moe.top_k * spec.hidden * e))
                fwd += [a2a, a2a]
                bwd += [a2a, a2a] * (2 if recomputes else 1)
            rec_s = (c.recompute_s if recomputes else 0.0) if full else rfrac * c.recompute_s
            layers.append(
                LayerCost(
                    name=f"layer{start + i}",
                    fwd_s=c.fwd_s,
                    bwd_s=c.bwd_s + rec_s,
                    fwd_flops=round(c.model_flops / 3),
                    bwd_flops=round(2 * c.model_flops / 3),
                    fwd_comm=tuple(fwd),
                    bwd_comm=tuple(bwd),
                )
            )
        if v == len(sizes) - 1:
            # LM head input: all-gather forward + reduce-scatter backward (SP), or one backward all-reduce
            point = _tp_point(D_tp, tp, sp, 0.0)
            hf = point[:1] if sp else []
            hb = [dataclasses.replace(op, with_previous=False) for op in point[1:]] if sp else point
            layers.append(
                LayerCost(
                    name="lm_head",
                    fwd_s=head.fwd_s,
                    bwd_s=head.bwd_s,
                    fwd_flops=round(head.model_flops / 3),
                    bwd_flops=round(2 * head.model_flops / 3),
                    fwd_comm=tuple(hf),
                    bwd_comm=tuple(hb),
                )
            )
        chunks.append(tuple(layers))
        start += n

    extras = []
    stages = stage_layers(spec.layers, n_dense_first, pp, vp, plan.stage_layers)
    zero3 = plan.zero_stage == 3
    dp_overlap = Dim.DP in plan.overlap
    gbytes = plan.grad_reduce_dtype.bytes
    ndp = dp * cp
    for i, sl in enumerate(stages):
        first, last = i == 0, i == pp - 1
        dense_p, expert_p = stage_params(spec, sl, first, last, plan)
        local_p = dense_p + expert_p
        shard = ndp if plan.shards_optimizer else 1
        opt_s = mem_time_s(ADAM_BYTES_PER_PARAM * local_p / shard, dev.hbm_Bps)
        tied: tuple[CommOp, ...] = ()
        if spec.tied_embeddings and pp > 1 and (first or last):
            tied = (CommOp(group=Group.EMB, kind=AR, size_bytes=round(spec.vocab * spec.hidden / tp * gbytes)),)
        if zero3:
            ag = CommOp(group=Group.DPZ, kind=AG, size_bytes=round(local_p * e / ndp))
            extras.append(
                StageExtras(
                    optimizer_s=opt_s,
                    tied=tied,
                    mb_gather=(ag, ag),
                    mb_gather_overlap=dp_overlap,
                    mb_reduce=(CommOp(group=Group.DPZ, kind=RS, size_bytes=round(local_p * gbytes)),),
                )
            )
            continue
        kind = RS if plan.shards_optimizer else AR
        grad = local_p * gbytes
        frac = min(1.0, DDP_BUCKET_PARAMS / max(local_p, 1.0)) if dp_overlap else 1.0
        early = (CommOp(group=Group.DP, kind=kind, size_bytes=round(grad * (1 - frac))),) if frac < 1 else ()
        late = (CommOp(group=Group.DP, kind=kind, size_bytes=round(grad * frac)),)
        gather = (
            (CommOp(group=Group.DP, kind=AG, size_bytes=round(local_p * e / ndp)),) if plan.shards_optimizer else ()
        )
        extras.append(
            StageExtras(
                optimizer_s=opt_s,
                grad_early=early,
                grad_late=late,
                tied=tied,
                param_gather=gather,
                param_gather_overlap=dp_overlap,
            )
        )
    return StepSpec(
        tp=tp,
        cp=cp,
        dp=dp,
        ep=plan.ep,
        pp=pp,
        vp=vp,
        micro_batches=m,
        schedule=plan.schedule,
        stages=tuple(chunks),
        pp_bytes=round(T * spec.hidden * e / (tp if sp else 1)) if pp > 1 else 0,
        pp_overlap=Dim.PP in plan.overlap,
        extras=tuple(extras),
    )
