"""MoE token dispatch: what one MoE layer moves per micro-batch, and how much of it compute can hide.

Megatron-Core's all-to-all token dispatcher (megatron/core/transformer/moe/token_dispatcher.py): each
rank routes its own T_d tokens (T/tp under sequence parallelism, which Megatron requires with tp > 1
and ep > 1) to the experts' ranks with an all-to-all on the expert-parallel group, then, with expert
tensor parallelism etp > 1, all-gathers them across the etp group so each rank runs its 1/etp slice
of every local expert; the combine mirrors it (reduce-scatter, then all-to-all). Per pass (forward,
recomputed forward, backward):

    2 · A2A(T_d·k·c·h·e on the EP group) + [AG + RS](T_d·k·c·etp·h·e on the ETP group)

with k the router's top-k, c the routed share the busiest EP rank receives over the balanced share
(model/routing.py: the routing policy's imbalance, capped by a capacity factor; below 1 the overflow
is dropped, GShard / Switch Transformer), h hidden, e the activation bytes: the all-to-all waits for the
rank that receives the most.

With the node-forwarded dispatcher (plan.MoeDispatcher.DEEPEP: DeepSeek-V3 Technical Report sec.
3.2.2, DeepEP's normal kernels) an EP group that spans N nodes sends each token over the network once
per destination node that holds one of its k experts, to the GPU of the same local index, which
forwards the copies to the experts' GPUs over NVLink. Per pass that is two all-to-alls, run one after
the other here (DeepEP pipelines them in chunks, so this is an upper bound by the smaller of the two):

    A2A(T_d·c·h·e · N·P_hit on the N same-index ranks across nodes) + A2A(T_d·k·c·h·e within the node)

P_hit = 1 − C(E − E/N, k) / C(E, k) is the chance that a node holds at least one of a token's k
experts under uniform routing (E experts spread evenly over the N nodes). For Qwen3-235B (E = 128,
k = 8) over 4 nodes P_hit = 0.91: 2.7 remote copies per token instead of the 6 a direct all-to-all
sends across nodes.
"""

from __future__ import annotations

import math

from distscope.comm import Collective, collective_s
from distscope.comm.group import GroupNet, group_net
from distscope.model.layer import LayerCost
from distscope.model.routing import routed_load
from distscope.plan import MoeDispatcher, Plan
from distscope.system.topology import Cluster
from distscope.workload.spec import ModelSpec

# DeepSeek-V3 Technical Report sec. 3.2.2: 20 of the H800's 132 SMs run the all-to-all kernels while
# computation overlaps them, so overlapped compute runs on 112/132 of the SMs: each second of hidden
# communication costs 20/132 s of compute.
A2A_OVERLAP_SM_FRACTION = 20.0 / 132.0


def dispatch_tokens(plan: Plan, tokens: float) -> float:
    """Tokens one rank routes per micro-batch: its sequence-parallel shard, else all of them."""
    return tokens / plan.tp if plan.sp else tokens


def node_hit_probability(experts: int, top_k: int, nodes: int) -> float:
    """P_hit = 1 − C(E − E/N, k) / C(E, k): the chance that one of N nodes, holding E/N of the E
    experts, holds at least one of a token's k distinct experts under uniform routing."""
    if nodes <= 1:
        return 1.0
    return 1.0 - math.comb(experts - experts // nodes, top_k) / math.comb(experts, top_k)


def ep_ranks_per_node(cluster: Cluster, plan: Plan) -> int:
    """Ranks of one expert-parallel group inside one node: the EP group strides by etp
    (Megatron's expert grid, etp fastest), so a node of G GPUs holds min(ep, G/etp) of them."""
    node = cluster.levels[0].size  # 0: the first level spans the whole cluster
    return max(1, min(plan.ep, node // plan.expert_tp)) if node else plan.ep


def node_forwarded(cluster: Cluster, plan: Plan) -> bool:
    """The dispatch is node-forwarded: DeepEP chosen and the EP group spans whole nodes, each holding
    the same number of its ranks (else DEEPEP is priced as the direct all-to-all)."""
    if plan.moe_dispatcher is not MoeDispatcher.DEEPEP or len(cluster.levels) < 2:
        return False
    node, local = cluster.levels[0].size, ep_ranks_per_node(cluster, plan)
    return node % plan.expert_tp == 0 and plan.ep > local and plan.ep % local == 0


def deepep_bytes(spec: ModelSpec, plan: Plan, tokens: float, act_bytes: float, nodes: int) -> tuple[float, float]:
    """(cross-node, intra-node) all-to-all buffers per rank of one node-forwarded dispatch (module
    docstring): T_d·c·h·e·N·P_hit on the same-index ranks across nodes, T_d·k·c·h·e within the node."""
    assert spec.moe is not None
    token = dispatch_tokens(plan, tokens) * routed_load(spec, plan, tokens) * spec.expert_width * act_bytes
    return token * nodes * node_hit_probability(spec.moe.experts, spec.moe.top_k, nodes), token * spec.moe.top_k


def moe_pass_comm_s(spec: ModelSpec, plan: Plan, tokens: float, act_bytes: float, g_ep: GroupNet,
                    g_etp: GroupNet, cluster: Cluster) -> float:
    """Dispatch + combine of one MoE layer for one pass (module docstring); 0 without EP or ETP.
    `cluster` lays out the node-forwarded dispatcher's two groups (plan.MoeDispatcher.DEEPEP)."""
    assert spec.moe is not None
    routed = dispatch_tokens(plan, tokens) * spec.moe.top_k * routed_load(spec, plan, tokens) * spec.expert_width * act_bytes
    if node_forwarded(cluster, plan):
        local = ep_ranks_per_node(cluster, plan)
        cross, intra = deepep_bytes(spec, plan, tokens, act_bytes, plan.ep // local)
        g_cross = group_net(cluster, plan.ep // local, plan.expert_tp * local)
        g_intra = group_net(cluster, local, plan.expert_tp)
        t = 2 * (collective_s(Collective.ALL_TO_ALL, cross, g_cross) + collective_s(Collective.ALL_TO_ALL, intra, g_intra))
    else:
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


def overlap_budget_s(c: LayerCost, *, tp_overlap: bool, cp: bool, rec: float, split: bool,
                     regather_s: float = 0.0) -> tuple[float, float]:
    """(forward, backward) compute of a layer's pass that another micro-batch's all-to-all can run
    beside: the pass's compute less what its own TP and CP communication already hides behind (TP:
    half the forward GEMMs per point, the dgrad+wgrad GEMMs per backward point, only dgrad when the
    weight gradient is a later W pass, and `regather_s` behind the re-gathered inputs of per-op
    selective recompute, model.estimate.tp_regather_hide_s; CP: the attention core); the backward
    includes the recomputed forward (share `rec`) and excludes a split-off W."""
    gemm, attn = c.gemm_fwd_s, c.attn_fwd_s
    f = c.fwd_s - (gemm if tp_overlap else 0.0) - (attn if cp else 0.0)
    b = c.bwd_s + rec * c.recompute_s - (gemm if split else 0.0)
    if tp_overlap:
        b -= rec * gemm + (gemm if split else 2 * gemm) + regather_s
    if cp:
        b -= rec * attn + 2 * attn
    return max(f, 0.0), max(b, 0.0)
