"""A training step's structure (builder.StepSpec) from (model, training shape, cluster, plan).

Every number comes from the foundation's cost functions, composed the way `model.estimate` composes
them; this file only decides where each piece sits in the per-rank graphs:
* compute per layer: `model.layer.layer_cost` (forward; backward plus the plan's recompute, full
  recompute of the layers `estimate.recomputes_forward` names), the LM head `head_cost` on the last chunk;
* TP points (2 per layer forward, 2 backward, 2 per recomputed layer): all-reduce, or all-gather +
  reduce-scatter with sequence parallelism; with TP overlap each forward point runs alongside half the
  layer's forward GEMM time and each backward point alongside a full forward GEMM time (estimate.py);
* compression (estimate.compressed_wire): compressed collectives carry their wire bytes, and their
  quantize/dequantize passes are compute where the estimator charges them: a TP point's in its layer's
  pass, a per-micro-batch ZeRO collective's spread over the stage's layers (forward, backward, or W
  pass of a split backward), a once-per-step one's with the optimizer step;
* CP ring attention: (cp-1) KV exchanges per forward, as a ring all-gather of the KV chunk on the CP
  group ((cp-1)(α + kv/B), the estimator's (cp-1) send_recv steps), hidden behind the attention core;
* EP all-to-all dispatch + combine, forward and backward;
* PP activations T·h·e (÷tp with SP) per micro-batch, blocking sends unless PP overlap;
* DP per stage: gradient all-reduce (or reduce-scatter + parameter all-gather with a sharded
  optimizer), with DP overlap all but the last DDP bucket (model.estimate.DDP_BUCKET_PARAMS) start with
  the final backward; ZeRO-3 gathers weights with each micro-batch's forward and again with its
  backward and reduce-scatters its gradients (per model chunk where a rank holds several); a group of
  one rank moves nothing;
  tied word-embedding gradients between first and last stage; the memory-bound Adam step.
* MoE: dispatch/combine per pass (model/moe.py: all-to-all on EP, all-gather/reduce-scatter on ETP),
  beside another micro-batch's compute with the plan's a2a overlap; expert gradients are reduced on
  the expert-data-parallel group (Megatron's expert grid), dense ones on DP;
* zero-bubble schedules: each layer's weight-gradient GEMMs (its forward GEMM time) as a W pass;
  DualPipe's mirrored stages sum their gradients on the MIRROR pair.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from distscope.comm import Collective, group_net
from distscope.compress.spec import CompressionMethod
from distscope.errors import DistscopeError
from distscope.model import sparse_attention
from distscope.model.efficiency import mem_time_s
from distscope.model.estimate import (
    ADAM_BYTES_PER_PARAM,
    DDP_BUCKET_PARAMS,
    compressed_wire,
    compute_costs,
    rank_chunks,
    recompute_fraction,
    recomputes_forward,
    stage_fp8_weight_cast_s,
    stage_params,
    tp_all_gather_scale,
    tp_point_collectives,
    tp_regather_hide_s,
    weight_gather_bytes,
    zero3_reduce_last_share,
)
from distscope.model.layer import cp_exchange
from distscope.model.moe import (
    A2A_OVERLAP_SM_FRACTION,
    deepep_bytes,
    dispatch_tokens,
    ep_ranks_per_node,
    moe_pass_comm_s,
    node_forwarded,
    overlap_budget_s,
    overlapped_a2a_s,
)
from distscope.model.routing import routed_load
from distscope.model.stages import chunk_sizes, stage_layers
from distscope.plan import Dim, Placement, Plan, Recompute, Schedule, chunk_rank
from distscope.software.presets import DEFAULT as DEFAULT_SOFTWARE
from distscope.software.presets import SoftwareProfile
from distscope.system.topology import Cluster
from distscope.trace.builder import CommOp, Group, LayerCost, StageExtras, StepSpec
from distscope.trace.graph import CollKind
from distscope.workload import params as P
from distscope.workload.spec import ModelSpec
from distscope.workload.training import TrainingShape

AR, AG, RS, A2A = CollKind.ALL_REDUCE, CollKind.ALL_GATHER, CollKind.REDUCE_SCATTER, CollKind.ALL_TO_ALL


_KINDS = {Collective.ALL_REDUCE: AR, Collective.ALL_GATHER: AG, Collective.REDUCE_SCATTER: RS}
Wire = Callable[[float, float], tuple[float, float]]  # (bytes, element width) -> (wire bytes, codec s)


def _plain(nbytes: float, width: float) -> tuple[float, float]:
    del width
    return nbytes, 0.0


def _tp_point(D: int, tp: int, sp: bool, hide_s: float, ag_scale: float = 1.0,
              wire: Wire = _plain) -> tuple[list[CommOp], list[float]]:
    """One TP communication point (estimate.tp_point_collectives: all-reduce of D, or all-gather of
    `ag_scale`·D, as the per-rank shard, + reduce-scatter of D) on its wire bytes, and each
    collective's codec seconds (`wire`: estimate.compressed_wire under the plan's TP compression)."""
    if tp == 1:
        return [], []
    ops: list[CommOp] = []
    codecs: list[float] = []
    for i, (kind, nbytes, width) in enumerate(tp_point_collectives(D, sp, ag_scale)):
        w, codec = wire(nbytes, width)
        size = round(w) // tp if kind is Collective.ALL_GATHER else round(w)
        ops.append(CommOp(group=Group.TP, kind=_KINDS[kind], size_bytes=size, hide_s=0.0 if i else hide_s,
                          with_previous=i > 0))
        codecs.append(codec)
    return ops, codecs


def _dispatch(spec: ModelSpec, plan: Plan, cluster: Cluster, tokens: float, e: float) -> tuple[CommOp, ...]:
    """One pass's token dispatch on the expert-parallel group (model/moe.py): one all-to-all of the
    routed copies, or, node-forwarded, the cross-node all-to-all (EPX) then the one inside the node (EPL)."""
    if plan.ep == 1:
        return ()
    if node_forwarded(cluster, plan):
        cross, intra = deepep_bytes(spec, plan, tokens, e, plan.ep // ep_ranks_per_node(cluster, plan))
        return (CommOp(group=Group.EPX, kind=A2A, size_bytes=round(cross)),
                CommOp(group=Group.EPL, kind=A2A, size_bytes=round(intra)))
    assert spec.moe is not None
    routed = round(dispatch_tokens(plan, tokens) * spec.moe.top_k * routed_load(spec, plan, tokens) * spec.expert_width * e)
    return (CommOp(group=Group.EP, kind=A2A, size_bytes=routed),)


def _moe_pass(plan: Plan, dispatch: tuple[CommOp, ...], routed: int, hide_s: float) -> list[CommOp]:
    """One pass's token dispatch and combine (model/moe.py): the dispatch collectives, with expert
    tensor parallelism an all-gather and reduce-scatter of the `routed` bytes on ETP, then the combine
    (the dispatch mirrored); `hide_s` > 0 runs them beside that much compute (one fork/join point)."""
    ops: list[CommOp] = list(dispatch)
    if plan.expert_tp > 1 and plan.sp:
        gathered = routed * plan.expert_tp
        ops += [CommOp(group=Group.ETP, kind=AG, size_bytes=round(gathered / plan.expert_tp)),
                CommOp(group=Group.ETP, kind=RS, size_bytes=round(gathered))]
    ops += reversed(dispatch)
    return _as_point(ops, hide_s)


def _as_point(ops: list[CommOp], hide_s: float) -> list[CommOp]:
    """Collectives as one fork/join point beside `hide_s` of compute (blocking, one by one, if 0)."""
    if hide_s <= 0 or not ops:
        return ops
    return [dataclasses.replace(op, hide_s=hide_s if i == 0 else 0.0, with_previous=i > 0) for i, op in enumerate(ops)]


def _split(group: Group, kind: CollKind, nbytes: float, late: float) -> tuple[tuple[CommOp, ...], tuple[CommOp, ...]]:
    """A gradient reduction as (the part that starts early, the `late` share that waits for the end of
    the backward); no early part when `late` is 1."""
    total = round(nbytes)
    head = round(nbytes * (1 - late)) if late < 1 else 0
    early = (CommOp(group=group, kind=kind, size_bytes=head),) if late < 1 else ()
    return early, (CommOp(group=group, kind=kind, size_bytes=total - head),)


def _with_codec(layers: tuple[LayerCost, ...], codec: tuple[float, float, float], stage_layers_n: int,
                chunks_per_rank: int) -> tuple[LayerCost, ...]:
    """A chunk's layers with their share of their stage's per-micro-batch DP codec (forward, backward,
    and weight-gradient pass of a split backward; estimate.py): 1/stage_layers_n per transformer layer
    (ZeRO gathers and reduces layer by layer); a stage without transformer layers carries
    1/chunks_per_rank on each chunk's first entry."""
    real = [k for k, lc in enumerate(layers) if lc.name.startswith("layer")]
    if stage_layers_n and not real:
        return layers
    targets, n = (real, stage_layers_n) if stage_layers_n else ([0], chunks_per_rank)
    f_s, b_s, w_s = (x / n for x in codec)
    out = list(layers)
    for k in targets:
        lc = out[k]
        out[k] = dataclasses.replace(lc, fwd_s=lc.fwd_s + f_s, bwd_s=lc.bwd_s + b_s + w_s, wgrad_s=lc.wgrad_s + w_s)
    return tuple(out)


