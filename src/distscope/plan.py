"""The parallelization plan: degrees and choices, validated once when built.

Rank order follows Megatron-Core's default `tp-cp-ep-dp-pp`: TP ranks are adjacent (stride 1), then
CP (stride tp), then DP (stride tp·cp), then PP (stride tp·cp·dp). Expert parallelism is carved out of
dp·cp for the MoE layers. Every validation error prints all the degrees.
"""

from __future__ import annotations

import dataclasses
import enum

from distscope.compress.spec import CompressionConfig, CompressionMethod
from distscope.dtypes import DType, Precision
from distscope.enums import Enum
from distscope.errors import DistscopeError
from distscope.hashing import cached_hash


class Recompute(Enum):
    NONE = "none"
    SELECTIVE = "selective"  # recompute attention core only (Korthikanti et al. 2022)
    FULL = "full"  # recompute the whole layer forward in backward
    # torchtitan's per-op selective checkpointing (SelectiveAC; `selective_ac_option = "op"` before
    # 2025): per block, keep the outputs of every other matmul, of attention and of reduce-scatters,
    # recompute the rest (model/op_sac.py)
    SELECTIVE_OP = "selective-op"


class Framework(Enum):
    """The training framework a plan runs on. It decides what the emitters write (search/emit.py),
    which plans are offered (search/frameworks.py) and the framework's own memory behaviour
    (model/framework_memory.py). ANY: framework-neutral, memory as Megatron-LM allocates it."""

    ANY = "any"
    MEGATRON = "megatron"
    TORCHTITAN = "torchtitan"


class Schedule(Enum):
    GPIPE = "gpipe"
    ONE_F_ONE_B = "1f1b"
    INTERLEAVED = "interleaved-1f1b"
    ZB_H1 = "zb-h1"  # Qi et al. 2023 (ICLR 2024), Zero Bubble Pipeline Parallelism, sec. 2.1
    ZB_V = "zb-v"  # Qi et al. 2023, arXiv 2401.10241v2 sec. 6: two chunks per rank in a V
    DUALPIPE = "dualpipe"  # DeepSeek-AI 2024, DeepSeek-V3 Technical Report, sec. 3.2.1
    PIPEDREAM_2BW = "2bw"  # Narayanan et al. 2021 (ICML), Memory-Efficient Pipeline-Parallel DNN Training


class Placement(Enum):
    """Which pipeline rank holds model chunk c (chunks counted from the embedding side)."""

    LOOP = "loop"  # chunk c on rank c mod pp (Megatron's interleaving; vp = 1 is the plain split)
    V = "v"  # chunk c < pp on rank c, chunk c >= pp on rank 2pp-1-c (ZB-V)
    MIRROR = "mirror"  # pp stages; rank r holds stage r and stage pp-1-r (DualPipe: two copies)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ScheduleTraits:
    """A schedule's properties as data (the cost functions live in model/schedules.py, the per-rank
    op order in trace/schedule.py)."""

    fixed_vp: int | None  # chunks per rank the schedule needs; None = any vp > 1 (interleaving)
    placement: Placement
    split_backward: bool  # backward split into B (input gradient) and W (weight gradient)
    weight_copies: int  # model copies held per rank: DualPipe 2 (two stages); 2BW stashes 2 versions
    flush: bool  # a pipeline flush every step (PipeDream-2BW has none)


SCHEDULE_TRAITS: dict[Schedule, ScheduleTraits] = {
    Schedule.GPIPE: ScheduleTraits(fixed_vp=1, placement=Placement.LOOP, split_backward=False, weight_copies=1, flush=True),
    Schedule.ONE_F_ONE_B: ScheduleTraits(fixed_vp=1, placement=Placement.LOOP, split_backward=False, weight_copies=1,
                                         flush=True),
    Schedule.INTERLEAVED: ScheduleTraits(fixed_vp=None, placement=Placement.LOOP, split_backward=False,
                                         weight_copies=1, flush=True),
    Schedule.ZB_H1: ScheduleTraits(fixed_vp=1, placement=Placement.LOOP, split_backward=True, weight_copies=1, flush=True),
    Schedule.ZB_V: ScheduleTraits(fixed_vp=2, placement=Placement.V, split_backward=True, weight_copies=1, flush=True),
    Schedule.DUALPIPE: ScheduleTraits(fixed_vp=1, placement=Placement.MIRROR, split_backward=True, weight_copies=2,
                                      flush=True),
    Schedule.PIPEDREAM_2BW: ScheduleTraits(fixed_vp=1, placement=Placement.LOOP, split_backward=False,
                                           weight_copies=2, flush=False),
}


