"""The StepSpec of a traced torch module's training step (`trace generate --model torch:...`).

One pipeline stage per `--pp` (default one) whose layers are the model's top-level children in forward
order, each with its ops' GPU time per pass (model/module_estimate.op_s); a pass shorter than its ops'
host time (model/host.op_s each) is stretched to it, spread over its layers in proportion, as
estimate_module charges it. With --pp the children are cut into stages as model/module_pipeline.py
cuts them (the slowest stage as fast as can be), run 1F1B, and each boundary sends the next stage's
first child's input (and its gradient back) per micro-batch. Data parallel per stage over its own
parameters, as the estimators price it (module_estimate's docstring):

- DDP: the gradients' all-reduce starts with the last micro-batch's backward, but for its last bucket
  (estimate.DDP_BUCKET_PARAMS) which waits for the backward's end;
- FSDP (--zero 3): per micro-batch the weights are all-gathered alongside the forward and again alongside
  the backward, and the gradients reduce-scattered alongside the backward.
The optimizer's Adam pass follows (a stage's share of it, by parameters). With full recompute each
child's backward first reruns its forward (module_estimate's docstring). `simulate` of these traces and
`estimate` of the same flags agree (tests/trace/test_from_module.py).
"""

from __future__ import annotations

from distscope.model.estimate import DDP_BUCKET_PARAMS
from distscope.model.module_estimate import ChildCost, child_costs, optimizer_s
from distscope.model.module_pipeline import boundary_bytes, stage_bytes, stage_split
from distscope.system.topology import Cluster
from distscope.trace.builder import CommOp, Group, LayerCost, StageExtras, StepSpec
from distscope.trace.graph import CollKind
from distscope.workload.module_graph import ModuleGraph


def _layer(c: ChildCost) -> LayerCost:
    return LayerCost(name=c.name or "root", fwd_s=c.fwd_s, bwd_s=c.bwd_s, fwd_flops=round(c.fwd_flops),
                     bwd_flops=round(c.bwd_flops), fwd_bytes=round(c.fwd_bytes), bwd_bytes=round(c.bwd_bytes))


def _dp_extras(graph: ModuleGraph, cluster: Cluster, params: float, *, dp: int, zero: int) -> StageExtras:
    """A stage's data-parallel gradient traffic over its `params` and its share of the optimizer."""
    nbytes = round(params * graph.dtype.bytes)
    opt = optimizer_s(graph, cluster.device, dp if zero == 3 else 1) * params / max(graph.params, 1)
    if dp == 1:
        return StageExtras(optimizer_s=opt)
    if zero == 3:
        shard = CommOp(group=Group.DP, kind=CollKind.ALL_GATHER, size_bytes=nbytes // dp)
        return StageExtras(optimizer_s=opt, mb_gather=(shard,), mb_gather_overlap=True, mb_gather_bwd=(shard,),
                           mb_reduce_early=(CommOp(group=Group.DP, kind=CollKind.REDUCE_SCATTER, size_bytes=nbytes),))
    late = round(nbytes * min(1.0, DDP_BUCKET_PARAMS / max(params, 1)))
    early = nbytes - late
    ar = CollKind.ALL_REDUCE
    return StageExtras(optimizer_s=opt, grad_early=(CommOp(group=Group.DP, kind=ar, size_bytes=early),) if early else (),
                       grad_late=(CommOp(group=Group.DP, kind=ar, size_bytes=late),))


def module_step_spec(graph: ModuleGraph, cluster: Cluster, *, dp: int, zero: int, micro_batches: int,
                     recompute: bool = False, pp: int = 1) -> StepSpec:
    """One optimizer step of `graph` on pp stages x `dp` GPUs, DDP (zero 0) or FSDP (zero 3) (module docstring)."""
    stages = stage_split(child_costs(graph, cluster.device, recompute), pp)
    params = [stage_bytes(graph, s, recompute, k == 0)[0] for k, s in enumerate(stages)]
    return StepSpec(dp=dp, pp=pp, micro_batches=micro_batches, stages=tuple(tuple(_layer(c) for c in s) for s in stages),
                    boundary_bytes=tuple(round(n) for n in boundary_bytes(graph, stages)),
                    extras=tuple(_dp_extras(graph, cluster, p, dp=dp, zero=zero) for p in params))