def _reduce_scatters(grad: list[tuple[Group, float]], late: float) -> tuple[tuple[CommOp, ...], tuple[CommOp, ...]]:
    """(early, late) gradient reduce-scatters of each (group, bytes): _split with the `late` share."""
    early: tuple[CommOp, ...] = ()
    after: tuple[CommOp, ...] = ()
    for group, nbytes in grad:
        pre, post = _split(group, RS, nbytes, late)
        early, after = early + pre, after + post
    return early, after


# A schedule without a flush (PipeDream-2BW) is simulated in steady state: runs of STEADY_RUNS consecutive
# steps, the difference of their times over the difference of their lengths (steady_step_s). Two steps, not
# one: 2BW keeps two weight versions, and where the step's DP chain (reduce, optimizer, gather) binds, the
# simulated step alternates between two lengths (e.g. 0.289 s and 0.365 s, mean 0.328 s, for a Mixtral 2BW
# plan with int8 gradient compression), so one step's difference reads either.
STEADY_RUNS = (2, 4)


def steady_step_s(short_run_s: float, long_run_s: float) -> float:
    """The steady-state step from the simulated times of runs of STEADY_RUNS steps."""
    return (long_run_s - short_run_s) / (STEADY_RUNS[1] - STEADY_RUNS[0])


