"""The estimator's output: step time with its breakdown, throughput, utilisation and memory."""

from __future__ import annotations

import dataclasses
from typing import Any

from distscope.model.memory import Memory

BREAKDOWN_KEYS = ("compute", "bubble", "tp", "cp", "ep", "pp", "dp", "optimizer")


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
    hbm_bytes: float
    microbatches: int

    @property
    def feasible(self) -> bool:
        return self.memory.total_bytes <= self.hbm_bytes

    @property
    def infeasible_reason(self) -> str:
        if self.feasible:
            return ""
        gib = 2**30
        big = self.memory.biggest()
        return (
            f"needs {self.memory.total_bytes / gib:.1f} GiB per GPU > {self.hbm_bytes / gib:.1f} GiB; "
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
            "hbm_bytes": self.hbm_bytes,
            "feasible": self.feasible,
            "infeasible_reason": self.infeasible_reason,
        }
