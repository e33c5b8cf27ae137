"""The parallel layout of one serving replica: tensor, pipeline and expert parallel degrees.

Expert parallelism lives inside the tensor-parallel group, as TensorRT-LLM's moe_tp × moe_ep = tp and
vLLM's `--enable-expert-parallel` lay it out: attention is sharded tp ways, each MoE layer's experts are
split into `ep` groups and each expert is sharded etp = tp/ep ways.
"""

from __future__ import annotations

import dataclasses

from distscope.errors import DistscopeError
from distscope.workload.spec import ModelSpec


@dataclasses.dataclass(frozen=True, kw_only=True)
class Layout:
    tp: int = 1
    pp: int = 1
    ep: int = 1

    def __post_init__(self) -> None:
        if self.tp < 1 or self.pp < 1 or self.ep < 1:
            raise DistscopeError(f"tp={self.tp} pp={self.pp} ep={self.ep}: every degree must be >= 1")
        if self.tp % self.ep:
            raise DistscopeError(f"ep={self.ep} must divide tp={self.tp} (experts are sharded inside the TP group)")

    @property
    def gpus(self) -> int:
        return self.tp * self.pp

    @property
    def etp(self) -> int:
        return self.tp // self.ep

    def check(self, spec: ModelSpec) -> None:
        where = f"tp={self.tp} pp={self.pp} ep={self.ep}"
        if spec.heads % self.tp:
            raise DistscopeError(f"{where}: tp must divide the model's heads={spec.heads}")
        if spec.kv_heads % self.tp and self.tp % spec.kv_heads:
            raise DistscopeError(f"{where}: tp and kv_heads={spec.kv_heads} must divide one another")
        if self.pp > spec.layers:
            raise DistscopeError(f"{where}: pp exceeds the model's layers={spec.layers}")
        if self.ep > 1 and (spec.moe is None or spec.moe.experts % self.ep):
            experts = 0 if spec.moe is None else spec.moe.experts
            raise DistscopeError(f"{where}: ep must divide the model's experts={experts}")

    def label(self) -> str:
        return f"tp={self.tp} pp={self.pp}" + (f" ep={self.ep}" if self.ep > 1 else "")
