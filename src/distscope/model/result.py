"""The estimator's output: step time with its breakdown, throughput, utilisation and memory."""

from __future__ import annotations

import dataclasses
from typing import Any

from distscope.model.memory import Memory

BREAKDOWN_KEYS = ("compute", "bubble", "tp", "cp", "ep", "pp", "dp", "optimizer")


@dataclasses.dataclass(frozen=True, slots=True)
class LayerTimes:
    """Per-micro-batch time one layer adds to its pipeline stage (compute + exposed TP/CP/EP), and the
    extra work of the first stage (embedding) and the last (LM head + loss): the costs the pipeline
    partitioner (distscope.search.partition) balances."""

    dense_s: float
    moe_s: float
    first_s: float
    last_s: float


@dataclasses.dataclass(frozen=True, slots=True)
class Estimate:
    step_time_s: float
    breakdown_s: dict[str, float]  # sums to step_time_s; comm entries are exposed (not hidden) time
    comm_total_s: dict[str, float]  # communication time per dimension before overlap
    tokens_per_s: float
    model_flops: float  # per step, no recompute
    hardware_flops: float  # per step, with recompute
    mfu: float
    hfu: float
    tflops_per_gpu: float  # model TFLOP/s per GPU
    memory: Memory  # the worst pipeline stage
    capacity_bytes: float  # what the plan may use per GPU: usable memory less headroom (system/memory_budget.py)
    usable_bytes: float  # the memory total the driver reports
    microbatches: int
    stage_time_s: tuple[float, ...] = ()  # per pipeline stage, one micro-batch (forward + backward)
    layer_times: LayerTimes | None = None
    # priced by the planner's screening pass (estimate(screen=True)) where it differs from the full
    # estimate: the search re-estimates in full every candidate it keeps
    screened: bool = False

    @property
    def feasible(self) -> bool:
        return self.memory.total_bytes <= self.capacity_bytes

    @property
    def margin_bytes(self) -> float:
        """Capacity left per GPU (negative when the plan does not fit)."""
        return self.capacity_bytes - self.memory.total_bytes

    @property
    def infeasible_reason(self) -> str:
        if self.feasible:
            return ""
        gib = 2**30
        big = self.memory.biggest()
        return (
            f"needs {self.memory.total_bytes / gib:.1f} GiB per GPU > {self.capacity_bytes / gib:.1f} GiB "
            f"(usable {self.usable_bytes / gib:.1f} GiB less headroom); "
            f"biggest term: {big} {self.memory.terms()[big] / gib:.1f} GiB"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "step_time_s": self.step_time_s,
            "tokens_per_s": self.tokens_per_s,
            "mfu": self.mfu,
            "hfu": self.hfu,
            "tflops_per_gpu": self.tflops_per_gpu,
            "model_flops_per_step": self.model_flops,
            "microbatches": self.microbatches,
            "breakdown_s": dict(self.breakdown_s),
            "comm_total_s": dict(self.comm_total_s),
            "memory_per_gpu_bytes": self.memory.total_bytes,
            "memory_breakdown_bytes": self.memory.terms(),
            "capacity_bytes": self.capacity_bytes,
            "usable_bytes": self.usable_bytes,
            "margin_bytes": self.margin_bytes,
            "feasible": self.feasible,
            "infeasible_reason": self.infeasible_reason,
        }
