"""The parallelization plan: degrees and choices, validated once when built.

Rank order follows Megatron-Core's default `tp-cp-ep-dp-pp`: TP ranks are adjacent (stride 1), then
CP (stride tp), then DP (stride tp·cp), then PP (stride tp·cp·dp). Expert parallelism is carved out of
dp·cp for the MoE layers. Every validation error prints all the degrees.
"""

from __future__ import annotations

import dataclasses
import enum

from distscope.dtypes import DType, Precision
from distscope.errors import DistscopeError


class Recompute(enum.Enum):
    NONE = "none"
    SELECTIVE = "selective"  # recompute attention core only (Korthikanti et al. 2022)
    FULL = "full"  # recompute the whole layer forward in backward


class Schedule(enum.Enum):
    GPIPE = "gpipe"
    ONE_F_ONE_B = "1f1b"
    INTERLEAVED = "interleaved-1f1b"


class AttentionImpl(enum.Enum):
    FLASH = "flash"  # fused attention: no s² tensor in HBM (FlashAttention, cuDNN/TE fused attention)
    UNFUSED = "unfused"  # QK^T and AV as batched GEMMs with a fused scaled-masked softmax kernel between


class Dim(enum.Enum):
    """A parallel dimension: labels communication in breakdowns and logs."""

    DP = "dp"
    TP = "tp"
    PP = "pp"
    CP = "cp"
    EP = "ep"


def parse_enum(cls: type[enum.Enum], value: str, field: str) -> enum.Enum:
    try:
        return cls(value.strip().lower())
    except ValueError:
        raise DistscopeError(f"{field}={value!r} is not valid; choose one of: {', '.join(str(m.value) for m in cls)}") from None


@dataclasses.dataclass(frozen=True, kw_only=True)
class Plan:
    dp: int
    tp: int = 1
    pp: int = 1
    vp: int = 1
    cp: int = 1
    ep: int = 1
    sequence_parallel: bool = False
    zero_stage: int = 0
    distributed_optimizer: bool = False
    micro_batch: int = 1
    recompute: Recompute = Recompute.NONE
    recompute_layers: int = 0  # with FULL: layers per model chunk recomputed (Megatron block method); 0 = all
    schedule: Schedule = Schedule.ONE_F_ONE_B
    precision: Precision = Precision.BF16
    overlap: frozenset[Dim] = frozenset()
    attention: AttentionImpl = AttentionImpl.FLASH
    grad_reduce_dtype: DType = DType.FP32  # Megatron's main_grad buffers are fp32 and reduced as such
    stage_layers: tuple[int, ...] = ()  # explicit layers per pipeline stage; () = uniform

    def degrees(self) -> str:
        return (
            f"dp={self.dp} tp={self.tp} pp={self.pp} vp={self.vp} cp={self.cp} ep={self.ep} "
            f"micro_batch={self.micro_batch} zero={self.zero_stage}"
        )

    def _fail(self, msg: str) -> DistscopeError:
        return DistscopeError(f"{msg} [plan: {self.degrees()}]")

    def __post_init__(self) -> None:
        for f in ("dp", "tp", "pp", "vp", "cp", "ep", "micro_batch"):
            if getattr(self, f) < 1:
                raise self._fail(f"{f}={getattr(self, f)} must be >= 1")
        if self.zero_stage not in (0, 1, 2, 3):
            raise self._fail(f"zero_stage={self.zero_stage} must be 0, 1, 2 or 3")
        if self.vp > 1 and self.pp == 1:
            raise self._fail(f"vp={self.vp} needs pp > 1")
        if self.vp > 1 and self.schedule is not Schedule.INTERLEAVED:
            raise self._fail(f"vp={self.vp} needs schedule=interleaved-1f1b, got {self.schedule.value}")
        if self.schedule is Schedule.INTERLEAVED and self.vp == 1:
            raise self._fail("schedule=interleaved-1f1b needs vp > 1")
        if self.recompute_layers < 0 or (self.recompute_layers and self.recompute is not Recompute.FULL):
            raise self._fail(f"recompute_layers={self.recompute_layers} needs recompute=full and must be >= 0")
        if self.stage_layers and len(self.stage_layers) != self.pp * self.vp:
            raise self._fail(f"stage_layers has {len(self.stage_layers)} entries, need pp*vp={self.pp * self.vp}")

    @property
    def gpus(self) -> int:
        return self.dp * self.tp * self.pp * self.cp

    @property
    def sp(self) -> bool:
        return self.sequence_parallel and self.tp > 1

    @property
    def shards_optimizer(self) -> bool:
        return self.distributed_optimizer or self.zero_stage >= 1

    def microbatches(self, global_batch: int) -> int:
        return global_batch // (self.dp * self.micro_batch)

    def check(self, *, layers: int, heads: int, kv_heads: int, experts: int, seq_len: int,
              global_batch: int, num_gpus: int) -> Plan:
        """Validate against a model, a training shape and a GPU count; returns self."""
        if self.gpus != num_gpus:
            raise self._fail(f"dp*tp*pp*cp={self.gpus} != gpus={num_gpus}")
        if heads % self.tp:
            raise self._fail(f"heads={heads} not divisible by tp={self.tp}")
        if kv_heads % self.tp and self.tp % kv_heads:
            raise self._fail(f"kv_heads={kv_heads} and tp={self.tp}: one must divide the other")
        if self.stage_layers:
            if sum(self.stage_layers) != layers or min(self.stage_layers) < 1:
                raise self._fail(f"stage_layers={list(self.stage_layers)} must be >= 1 each and sum to layers={layers}")
        elif layers % (self.pp * self.vp):
            raise self._fail(f"layers={layers} not divisible by pp*vp={self.pp * self.vp}")
        if global_batch % (self.dp * self.micro_batch):
            raise self._fail(f"global_batch={global_batch} not divisible by dp*micro_batch={self.dp * self.micro_batch}")
        m = self.microbatches(global_batch)
        if self.schedule is Schedule.INTERLEAVED and m % self.pp:
            raise self._fail(f"interleaved schedule needs microbatches={m} divisible by pp={self.pp}")
        if self.cp > 1 and seq_len % (2 * self.cp):
            raise self._fail(f"seq={seq_len} not divisible by 2*cp={2 * self.cp} (load-balanced context parallel)")
        if self.sp and seq_len % (self.tp * self.cp):
            raise self._fail(f"seq={seq_len} not divisible by tp*cp={self.tp * self.cp} for sequence parallel")
        if self.ep > 1:
            if experts == 0:
                raise self._fail(f"ep={self.ep} needs a MoE model")
            if experts % self.ep:
                raise self._fail(f"experts={experts} not divisible by ep={self.ep}")
            if (self.dp * self.cp) % self.ep:
                raise self._fail(f"ep={self.ep} must divide dp*cp={self.dp * self.cp}")
        return self


def derive_dp(num_gpus: int, tp: int = 1, pp: int = 1, cp: int = 1) -> int:
    """dp = gpus / (tp·pp·cp), the degree left over when dp is not given."""
    mp = tp * pp * cp
    if mp < 1 or num_gpus % mp:
        raise DistscopeError(f"gpus={num_gpus} not divisible by tp*pp*cp={mp} (tp={tp} pp={pp} cp={cp})")
    return num_gpus // mp
