"""A torch module's training step split into pipeline stages over its top-level children (`--pp`), each
stage data parallel over dp = GPUs / pp (DDP or FSDP, as model/module_estimate.py prices a replica).

- **Split.** The children in forward order (module_estimate.child_costs; the root's own ops form a
  layer where they first run) cut into pp contiguous stages minimising the slowest stage's forward +
  backward time per micro-batch (search/partition.min_max_partition: PipeDream's dynamic program).
- **Schedule** (1F1B, no interleaving): the longest path of the schedule's dependency graph with each
  stage's own forward and backward per micro-batch (schedules.longest_path_s). Its children rarely cut
  into equal stages with equal forward/backward ratios, where the closed form m·max_k t_k + Σ_k t_k −
  max_k t_k is several % off the graph. Every boundary's activation (the input bytes of the first
  child of the next stage) and its gradient cross once per micro-batch on the stage-to-stage link
  (ranks dp apart), each hop priced at its own boundary's send: in a balanced pipeline the hops lie on
  the steady-state cycle, not only on the fill and drain.
- **Data parallel** per stage over its own parameters, with module_estimate's overlap rules against
  the stage's last backward (DDP) or each micro-batch's passes (FSDP); the slowest stage's exposure
  and optimizer set the step's.
- **Memory** per stage (1F1B): the stage's weights, gradients and optimizer state (sharded by dp under
  FSDP), and min(m, pp − k) micro-batches of its activations in flight on stage k (the first stage
  holds pp); with recompute a child keeps its input, plus one child's saved tensors at a time. A GPU's
  memory is its stage's; the plan fits when the fullest stage does.
"""

from __future__ import annotations

from distscope.comm import Collective, collective_s, group_net
from distscope.errors import DistscopeError
from distscope.model.estimate import DDP_BUCKET_PARAMS, MASTER_BYTES_PER_PARAM
from distscope.model.memory import WORKSPACE_BYTES
from distscope.model.module_estimate import (
    ChildCost,
    ModuleEstimate,
    child_costs,
    micro_batch_count,
    optimizer_s,
    recompute_activation_bytes,
)
from distscope.model.schedules import StagePass, longest_path_s
from distscope.plan import Schedule
from distscope.search.partition import min_max_partition
from distscope.system.topology import Cluster
from distscope.workload.module_graph import ModuleGraph


def stage_split(children: tuple[ChildCost, ...], pp: int) -> tuple[tuple[ChildCost, ...], ...]:
    """The children cut into `pp` contiguous stages, the slowest as fast as can be (module docstring)."""
    if pp > len(children):
        raise DistscopeError(f"--pp={pp}: the module has {len(children)} top-level children (the root's own ops "
                             "count as one); a stage needs at least one")
    sizes = min_max_partition([c.fwd_s + c.bwd_s for c in children], pp).sizes
    out, start = [], 0
    for n in sizes:
        out.append(children[start:start + n])
        start += n
    return tuple(out)


def stage_bytes(graph: ModuleGraph, stage: tuple[ChildCost, ...], recompute: bool, first: bool) -> tuple[float, float]:
    """(parameters, activation bytes per micro-batch) of a stage; the root's parameters go to the first."""
    names = {c.name for c in stage}
    params, saved = dict(graph.child_params), dict(graph.child_saved)
    n = sum(params.get(m, 0) for m in names if m)
    if first:
        n += graph.params - sum(params.values())
    act = recompute_activation_bytes(graph, names) if recompute else sum(saved.get(m, 0.0) for m in names)
    return float(n), act


def boundary_bytes(graph: ModuleGraph, stages: tuple[tuple[ChildCost, ...], ...]) -> tuple[float, ...]:
    """The activation bytes one micro-batch sends across each stage boundary: the input of the next
    stage's first named child (its gradient comes back the same size)."""
    inputs = dict(graph.child_inputs)
    return tuple(inputs.get(next((c.name for c in s if c.name), ""), 0.0) for s in stages[1:])


def estimate_module_pipeline(graph: ModuleGraph, cluster: Cluster, *, pp: int, zero: int, global_batch: int,
                             recompute: bool = False) -> ModuleEstimate:
    """Step time, breakdown and memory of `graph` on all of `cluster`'s GPUs as pp stages × dp replicas."""
    gpus = cluster.num_gpus
    if pp < 1 or gpus % pp:
        raise DistscopeError(f"--pp={pp} must divide --gpus={gpus}")
    dp = gpus // pp
    m = micro_batch_count(graph.micro_batch, dp=dp, zero=zero, global_batch=global_batch)
    dev = cluster.device
    stages = stage_split(child_costs(graph, dev, recompute), pp)
    fwd = [sum(c.fwd_s for c in s) for s in stages]
    bwd = [sum(c.bwd_s for c in s) for s in stages]
    passes = [StagePass(f_s=f, b_s=b, w_s=0.0) for f, b in zip(fwd, bwd, strict=True)]
    link = group_net(cluster, pp, dp) if pp > 1 else None
    hops = [collective_s(Collective.SEND_RECV, n, link) for n in boundary_bytes(graph, stages)] if link else []
    pipe = longest_path_s(Schedule.ONE_F_ONE_B, passes, m, 0.0)
    p2p = longest_path_s(Schedule.ONE_F_ONE_B, passes, m, 0.0, hops) - pipe if hops else 0.0
    t_max = max(p.total_s for p in passes)
    b = graph.dtype.bytes
    g = group_net(cluster, dp, 1)
    dp_exposed, opt, mem_max = 0.0, 0.0, 0.0
    memory: dict[str, float] = {}
    shard = dp if zero == 3 else 1
    for k, s in enumerate(stages):
        params, act = stage_bytes(graph, s, recompute, k == 0)
        if dp > 1 and zero == 0:
            t_ar = collective_s(Collective.ALL_REDUCE, params * b, g)
            exposed = max(t_ar * min(1.0, DDP_BUCKET_PARAMS / max(params, 1.0)), t_ar - bwd[k])
        elif dp > 1:
            t_ag = collective_s(Collective.ALL_GATHER, params * b, g)
            t_rs = collective_s(Collective.REDUCE_SCATTER, params * b, g)
            exposed = m * (max(0.0, t_ag - fwd[k]) + max(0.0, t_ag + t_rs - bwd[k]))
        else:
            exposed = 0.0
        dp_exposed = max(dp_exposed, exposed)
        opt = max(opt, optimizer_s(graph, dev, shard) * params / max(graph.params, 1))
        stage_mem = {"weights": params * b / shard, "grads": params * b / shard,
                     "optimizer": params * MASTER_BYTES_PER_PARAM / shard, "activations": min(m, pp - k) * act,
                     "workspace": WORKSPACE_BYTES}
        if sum(stage_mem.values()) > mem_max:
            mem_max, memory = sum(stage_mem.values()), stage_mem
    compute = m * t_max
    breakdown = {"compute": compute, "bubble": pipe - compute, "pp": p2p, "dp": dp_exposed, "optimizer": opt}
    step = sum(breakdown.values())
    flops = graph.flops() * m / pp  # a GPU's share: its stage's, the model's spread evenly (MFU convention)
    return ModuleEstimate(step_time_s=step, breakdown_s=breakdown, micro_batches=m, samples_per_s=global_batch / step,
                          flops_per_gpu=flops, mfu=flops / (step * dev.flops(graph.dtype)), memory_bytes=memory,
                          capacity_bytes=cluster.memory_capacity_bytes)
