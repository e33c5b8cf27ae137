"""The StepSpec of a traced torch module's data-parallel step (`trace generate --model torch:...`).

One pipeline stage whose layers are the model's top-level children in forward order, each with its ops'
GPU time per pass (model/module_estimate.op_s); a pass shorter than its ops' host time (model/host.OP_S
each) is stretched to it, spread over its layers in proportion, as estimate_module charges it. Data
parallel as the estimator prices it (module_estimate's docstring):

- DDP: the gradients' all-reduce starts with the last micro-batch's backward, but for its last bucket
  (estimate.DDP_BUCKET_PARAMS) which waits for the backward's end;
- FSDP (--zero 3): per micro-batch the weights are all-gathered alongside the forward and again alongside
  the backward, and the gradients reduce-scattered alongside the backward.
The optimizer's Adam pass follows. With full recompute each child's backward first reruns its forward
(module_estimate's docstring). `simulate` of these traces and `estimate` of the same flags agree
(tests/trace/test_from_module.py).
"""

from __future__ import annotations

from distscope.model.estimate import DDP_BUCKET_PARAMS
from distscope.model.module_estimate import child_costs, optimizer_s
from distscope.system.topology import Cluster
from distscope.trace.builder import CommOp, Group, LayerCost, StageExtras, StepSpec
from distscope.trace.graph import CollKind
from distscope.workload.module_graph import ModuleGraph


def module_layers(graph: ModuleGraph, cluster: Cluster, recompute: bool = False) -> tuple[LayerCost, ...]:
    """The top-level children as layers (model/module_estimate.child_costs): forward and backward time,
    FLOPs and bytes of one micro-batch (with `recompute`, a child's backward also reruns its forward)."""
    return tuple(LayerCost(name=c.name or "root", fwd_s=c.fwd_s, bwd_s=c.bwd_s, fwd_flops=round(c.fwd_flops),
                           bwd_flops=round(c.bwd_flops), fwd_bytes=round(c.fwd_bytes), bwd_bytes=round(c.bwd_bytes))
                 for c in child_costs(graph, cluster.device, recompute))


def module_step_spec(graph: ModuleGraph, cluster: Cluster, *, dp: int, zero: int, micro_batches: int,
                     recompute: bool = False) -> StepSpec:
    """One optimizer step of `graph` over `dp` GPUs, DDP (zero 0) or FSDP (zero 3) (module docstring)."""
    layers = module_layers(graph, cluster, recompute)
    nbytes = round(graph.params * graph.dtype.bytes)
    opt = optimizer_s(graph, cluster.device, dp if zero == 3 else 1)
    if dp == 1:
        extras = StageExtras(optimizer_s=opt)
    elif zero == 3:
        shard = CommOp(group=Group.DP, kind=CollKind.ALL_GATHER, size_bytes=nbytes // dp)
        extras = StageExtras(optimizer_s=opt, mb_gather=(shard,), mb_gather_overlap=True, mb_gather_bwd=(shard,),
                             mb_reduce_early=(CommOp(group=Group.DP, kind=CollKind.REDUCE_SCATTER, size_bytes=nbytes),))
    else:
        late = round(nbytes * min(1.0, DDP_BUCKET_PARAMS / max(graph.params, 1)))
        early = nbytes - late
        ar = CollKind.ALL_REDUCE
        extras = StageExtras(optimizer_s=opt,
                             grad_early=(CommOp(group=Group.DP, kind=ar, size_bytes=early),) if early else (),
                             grad_late=(CommOp(group=Group.DP, kind=ar, size_bytes=late),))
    return StepSpec(dp=dp, micro_batches=micro_batches, stages=(layers,), extras=(extras,))
