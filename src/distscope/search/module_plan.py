"""`distscope plan --model torch:FILE.py:FACTORY --input ...`: the data-parallel plans of a traced torch
module (issue 22). Every GPU is a data-parallel replica; the search is over how the replicas keep their
state (DDP: everything replicated; FSDP / ZeRO-3: weights, gradients and optimizer state sharded), the
micro-batch (the per-GPU batch split into gradient-accumulation steps), full recompute of the top-level
children (activations for a rerun forward, model/module_estimate.py) and a pipeline split over those
children (pp a power of two up to MAX_PP that divides the GPUs, model/module_pipeline.py; the same
micro-batch traces serve every pp). Each candidate is priced by the
estimator's module path (model/module_estimate.py), so `plan`'s #1 and `estimate` of the same flags give
the same step time; plans that do not fit a GPU's memory are kept out and counted.

Micro-batches searched: the divisors of the per-GPU batch (global batch / GPUs) that are powers of two,
and the per-GPU batch itself, largest first, at most MAX_MICRO_BATCHES of them: each one is a trace of
the module at that batch (the --input's leading dim is replaced). Tensor, pipeline, context and expert
parallelism need the module's structure and are refused in one line.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from distscope.errors import DistscopeError
from distscope.model.module_estimate import ModuleEstimate, estimate_module
from distscope.model.module_pipeline import estimate_module_pipeline
from distscope.system.topology import Cluster
from distscope.workload.module_graph import ModuleGraph

MAX_MICRO_BATCHES = 6  # traces per search (a ResNet-50 trace takes about a second on one core)
MAX_PP = 8
SHARDINGS = {0: "ddp", 3: "fsdp"}


@dataclasses.dataclass(frozen=True)
class ModuleCandidate:
    zero: int
    micro_batch: int
    estimate: ModuleEstimate
    recompute: bool = False
    pp: int = 1

    def to_dict(self) -> dict[str, Any]:
        return {"sharding": SHARDINGS[self.zero], "zero": self.zero, "micro_batch": self.micro_batch,
                "recompute": "full" if self.recompute else "none", "pp": self.pp} | self.estimate.to_dict()

    def label(self) -> str:
        return SHARDINGS[self.zero] + (f" + pp {self.pp}" if self.pp > 1 else "") + (" + recompute" if self.recompute else "")


@dataclasses.dataclass(frozen=True)
class ModulePlans:
    ranked: tuple[ModuleCandidate, ...]  # feasible, fastest first
    infeasible: tuple[ModuleCandidate, ...]
    micro_batches: tuple[int, ...]


def micro_batches(per_gpu: int) -> tuple[int, ...]:
    """The micro-batches searched for a per-GPU batch (module docstring), largest first."""
    pows = {b for b in (1 << i for i in range(per_gpu.bit_length())) if per_gpu % b == 0}
    return tuple(sorted(pows | {per_gpu}, reverse=True)[:MAX_MICRO_BATCHES])


def per_gpu_batch(global_batch: int, gpus: int) -> int:
    """Samples per GPU per step: every GPU is a data-parallel replica (one line when it does not divide)."""
    if global_batch < gpus or global_batch % gpus:
        raise DistscopeError(f"--global-batch={global_batch} must be a multiple of --gpus={gpus}: every GPU is a "
                             "data-parallel replica of a torch module")
    return global_batch // gpus


def plan_module(trace: Callable[[int], ModuleGraph], cluster: Cluster, *, global_batch: int,
                progress: Callable[[], None] | None = None) -> ModulePlans:
    """Every (sharding, micro-batch, recompute) of the module on all of `cluster`'s GPUs, priced and
    ranked. `trace(b)` traces the module at micro-batch b."""
    gpus = cluster.num_gpus
    mbs = micro_batches(per_gpu_batch(global_batch, gpus))
    feasible: list[ModuleCandidate] = []
    over: list[ModuleCandidate] = []
    for mb in mbs:
        graph = trace(mb)
        pps = [p for p in (1 << i for i in range(MAX_PP.bit_length())) if gpus % p == 0 and p <= len(graph.child_params) + 1]
        for pp in pps:
            for zero in SHARDINGS:
                for rc in (False, True):
                    if pp == 1:
                        est = estimate_module(graph, cluster, dp=gpus, zero=zero, global_batch=global_batch, recompute=rc)
                    else:
                        try:
                            est = estimate_module_pipeline(graph, cluster, pp=pp, zero=zero, global_batch=global_batch,
                                                           recompute=rc)
                        except DistscopeError:
                            continue  # fewer layers than stages (the root's ops not a layer of their own)
                    (feasible if est.feasible else over).append(ModuleCandidate(zero=zero, micro_batch=mb, estimate=est,
                                                                                recompute=rc, pp=pp))
        if progress is not None:
            progress()
    feasible.sort(key=lambda c: (c.estimate.step_time_s, c.pp, c.recompute))
    return ModulePlans(ranked=tuple(feasible), infeasible=tuple(over), micro_batches=mbs)


def why(plans: ModulePlans) -> str:
    """Why #1 wins: against the best plan of the other sharding, or why that sharding is out."""
    if not plans.ranked:
        return "no plan fits"
    best = plans.ranked[0]
    other = next((c for c in plans.ranked if c.zero != best.zero), None)
    gib = 2**30

    def mem(c: ModuleCandidate) -> float:
        return sum(c.estimate.memory_bytes.values()) / gib

    if other is None:
        need = min((mem(c) for c in plans.infeasible if c.zero != best.zero), default=None)
        if need is None:
            return f"only {SHARDINGS[best.zero]} was searched"
        return (f"{SHARDINGS[3 if best.zero == 0 else 0]} does not fit: at least {need:.1f} GiB "
                f"per GPU of {best.estimate.capacity_bytes / gib:.1f}")
    d_step = other.estimate.step_time_s - best.estimate.step_time_s
    keys = set(best.estimate.breakdown_s) | set(other.estimate.breakdown_s)
    terms = {k: other.estimate.breakdown_s.get(k, 0.0) - best.estimate.breakdown_s.get(k, 0.0) for k in keys}
    top = max(sorted(terms), key=lambda k: abs(terms[k]))

    return (f"{best.label()} at micro-batch {best.micro_batch} is {d_step:.4f} s faster than the best "
            f"{SHARDINGS[other.zero]} plan ({other.label()}, micro-batch {other.micro_batch}; mostly {top} "
            f"{terms[top]:+.4f} s) and needs {mem(best):.1f} GiB per GPU against {mem(other):.1f}")


def ranked_rows(cands: Sequence[ModuleCandidate]) -> list[tuple[str, ...]]:
    gib = 2**30
    return [(str(i + 1), c.label(), str(c.micro_batch),
             str(c.estimate.micro_batches),
             f"{c.estimate.step_time_s:.4f}", f"{c.estimate.samples_per_s:,.0f}", f"{c.estimate.mfu:.1%}",
             f"{sum(c.estimate.memory_bytes.values()) / gib:.1f}") for i, c in enumerate(cands)]