def step_spec(spec: ModelSpec, shape: TrainingShape, cluster: Cluster, plan: Plan, *, steps: int = 1,
              software: SoftwareProfile | None = None, quant_GBps: float | None = None) -> StepSpec:
    """The StepSpec of one optimizer step of `plan` (which must already be checked against the model);
    `steps` > 1 strings consecutive steps together for a schedule without a flush (PipeDream-2BW:
    the steady-state step comes from two such traces, steady_step_s). `software` prices compute, FP8 casts,
    weight-gather bytes, ZeRO-3 network traits and per-step fixed costs as the estimator does
    (software/presets.py). Compressed communication moves its wire bytes and adds its quantize/dequantize
    passes as compute where the estimator charges them (estimate.compressed_wire; `quant_GBps` as
    estimate's)."""
    if spec.special_layers is not None:  # its layers' TP points and costs are means over kinds (model/layer.py)
        raise DistscopeError(f"model {spec.name}: a trace of its plan does not model {spec.special_layers}; "
                             "`distscope estimate` prices them")
    sw = software or DEFAULT_SOFTWARE
    dev = cluster.device
    prec = plan.precision
    e = prec.activation_dtype.bytes
    b, s = plan.micro_batch, shape.seq_len
    tp, cp, pp, dp, vp = plan.tp, plan.cp, plan.pp, plan.dp, plan.vp
    m = plan.microbatches(shape.global_batch)
    T = b * s // cp
    sp = plan.sp
    tp_overlap = Dim.TP in plan.overlap and tp > 1
    full = plan.recompute is Recompute.FULL
    rfrac = recompute_fraction(spec.layers, plan)
    split = plan.traits.split_backward and pp > 1
    # a gradient codec runs in the W pass where every backward is split; DualPipe splits only in its
    # zero-bubble phases, so its codec stays in the B pass, once per micro-batch (estimate.py rs_split)
    codec_split = split and plan.schedule is not Schedule.DUALPIPE
    placement = plan.traits.placement if pp > 1 else Placement.LOOP
    fcap = routed_load(spec, plan, T) if spec.moe is not None else 1.0
    a2a_overlap = plan.moe_a2a_overlap and m > 1

    costs, head = compute_costs(spec, b, s, plan, dev, sw)
    ag = tp_all_gather_scale(plan, sw)
    regather = tp > 1 and sp and plan.recompute is Recompute.SELECTIVE_OP
    D_tp = round(T * spec.hidden * e)
    routed = round(dispatch_tokens(plan, T) * spec.moe.top_k * fcap * spec.expert_width * e) if spec.moe is not None else 0
    dispatch = _dispatch(spec, plan, cluster, T, e) if spec.moe is not None else ()
    n_dense_first = spec.moe.dense_layers if spec.moe is not None else spec.layers
    sizes = chunk_sizes(spec.layers, pp, vp, plan.stage_layers)
    cmp = plan.compression
    none = CompressionMethod.NONE
    tp_m, g_m, w_m = (cmp.tp, cmp.dp_grad, cmp.weights) if cmp is not None else (none, none, none)

    def tp_wire(nbytes: float, width: float) -> tuple[float, float]:
        return compressed_wire(nbytes, tp_m, e * width, dev.hbm_Bps, quant_GBps)

    cp_x = cp_exchange(spec, T, tp, e)
    cp_hides = cp > 1 and cp_x.overlapped  # ring attention runs beside the core; an all-gather blocks
    chunks: list[tuple[LayerCost, ...]] = []
    start = 0
    for v, n in enumerate(sizes):
        layers: list[LayerCost] = []
        if v == 0 and tp > 1:  # vocab-parallel embedding output reduction (one RS with SP)
            op = CommOp(group=Group.TP, kind=RS if sp else AR, size_bytes=D_tp)
            layers.append(LayerCost(name="embedding", fwd_s=0.0, bwd_s=0.0, fwd_comm=(op,)))
        mtp = spec.mtp_layers if v == len(sizes) - 1 else 0  # MTP layers follow the last chunk (model/stages.py)
        for i in range(n + mtp):
            moe = start + i >= n_dense_first if i < n else P.mtp_last_is_moe(spec)
            c = costs[moe]
            recomputes = recomputes_forward(plan, i) and i < n
            fh = c.gemm_fwd_s / 2 if tp_overlap else 0.0
            bh = (c.gemm_fwd_s / 2 if split else c.gemm_fwd_s) if tp_overlap else 0.0
            ag2 = 1.0 if moe else ag  # a MoE block's dispatch input is not an FP8 linear's (estimate.py)
            rec_s = (c.recompute_s if recomputes else 0.0) if full else rfrac * c.recompute_s
            (fa, ca), (fm, cm) = _tp_point(D_tp, tp, sp, fh, ag, tp_wire), _tp_point(D_tp, tp, sp, fh, ag2, tp_wire)
            fwd: list[CommOp] = fa + fm
            codec_f = codec_b = sum(ca) + sum(cm)  # TP quantize + dequantize: compute in the pass
            bwd: list[CommOp] = []
            rg_hide = 0.0
            if recomputes:
                bwd += fa + fm
                codec_b += sum(ca) + sum(cm)
            elif regather:  # per-op selective recompute re-gathers the two sequence-parallel inputs
                rg_hide = tp_regather_hide_s(c, split=split, rec_s=rec_s, cp=cp_hides) if tp_overlap else 0.0
                bwd += _as_point([fa[0], fm[0]], rg_hide)
                codec_b += ca[0] + cm[0]
            bwd += _tp_point(D_tp, tp, sp, bh, ag, tp_wire)[0] + _tp_point(D_tp, tp, sp, bh, ag2, tp_wire)[0]
            if (sa := spec.sparse_attention) is not None and tp > 1:  # DSA's indexer (model/sparse_attention.py)
                shard = round(sparse_attention.sp_gather_bytes(sa, spec, T, e)) // tp  # an all-gather names its shard
                dsa = [CommOp(group=Group.TP, kind=AG, size_bytes=shard)] if sp else []
                dsa.append(CommOp(group=Group.TP, kind=AR, size_bytes=round(sparse_attention.loss_all_reduce_bytes(
                    sa, spec.layers, T, s))))
                fwd += dsa
                if recomputes:
                    bwd += dsa
            if cp > 1:
                kv, hide = round(cp_x.nbytes), c.attn_fwd_s if cp_x.overlapped else 0.0
                fwd.append(CommOp(group=Group.CP, kind=AG, size_bytes=kv, hide_s=hide))
                if recomputes:
                    bwd.append(CommOp(group=Group.CP, kind=AG, size_bytes=kv, hide_s=hide))
                bwd.append(CommOp(group=Group.CP, kind=AG, size_bytes=kv, hide_s=2 * hide))
                if cp_x.backward == 2:
                    bwd.append(CommOp(group=Group.CP, kind=AG, size_bytes=kv, with_previous=True))
            extra_f = extra_b = 0.0
            if moe:
                rec = 1.0 if recomputes else 0.0
                if a2a_overlap:
                    ep_pass = moe_pass_comm_s(spec, plan, T, e, group_net(cluster, plan.ep, plan.expert_tp),
                                              group_net(cluster, plan.expert_tp, 1), cluster)
                    f_avail, b_avail = overlap_budget_s(c, tp_overlap=tp_overlap, cp=cp_hides, rec=rec, split=split,
                                                        regather_s=rg_hide)
                    hf, hb = overlapped_a2a_s(ep_pass, f_avail)[1], overlapped_a2a_s(ep_pass * (1 + rec), b_avail)[1]
                    extra_f, extra_b = hf * A2A_OVERLAP_SM_FRACTION, hb * A2A_OVERLAP_SM_FRACTION
                    fwd += _moe_pass(plan, dispatch, routed, hf)
                    bwd += _as_point(_moe_pass(plan, dispatch, routed, 0.0) * (2 if recomputes else 1), hb)
                else:
                    fwd += _moe_pass(plan, dispatch, routed, 0.0)
                    bwd += _moe_pass(plan, dispatch, routed, 0.0) * (2 if recomputes else 1)
            layers.append(
                LayerCost(
                    name=f"layer{start + i}",
                    fwd_s=c.fwd_s + extra_f + codec_f,
                    bwd_s=c.bwd_s + rec_s + extra_b + codec_b,
                    fwd_flops=round(c.model_flops / 3),
                    bwd_flops=round(2 * c.model_flops / 3),
                    fwd_comm=tuple(fwd),
                    bwd_comm=tuple(bwd),
                    wgrad_s=c.gemm_fwd_s if split else 0.0,
                )
            )
        if v == len(sizes) - 1:
            # LM head input: all-gather forward + reduce-scatter backward (SP), or one backward all-reduce
            point = _tp_point(D_tp, tp, sp, 0.0)[0]
            hf_ops = point[:1] if sp else []
            hb_ops = [dataclasses.replace(op, with_previous=False) for op in point[1:]] if sp else point
            layers.append(
                LayerCost(
                    name="lm_head",
                    fwd_s=head.fwd_s,
                    bwd_s=head.bwd_s,
                    fwd_flops=round(head.model_flops / 3),
                    bwd_flops=round(2 * head.model_flops / 3),
                    fwd_comm=tuple(hf_ops),
                    bwd_comm=tuple(hb_ops),
                    wgrad_s=head.gemm_fwd_s if split else 0.0,
                )
            )
        chunks.append(tuple(layers))
        start += n

    extras = []
    stages = stage_layers(spec.layers, n_dense_first, pp, vp, plan.stage_layers, placement, spec.mtp_layers)
    per_mb_z3 = plan.zero_stage == 3 and plan.reshard_after_forward
    dp_overlap = Dim.DP in plan.overlap
    gbytes = plan.grad_reduce_dtype.bytes
    wb = weight_gather_bytes(plan, sw)
    ndp, nedp = dp * cp, plan.expert_dp
    ends = {0, pp - 1} if placement is Placement.MIRROR else None
    mb_codec: list[tuple[float, float, float]] = []  # per stage: DP codec per micro-batch in its F, B, W passes
    # per-micro-batch ZeRO traffic goes per model chunk where a rank holds several (interleaved, ZB-V,
    # DualPipe: builder.StageExtras.mb_chunk_layers), its last layer's share per chunk
    chunks_here = 2 if placement is Placement.MIRROR and pp > 1 else vp

    def dp_wire(nbytes: float, method: CompressionMethod, width: float) -> tuple[float, float]:
        return compressed_wire(nbytes, method, width, dev.hbm_Bps, quant_GBps)

    for i, sl in enumerate(stages):
        if ends is not None:
            first = last = i in ends
        else:
            first = i == chunk_rank(0, pp, placement)
            last = i == chunk_rank(pp * vp - 1, pp, placement)
        dense_p, expert_p = stage_params(spec, sl, first, last, plan)
        local_p = dense_p + expert_p
        chunk_layers = tuple(sizes[v] for v in rank_chunks(i, pp, vp, placement)) if chunks_here > 1 else ()
        shard = ndp if plan.shards_optimizer else 1
        opt_s = mem_time_s(ADAM_BYTES_PER_PARAM * local_p / shard, dev.hbm_Bps) + sw.step_overhead_s
        opt_s += stage_fp8_weight_cast_s(spec, sl, local_p, first, last, plan, m, dev, sw)
        tied: tuple[CommOp, ...] = ()
        if spec.tied_embeddings and pp > 1 and (first or last) and placement is Placement.LOOP:
            tied = (CommOp(group=Group.EMB, kind=AR, size_bytes=round(spec.vocab * spec.hidden / tp * gbytes)),)
        if placement is Placement.MIRROR and pp > 1:
            # DualPipe: the two copies of these stages (ranks i and pp-1-i) sum their reduced gradients
            tied += (CommOp(group=Group.MIRROR, kind=AR, size_bytes=round(local_p * gbytes / shard)),)
        # the gradient reduction (grad) and the weight all-gather (gather) per (group, parameters, ways),
        # compressed (estimate.compressed_wire); their codec is compute: per micro-batch where the
        # collective is (in the micro-batch's forward and backward passes, spread over the stage's
        # layers), else once per step, with the optimizer step (estimate.py: never hidden)
        if per_mb_z3:  # ZeRO-3 traffic at the per-GPU NIC rate where the stack does not aggregate rails (g_z3)
            groups = ((Group.DP, Group.EDP) if sw.zero3_rail_aggregation else (Group.DPZ, Group.EDPZ))
        else:
            groups = (Group.DP, Group.EDP)
        grad: list[tuple[Group, float]] = []
        gather: tuple[CommOp, ...] = ()
        grad_codec = gather_codec = 0.0
        for group, params, ways in ((groups[0], dense_p, ndp), (groups[1], expert_p, nedp)):
            if not params or ways == 1:  # a group of one moves nothing (estimate._dp_collective)
                continue
            g_wire, g_codec = dp_wire(params * gbytes, g_m, gbytes)
            grad.append((group, g_wire))
            grad_codec += g_codec
            if per_mb_z3 or plan.shards_optimizer:
                w_wire, w_codec = dp_wire(params * wb, w_m, wb)
                gather += (CommOp(group=group, kind=AG, size_bytes=round(w_wire / ways)),)
                gather_codec += w_codec
        if per_mb_z3:
            # ZeRO-3: per micro-batch, the weights gathered for its forward and again for its backward,
            # the gradients reduce-scattered, all but the last layer's share behind the backward
            rss_early, rss = _reduce_scatters(grad, zero3_reduce_last_share(plan, sw, sl.total / chunks_here))
            mb_codec.append((gather_codec, gather_codec + (0.0 if codec_split else grad_codec),
                             grad_codec if codec_split else 0.0))
            extras.append(StageExtras(optimizer_s=opt_s, tied=tied, mb_gather=gather, mb_gather_bwd=gather,
                                      mb_gather_overlap=dp_overlap, mb_reduce=rss, mb_reduce_early=rss_early,
                                      mb_chunk_layers=chunk_layers))
            continue
        if plan.zero_stage == 2:
            # per micro-batch gradient reduce-scatter, layer by layer behind its backward; one weight
            # all-gather per step after the optimizer (estimate.py, the ZeRO-2 branch)
            z2_early, z2_rs = _reduce_scatters(grad, zero3_reduce_last_share(plan, sw, sl.total / chunks_here))
            mb_codec.append((0.0, 0.0 if codec_split else grad_codec, grad_codec if codec_split else 0.0))
            extras.append(StageExtras(optimizer_s=opt_s + gather_codec, tied=tied, mb_reduce=z2_rs,
                                      mb_reduce_early=z2_early, param_gather=gather, param_gather_overlap=dp_overlap,
                                      mb_chunk_layers=chunk_layers))
            continue
        kind = RS if plan.shards_optimizer else AR
        frac = min(1.0, DDP_BUCKET_PARAMS / max(local_p, 1.0)) if dp_overlap else 1.0
        early: tuple[CommOp, ...] = ()
        late: tuple[CommOp, ...] = ()
        for group, nbytes in grad:
            pre, post = _split(group, kind, nbytes, frac)
            early, late = early + pre, late + post
        mb_codec.append((0.0, 0.0, 0.0))
        extras.append(
            StageExtras(
                optimizer_s=opt_s + grad_codec + gather_codec,
                grad_early=early,
                grad_late=late,
                tied=tied,
                param_gather=gather,
                param_gather_overlap=dp_overlap,
            )
        )
    if any(any(c) for c in mb_codec):
        chunks = [_with_codec(layers, mb_codec[chunk_rank(v, pp, placement)], stages[chunk_rank(v, pp, placement)].total,
                              chunks_here) for v, layers in enumerate(chunks)]
    return StepSpec(
        tp=tp,
        cp=cp,
        dp=dp,
        ep=plan.ep,
        etp=plan.expert_tp,
        ep_node=ep_ranks_per_node(cluster, plan) if node_forwarded(cluster, plan) else 0,
        pp=pp,
        vp=vp,
        micro_batches=m,
        schedule=plan.schedule,
        stages=tuple(chunks),
        pp_bytes=round(T * spec.hidden * e / (tp if sp else 1)) if pp > 1 else 0,
        pp_overlap=Dim.PP in plan.overlap,
        dp_overlap=dp_overlap,
        extras=tuple(extras),
        steps=steps,
    )