class AttentionImpl(Enum):
    """The attention kernel. The fused ones keep no s² tensor in HBM; they differ in speed (measured
    per kernel in model/data/kernels/attention.csv)."""

    FLASH = "flash"  # FlashAttention-2 (flash-attn, PyTorch SDPA's flash backend, TE's FlashAttention)
    CUDNN = "cudnn"  # cuDNN fused attention (Transformer Engine's FusedAttention on Hopper)
    FA3 = "fa3"  # FlashAttention-3 (Hopper only)
    UNFUSED = "unfused"  # QK^T and AV as batched GEMMs with a fused scaled-masked softmax kernel between

    @property
    def fused(self) -> bool:
        return self is not AttentionImpl.UNFUSED

    @property
    def kernel(self) -> str:
        """The kernel's name in model/data/kernels/attention.csv."""
        return {AttentionImpl.FLASH: "fa2", AttentionImpl.CUDNN: "cudnn", AttentionImpl.FA3: "fa3"}.get(self, "")


class MoeDispatcher(Enum):
    """How MoE tokens reach their experts' ranks (model/moe.py prices both).

    ALLTOALL: one all-to-all on the expert-parallel group, every routed copy sent directly
    (Megatron-Core --moe-token-dispatcher-type alltoall).
    DEEPEP: node-forwarded dispatch (DeepSeek-V3 sec. 3.2.2; DeepEP's normal kernels, Megatron-Core
    --moe-token-dispatcher-type flex --moe-flex-dispatcher-backend deepep): a token crosses the network once per
    destination node, to the GPU of the same local index, which forwards its copies over NVLink."""

    ALLTOALL = "alltoall"
    DEEPEP = "deepep"


class MoeBalance(Enum):
    """How the router keeps expert loads even (the policy sets the skew model/routing.py prices).

    FORCED: the benchmark switch that routes every token to uniformly random experts (Megatron-Core
    --moe-router-force-load-balancing, torchtitan debug.moe_force_load_balance): no skew, only
    sampling noise. AUX_FREE: a per-expert bias added before top-k and updated from the recent load
    (Wang et al. 2024; DeepSeek-V3; torchtitan's load_balance_coeff). AUX_LOSS: a load-balancing
    auxiliary loss (GShard / Switch Transformer; Megatron-Core's default aux_loss)."""

    FORCED = "forced"
    AUX_FREE = "aux-free"
    AUX_LOSS = "aux-loss"


# how a plan that names no policy is priced: loss-free balancing, the policy of DeepSeek-V3 and of
# torchtitan's MoE (load_balance_coeff); within 1% of forced balance for fine-grained experts
# (model/routing.py). Megatron-Core's own default (aux_loss at coefficient 0) balances nothing and is not priced.
DEFAULT_BALANCE = MoeBalance.AUX_FREE


class Dim(Enum):
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


def least_microbatches(schedule: Schedule, pp: int) -> int:
    """The fewest micro-batches per step a pipeline of `pp` stages runs `schedule` with: ZB-H1 fills
    the pipeline (pp), ZB-V its V (2·pp − 1), DualPipe both directions (2·pp). PipeDream-2BW holds two
    weight versions: in its 1F1B order the first stage runs pp − 1 forwards ahead, so with fewer
    micro-batches it would start step k + 2 (on step k's weights) before step k's last backward."""
    if pp == 1:
        return 1
    return {Schedule.ZB_H1: pp, Schedule.ZB_V: 2 * pp - 1, Schedule.DUALPIPE: 2 * pp,
            Schedule.PIPEDREAM_2BW: pp - 1}.get(schedule, 1)


