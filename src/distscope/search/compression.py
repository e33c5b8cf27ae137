"""Compression as a plan dimension: which quantized-communication options the planner tries, their
convergence caveats, and the best plan with and without compression.

Options per class (distscope.compress.spec prices bytes and codec time):
  DP gradients  fp32 (Megatron's default) | bf16 | int8 | int4 (Hadamard-smoothed, SDP4Bit)
  ZeRO weights  bf16 | int8 (ZeRO++ qwZ) | int4 | int4 weight differences (SDP4Bit qWD)
  TP activations bf16 | fp8
Compression does not change memory in the model, so feasibility is that of the uncompressed plan.
The planner re-estimates every option combination on a pool of candidates: the fastest uncompressed
ones and those with the most exposed DP+TP communication time (the ones compression helps most),
ranked by step time with that communication removed (an optimistic bound on what compression can
reach). Like the search, it screens interleaved 1F1B by its closed form (estimate's `screen`) and
estimates each option set's best, and the uncompressed plan it compares against, in full.
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
from collections.abc import Sequence

from distscope.compress.spec import CommClass, CompressionConfig, CompressionMethod
from distscope.model.estimate import estimate
from distscope.search.planner import Candidate, comm_free_time, exact, step_time
from distscope.software.presets import SoftwareProfile
from distscope.system.topology import Cluster
from distscope.workload.spec import ModelSpec
from distscope.workload.training import TrainingShape

M = CompressionMethod
OPTIONS: dict[CommClass, tuple[CompressionMethod, ...]] = {
    CommClass.DP_GRAD: (M.NONE, M.BF16, M.INT8, M.INT4_HS),
    CommClass.WEIGHTS: (M.NONE, M.INT8, M.INT4, M.QWD_INT4),
    CommClass.TP: (M.NONE, M.FP8),
}

CAVEATS: dict[tuple[CommClass, CompressionMethod], str] = {
    (CommClass.DP_GRAD, M.BF16): "bf16 gradient reduction: common practice; small rounding of sums over many ranks, low risk.",
    (CommClass.DP_GRAD, M.INT8): "int8 block-wise gradients (ZeRO++ qgZ-style): reported loss-neutral at 1-13B; validate the loss curve.",
    (CommClass.DP_GRAD, M.INT4_HS): "int4 gradients with no error feedback: biased unless Hadamard-smoothed (SDP4Bit's -HS); "
                                    "convergence shown only up to ~7B: highest risk, validate before long runs.",
    (CommClass.WEIGHTS, M.INT8): "int8 weight all-gather (ZeRO++ qwZ): forward/backward see quantized weights; low risk.",
    (CommClass.WEIGHTS, M.INT4): "int4 weights quantize the weights themselves each step: visible accuracy loss reported; "
                                 "prefer int4-diff.",
    (CommClass.WEIGHTS, M.QWD_INT4): "int4 weight differences (SDP4Bit qWD): quantizes the update, not the weights; "
                                     "reported loss-neutral, low-moderate risk.",
    (CommClass.TP, M.FP8): "fp8 TP activations (per-tensor e4m3): activations and their gradients lose precision in every "
                           "layer; no mainstream default, moderate risk: validate.",
}


def config_label(cfg: CompressionConfig | None) -> str:
    if cfg is None:
        return "none"
    parts = [f"{c.value}={m.value}" for c, m in cfg.by_class.items() if m is not M.NONE]
    return ",".join(parts) or "none"


def caveats(cfg: CompressionConfig | None) -> list[str]:
    if cfg is None:
        return []
    return [CAVEATS[(c, m)] for c, m in cfg.by_class.items() if m is not M.NONE and (c, m) in CAVEATS]


def configs() -> list[CompressionConfig]:
    """Every option combination except all-none."""
    out = []
    for dp, w, tp in itertools.product(OPTIONS[CommClass.DP_GRAD], OPTIONS[CommClass.WEIGHTS], OPTIONS[CommClass.TP]):
        if dp is w is tp is M.NONE:
            continue
        out.append(CompressionConfig(dp_grad=dp, weights=w, tp=tp))
    return out


def _applies(c: Candidate, cfg: CompressionConfig) -> bool:
    """Skip options that compress traffic the plan does not have (they can only tie)."""
    p = c.plan
    if cfg.tp is not M.NONE and p.tp == 1:
        return False
    if cfg.weights is not M.NONE and not (p.shards_optimizer or p.zero_stage == 3):
        return False
    return not (cfg.dp_grad is not M.NONE and p.dp * p.cp == 1)


@dataclasses.dataclass(frozen=True, kw_only=True)
class CompressionResult:
    uncompressed: Candidate
    compressed: Candidate  # best with some compression (may equal the uncompressed plan's degrees)
    ranked: tuple[Candidate, ...]  # best candidate per option set, fastest first
    evaluated: int

    @property
    def speedup(self) -> float:
        return self.uncompressed.step_time_s / self.compressed.step_time_s


def best_compressed(spec: ModelSpec, shape: TrainingShape, cluster: Cluster, pool: Sequence[Candidate],
                    comm_pool: Sequence[Candidate] = (), quant_GBps: float | None = None,
                    pool_size: int = 24, base: Candidate | None = None,
                    software: SoftwareProfile | None = None) -> CompressionResult | None:
    """Best plan per compression option set over the fastest `pool_size` of `pool` and the
    `pool_size` of `comm_pool` with the lowest comm_free_time (module docstring). `base`, the
    uncompressed plan compared against, defaults to the fastest of `pool` (the caller passes its #1
    when the simulator re-ranked the pool)."""
    if not pool:
        return None
    base = base or min(pool, key=lambda c: c.step_time_s)  # the search's pool is estimated in full
    seen: dict[int, Candidate] = {}
    for c in [*heapq.nsmallest(pool_size, pool, key=step_time), *heapq.nsmallest(pool_size, comm_pool, key=comm_free_time)]:
        seen.setdefault(id(c), c)
    best_by_cfg: dict[str, Candidate] = {}
    n = 0
    for cfg in configs():
        label = config_label(cfg)
        for c in seen.values():
            if not _applies(c, cfg):
                continue
            p = dataclasses.replace(c.plan, compression=cfg)
            e = estimate(spec, shape, cluster, p, quant_GBps=quant_GBps, software=software, screen=True)
            n += 1
            if e.feasible and (label not in best_by_cfg or e.step_time_s < best_by_cfg[label].step_time_s):
                best_by_cfg[label] = Candidate(p, e)
    # each option set's best, screened like the planner's first pass, then estimated in full
    ranked = sorted((exact(spec, shape, cluster, c, software, quant_GBps) for c in best_by_cfg.values()),
                    key=lambda c: c.step_time_s)
    if not ranked:
        return None
    return CompressionResult(uncompressed=base, compressed=ranked[0], ranked=tuple(ranked), evaluated=n)
