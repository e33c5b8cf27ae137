"""MoE token dispatch: what one MoE layer moves per micro-batch, and how much of it compute can hide.

Megatron-Core's all-to-all token dispatcher (megatron/core/transformer/moe/token_dispatcher.py): each
rank routes its own T_d tokens (T/tp under sequence parallelism, which Megatron requires with tp > 1
and ep > 1) to the experts' ranks with an all-to-all on the expert-parallel group, then, with expert
tensor parallelism etp > 1, all-gathers them across the etp group so each rank runs its 1/etp slice
of every local expert; the combine mirrors it (reduce-scatter, then all-to-all). Per pass (forward,
recomputed forward, backward):

    2 · A2A(T_d·k·c·h·e on the EP group) + [AG + RS](T_d·k·c·etp·h·e on the ETP group)

with k the router's top-k, c = min(1, capacity factor) the routed share an expert keeps (balanced
routing: a capacity factor >= 1 drops nothing; below 1 the overflow is dropped, GShard / Switch
Transformer), h hidden, e the activation bytes.
"""

from __future__ import annotations

from distscope.comm import Collective, collective_s
from distscope.comm.group import GroupNet
from distscope.model.layer import LayerCost
from distscope.plan import Plan
from distscope.workload.spec import ModelSpec

# DeepSeek-V3 Technical Report sec. 3.2.2: 20 of the H800's 132 SMs run the all-to-all kernels while
# computation overlaps them, so overlapped compute runs on 112/132 of the SMs: each second of hidden
# communication costs 20/132 s of compute.
A2A_OVERLAP_SM_FRACTION = 20.0 / 132.0


def routed_fraction(plan: Plan) -> float:
    """Share of routed tokens experts process: min(1, capacity factor); 1 when dropless."""
    cf = plan.capacity_factor
    return 1.0 if cf is None else min(1.0, cf)


def dispatch_tokens(plan: Plan, tokens: float) -> float:
    """Tokens one rank routes per micro-batch: its sequence-parallel shard, else all of them."""
    return tokens / plan.tp if plan.sp else tokens


def moe_pass_comm_s(spec: ModelSpec, plan: Plan, tokens: float, act_bytes: float, g_ep: GroupNet,
                    g_etp: GroupNet) -> float:
    """Dispatch + combine of one MoE layer for one pass (module docstring); 0 without EP or ETP."""
    assert spec.moe is not None
    routed = dispatch_tokens(plan, tokens) * spec.moe.top_k * routed_fraction(plan) * spec.hidden * act_bytes
    t = 2 * collective_s(Collective.ALL_TO_ALL, routed, g_ep) if plan.ep > 1 else 0.0
    etp = plan.expert_tp
    if etp > 1 and plan.sp:
        gathered = routed * etp
        t += collective_s(Collective.ALL_GATHER, gathered, g_etp) + collective_s(Collective.REDUCE_SCATTER, gathered, g_etp)
    return t


def overlapped_a2a_s(comm_s: float, compute_s: float) -> tuple[float, float]:
    """(exposed, hidden) time of a pass's dispatch/combine overlapped with `compute_s` of another
    micro-batch's compute (DeepSeek-V3 sec. 3.2.1): exposed = max(0, comm − compute) plus the SM
    share the hidden part takes from that compute (A2A_OVERLAP_SM_FRACTION)."""
    hidden = min(comm_s, max(compute_s, 0.0))
    return comm_s - hidden + hidden * A2A_OVERLAP_SM_FRACTION, hidden


def overlap_budget_s(c: LayerCost, *, tp_overlap: bool, cp: bool, rec: float, split: bool) -> tuple[float, float]:
    """(forward, backward) compute of a layer's pass that another micro-batch's all-to-all can run
    beside: the pass's compute less what its own TP and CP communication already hides behind (TP:
    half the forward GEMMs per point, the dgrad+wgrad GEMMs per backward point, only dgrad when the
    weight gradient is a later W pass; CP: the attention core); the backward includes the
    recomputed forward (share `rec`) and excludes a split-off W."""
    gemm, attn = c.gemm_fwd_s, c.attn_fwd_s
    f = c.fwd_s - (gemm if tp_overlap else 0.0) - (attn if cp else 0.0)
    b = c.bwd_s + rec * c.recompute_s - (gemm if split else 0.0)
    if tp_overlap:
        b -= rec * gemm + (gemm if split else 2 * gemm)
    if cp:
        b -= rec * attn + 2 * attn
    return max(f, 0.0), max(b, 0.0)