@cached_hash
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
    # quantized communication per class (DP gradients, sharded-weight all-gathers, TP activations);
    # None = nothing compressed. Priced in model/estimate.py with distscope.compress.spec.
    compression: CompressionConfig | None = None
    # ZeRO-3/FSDP: False keeps the gathered parameters across micro-batches (FSDP2
    # reshard_after_forward=False under torch.distributed.pipelining, Llama 3's FSDP): one all-gather
    # and one gradient reduce-scatter per step instead of two gathers and one reduce-scatter per
    # micro-batch, at the memory of unsharded weights and gradients.
    reshard_after_forward: bool = True
    # MoE: expert tensor parallelism (Megatron --expert-tensor-parallel-size; None = tp), capacity
    # factor (None = dropless), all-to-all overlapped with another micro-batch's compute (DeepSeek-V3
    # sec. 3.2.1; Megatron --overlap-moe-expert-parallel-comm)
    etp: int | None = None
    capacity_factor: float | None = None
    moe_a2a_overlap: bool = False
    moe_dispatcher: MoeDispatcher = MoeDispatcher.ALLTOALL
    # the router's load-balancing policy (model/routing.py prices the busiest EP rank); None = DEFAULT_BALANCE
    moe_balance: MoeBalance | None = None
    framework: Framework = Framework.ANY

    def degrees(self) -> str:
        return (
            f"dp={self.dp} tp={self.tp} pp={self.pp} vp={self.vp} cp={self.cp} ep={self.ep} "
            f"micro_batch={self.micro_batch} zero={self.zero_stage}"
            + (f" etp={self.etp}" if self.etp is not None else "")
            + (f" schedule={self.schedule.value}" if self.schedule.value not in ("1f1b", "interleaved-1f1b") else "")
        )

    @property
    def traits(self) -> ScheduleTraits:
        return SCHEDULE_TRAITS[self.schedule]

    @property
    def balance(self) -> MoeBalance:
        return DEFAULT_BALANCE if self.moe_balance is None else self.moe_balance

    @property
    def expert_tp(self) -> int:
        """Tensor-parallel degree of the expert layers (Megatron's default: tp)."""
        return self.tp if self.etp is None else self.etp

    @property
    def compressed(self) -> bool:
        c = self.compression
        return c is not None and any(m is not CompressionMethod.NONE for m in (c.dp_grad, c.weights, c.tp))

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
        need_vp = self.traits.fixed_vp
        if self.vp > 1 and need_vp == 1:
            raise self._fail(f"vp={self.vp} needs schedule=interleaved-1f1b (or zb-v with vp=2), got {self.schedule.value}")
        if need_vp is None and self.vp == 1:
            raise self._fail("schedule=interleaved-1f1b needs vp > 1")
        if need_vp is not None and need_vp > 1 and self.vp != need_vp:
            raise self._fail(f"schedule={self.schedule.value} needs vp={need_vp} (two chunks per rank), got vp={self.vp}")
        if self.pp == 1 and self.schedule in (Schedule.ZB_H1, Schedule.ZB_V, Schedule.DUALPIPE, Schedule.PIPEDREAM_2BW):
            raise self._fail(f"schedule={self.schedule.value} needs pp > 1")
        if self.schedule is Schedule.DUALPIPE and self.pp % 2:
            raise self._fail(f"schedule=dualpipe needs an even pp, got pp={self.pp}")
        if self.etp is not None and self.etp < 1:
            raise self._fail(f"etp={self.etp} must be >= 1")
        if self.capacity_factor is not None and not 0 < self.capacity_factor < float("inf"):
            raise self._fail(f"capacity_factor={self.capacity_factor} must be a finite number > 0")
        if not self.reshard_after_forward and self.zero_stage != 3:
            raise self._fail(f"reshard_after_forward=False needs zero_stage=3 (FSDP), got zero_stage={self.zero_stage}")
        if self.recompute_layers < 0 or (self.recompute_layers and self.recompute is not Recompute.FULL):
            raise self._fail(f"recompute_layers={self.recompute_layers} needs recompute=full and must be >= 0")
        if self.stage_layers and len(self.stage_layers) != self.pp * self.vp:
            raise self._fail(f"stage_layers has {len(self.stage_layers)} entries, need pp*vp={self.pp * self.vp}")
        if self.stage_layers and min(self.stage_layers) < 0:
            raise self._fail(f"stage_layers={list(self.stage_layers)} must be >= 0 each")

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
              global_batch: int, num_gpus: int, gpus_per_node: int = 0) -> Plan:
        """Validate against a model, a training shape and a GPU count (and the GPUs per node, where
        known: 0 skips the node check); returns self."""
        if self.gpus != num_gpus:
            raise self._fail(f"dp*tp*pp*cp={self.gpus} != gpus={num_gpus}")
        if heads % self.tp:
            raise self._fail(f"heads={heads} not divisible by tp={self.tp}")
        if kv_heads % self.tp and self.tp % kv_heads:
            raise self._fail(f"kv_heads={kv_heads} and tp={self.tp}: one must divide the other")
        if self.stage_layers:
            if sum(self.stage_layers) != layers:
                raise self._fail(f"stage_layers={list(self.stage_layers)} must sum to layers={layers}")
            per_rank = rank_totals(self.stage_layers, self.pp, self.traits.placement)
            if min(per_rank) < 1:
                raise self._fail(f"stage_layers={list(self.stage_layers)} leave a pipeline stage with no layer "
                                 f"(layers per stage: {list(per_rank)})")
        elif layers % (self.pp * self.vp):
            raise self._fail(f"layers={layers} not divisible by pp*vp={self.pp * self.vp}")
        if global_batch % (self.dp * self.micro_batch):
            raise self._fail(f"global_batch={global_batch} not divisible by dp*micro_batch={self.dp * self.micro_batch}")
        m = self.microbatches(global_batch)
        if self.schedule is Schedule.INTERLEAVED and m % self.pp:
            raise self._fail(f"interleaved schedule needs microbatches={m} divisible by pp={self.pp}")
        if self.pp > 1:
            least = least_microbatches(self.schedule, self.pp)
            if m < least:
                raise self._fail(f"schedule={self.schedule.value} needs microbatches >= {least}, got {m}")
            if self.schedule is Schedule.DUALPIPE and m % 2:
                raise self._fail(f"schedule=dualpipe needs an even number of microbatches (two directions), got {m}")
        if self.cp > 1 and seq_len % (2 * self.cp):
            raise self._fail(f"seq={seq_len} not divisible by 2*cp={2 * self.cp} (load-balanced context parallel)")
        if self.sp and seq_len % (self.tp * self.cp):
            raise self._fail(f"seq={seq_len} not divisible by tp*cp={self.tp * self.cp} for sequence parallel")
        if self.ep > 1:
            if experts == 0:
                raise self._fail(f"ep={self.ep} needs a MoE model")
            if experts % self.ep:
                raise self._fail(f"experts={experts} not divisible by ep={self.ep}")
            if self.etp is None and (self.dp * self.cp) % self.ep:
                # without an expert grid (etp unset) experts are carved out of the dp x cp ranks; with etp
                # set, Megatron-Core's MoE parallel folding re-folds tp x cp x dp (checked below)
                raise self._fail(f"ep={self.ep} must divide dp*cp={self.dp * self.cp} (or set etp: MoE parallel folding)")
        if experts == 0:
            for what, bad in (("etp", self.etp not in (None, self.tp)), ("capacity_factor", self.capacity_factor is not None),
                              ("moe_a2a_overlap", self.moe_a2a_overlap),
                              ("moe_balance", self.moe_balance is not None),
                              ("moe_dispatcher=deepep", self.moe_dispatcher is MoeDispatcher.DEEPEP)):
                if bad:
                    raise self._fail(f"{what} needs a MoE model")
        elif self.etp is not None and (self.tp * self.dp * self.cp) % (self.etp * self.ep):
            # Megatron's expert grid etp x ep x edp re-folds the tp x cp x dp ranks of a stage
            raise self._fail(f"etp*ep={self.etp * self.ep} must divide tp*dp*cp={self.tp * self.dp * self.cp}")
        if experts and self.etp is not None and gpus_per_node and gpus_per_node % self.etp:
            # an expert's tensor-parallel shards exchange every layer's activations over NVLink: Megatron's
            # rank order puts etp innermost, so a group that does not divide the node straddles two nodes
            fits = [d for d in range(1, gpus_per_node + 1) if gpus_per_node % d == 0]
            raise self._fail(f"etp={self.etp} must divide the GPUs per node ({gpus_per_node}) so that expert "
                             f"tensor-parallel groups stay inside a node; valid: {', '.join(map(str, fits))}")
        return self

    @property
    def expert_dp(self) -> int:
        """Expert-data-parallel degree: ranks holding the same expert shard (tp·dp·cp / (etp·ep))."""
        return max(self.tp * self.dp * self.cp // (self.expert_tp * self.ep), 1)


def rank_totals(chunks: tuple[int, ...], pp: int, placement: Placement) -> tuple[int, ...]:
    """Layers per pipeline rank for model-chunk sizes under a placement (see Placement)."""
    out = [0] * pp
    for c, n in enumerate(chunks):
        out[chunk_rank(c, pp, placement)] += n
        if placement is Placement.MIRROR:
            out[pp - 1 - c] += n
    return tuple(out)


def chunk_rank(c: int, pp: int, placement: Placement) -> int:
    """The pipeline rank that holds model chunk c (for MIRROR: the forward-direction copy)."""
    if placement is Placement.V:
        return c if c < pp else 2 * pp - 1 - c
    return c % pp


def derive_dp(num_gpus: int, tp: int = 1, pp: int = 1, cp: int = 1) -> int:
    """dp = gpus / (tp·pp·cp), the degree left over when dp is not given."""
    mp = tp * pp * cp
    if mp < 1 or num_gpus % mp:
        raise DistscopeError(f"gpus={num_gpus} not divisible by tp*pp*cp={mp} (tp={tp} pp={pp} cp={cp})")
    return num_gpus // mp
