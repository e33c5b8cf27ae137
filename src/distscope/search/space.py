"""The plan search space: which degrees and choices the planner enumerates, and which it prunes.

Enumerated: tp, pp, vp (interleaving), cp, ep, dp (the rest: gpus / (tp·pp·cp)), sequence parallel,
the optimizer sharding (DDP, distributed optimizer = ZeRO-1, ZeRO-2, ZeRO-3/FSDP), micro-batch and
recompute (none, selective, full, Megatron block recompute of k layers per chunk).

Pruned without an estimate (invalid, Plan.check's rules): tp must divide the heads and sit inside one
NVLink domain (the first topology level; a TP group across nodes is never competitive and no
framework defaults to it, raise `max_tp` to search it); kv heads and tp must divide one another;
pp·vp <= layers (uneven splits use Megatron's embedding/loss accounting, `balanced_chunks`); the
interleaved schedule needs microbatches divisible by pp; dp·micro_batch must divide the global batch;
load-balanced CP needs seq divisible by 2·cp; ep must divide the experts and dp·cp.

Pruned by dominance (never faster in the estimator, so not enumerated unless asked):
- overlap: every overlap the software supports is on (hiding communication never adds time);
- schedule: GPipe has 1F1B's time and holds m micro-batches instead of pp, so 1F1B (vp = 1) and
  interleaved 1F1B (vp > 1) by default; `schedules` adds ZB-H1, DualPipe and PipeDream-2BW (vp = 1)
  and ZB-V (vp = 2), each only where its micro-batch rule holds (ZB-H1 m >= pp, ZB-V m >= 2pp-1,
  DualPipe even pp and even m >= 2pp) and under the same branch and bound (planner.py);
- ZeRO-2 has the distributed optimizer's time and less memory: tried only where the latter needs
  recompute to fit;
- recompute: none is fastest; when it does not fit, the fewest block-recomputed layers that fit
  (memory falls and time rises monotonically in k, so a bisection finds it) and selective.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

from distscope.dtypes import Precision
from distscope.errors import DistscopeError
from distscope.model.stages import balanced_chunks
from distscope.plan import (
    SCHEDULE_TRAITS,
    AttentionImpl,
    Dim,
    Framework,
    MoeBalance,
    MoeDispatcher,
    Plan,
    Recompute,
    Schedule,
    least_microbatches,
)
from distscope.software.presets import SoftwareProfile
from distscope.system.topology import Cluster
from distscope.workload.spec import ModelSpec
from distscope.workload.training import TrainingShape

ALL_OVERLAP = frozenset({Dim.DP, Dim.TP, Dim.PP})


DEFAULT_SCHEDULES = (Schedule.ONE_F_ONE_B, Schedule.INTERLEAVED)


class Sharding:
    """Optimizer/gradient/weight sharding options as (zero_stage, distributed_optimizer)."""

    DDP = (0, False)
    DIST_OPT = (0, True)  # Megatron distributed optimizer: ZeRO-1
    ZERO2 = (2, False)
    ZERO3 = (3, False)  # FSDP full shard
    ALL = (DDP, DIST_OPT, ZERO2, ZERO3)


@dataclasses.dataclass(frozen=True, kw_only=True)
class SearchSpace:
    """Bounds of the search. None for a degree list means every valid value."""

    precision: Precision = Precision.BF16
    attention: AttentionImpl = AttentionImpl.FLASH
    overlap: frozenset[Dim] = ALL_OVERLAP  # what the software can overlap (all of it is used)
    tp: tuple[int, ...] | None = None
    pp: tuple[int, ...] | None = None
    cp: tuple[int, ...] | None = None
    ep: tuple[int, ...] | None = None
    max_tp: int | None = None  # default: GPUs per node (the NVLink domain)
    max_vp: int = 8
    max_cp: int = 16
    max_micro_batch: int = 16
    shardings: tuple[tuple[int, bool], ...] = Sharding.ALL
    sequence_parallel: tuple[bool, ...] = (True, False)
    block_recompute: bool = True
    selective_recompute: bool = True  # Korthikanti et al. 2022; older software only had full recompute
    # ZeRO-2/3 only where tp = cp = 1 (Megatron-FSDP before Blackwell: search/frameworks.py)
    sharded_dp_needs_plain_layout: bool = False
    schedules: tuple[Schedule, ...] = DEFAULT_SCHEDULES
    # the framework the plans are for: their memory accounting (model/framework_memory.py), torchtitan's
    # per-op selective recompute and its FSDP policy under PP (search/frameworks.py `restrict`)
    framework: Framework = Framework.ANY
    # MoE token dispatcher of every plan (a software choice, like the attention kernel)
    moe_dispatcher: MoeDispatcher = MoeDispatcher.ALLTOALL
    # the router's load balancing of every MoE plan (a training-recipe choice; None = the plan default)
    moe_balance: MoeBalance | None = None
    # the software stack the plans run on (software/presets.py: FSDP engine, FP8 recipe, kernel stack),
    # passed to every estimate; None = a current stack (software.presets.DEFAULT)
    software: SoftwareProfile | None = None

    def __post_init__(self) -> None:
        for f in ("max_vp", "max_cp", "max_micro_batch"):
            if getattr(self, f) < 1:
                raise DistscopeError(f"{f}={getattr(self, f)} must be >= 1")
        for f in ("tp", "pp", "cp", "ep"):
            v = getattr(self, f)
            if v is not None and (not v or min(v) < 1):
                raise DistscopeError(f"{f}={v} must be a non-empty list of degrees >= 1")
        if not self.schedules:
            raise DistscopeError("schedules must not be empty")

    def with_software(self, sw: SoftwareProfile, device_name: str) -> SearchSpace:
        """The space on a software preset: its attention kernel on this device, the overlap it can hide
        (within this space's), and the preset passed to every estimate."""
        return dataclasses.replace(self, attention=sw.attention_on(device_name), overlap=self.overlap & sw.overlap,
                                   software=sw)


def _divisors(n: int, limit: int) -> list[int]:
    """Divisors of n up to `limit`: O(min(n, limit)), so a GPU count of 2**40 costs nothing."""
    return [d for d in range(1, min(n, limit) + 1) if n % d == 0]


@dataclasses.dataclass(frozen=True, slots=True)
class Layout:
    """The degrees of a plan before the per-layout choices (sharding, SP, micro-batch, recompute)."""

    tp: int
    pp: int
    vp: int
    cp: int
    ep: int
    dp: int
    stage_layers: tuple[int, ...]  # () = uniform
    schedule: Schedule = Schedule.ONE_F_ONE_B

    @classmethod
    def of(cls, plan: Plan) -> Layout:
        """The layout a plan was built on (base_plan's inverse)."""
        return cls(tp=plan.tp, pp=plan.pp, vp=plan.vp, cp=plan.cp, ep=plan.ep, dp=plan.dp,
                   stage_layers=plan.stage_layers, schedule=plan.schedule)


def tp_values(space: SearchSpace, spec: ModelSpec, cluster: Cluster) -> list[int]:
    cap = space.max_tp or cluster.gpus_per_node
    vals = space.tp or tuple(_divisors(cluster.num_gpus, cap))
    return [t for t in vals if t <= cap and cluster.num_gpus % t == 0 and spec.heads % t == 0
            and (spec.kv_heads % t == 0 or t % spec.kv_heads == 0) and spec.layout_refusal(t, 1) is None]


def cp_values(space: SearchSpace, shape: TrainingShape, rest: int, spec: ModelSpec | None = None) -> list[int]:
    vals = space.cp or tuple(_divisors(rest, space.max_cp))
    top = 1 if spec is not None and spec.layout_refusal(1, 2) is not None else rest  # CP not priced (a recurrence, DSv4)
    return [c for c in vals if rest % c == 0 and c <= top and (c == 1 or shape.seq_len % (2 * c) == 0)]


def pp_values(space: SearchSpace, spec: ModelSpec, rest: int) -> list[int]:
    vals = space.pp or tuple(_divisors(rest, spec.layers))
    return [p for p in vals if rest % p == 0 and p <= spec.layers]


def vp_values(space: SearchSpace, spec: ModelSpec, pp: int) -> list[int]:
    if pp == 1:
        return [1]
    return list(range(1, min(space.max_vp, spec.layers // pp) + 1))  # bounded by the layers, not by --max-vp


def ep_values(space: SearchSpace, spec: ModelSpec, dp_cp: int) -> list[int]:
    if spec.moe is None:
        return [1]
    vals = space.ep or tuple(_divisors(spec.moe.experts, spec.moe.experts))
    return [e for e in vals if spec.moe.experts % e == 0 and dp_cp % e == 0]


def layouts(space: SearchSpace, spec: ModelSpec, shape: TrainingShape, cluster: Cluster) -> Iterator[Layout]:
    n = cluster.num_gpus
    for tp in tp_values(space, spec, cluster):
        for cp in cp_values(space, shape, n // tp, spec):
            for pp in pp_values(space, spec, n // (tp * cp)):
                dp = n // (tp * cp * pp)
                if shape.global_batch % dp:
                    continue
                for vp in vp_values(space, spec, pp):
                    split = balanced_chunks(spec.layers, pp, vp)
                    for sched in schedules_for(space, pp, vp, shape.global_batch // dp):
                        for ep in ep_values(space, spec, dp * cp):
                            yield Layout(tp=tp, pp=pp, vp=vp, cp=cp, ep=ep, dp=dp, stage_layers=split, schedule=sched)


def schedules_for(space: SearchSpace, pp: int, vp: int, per_dp: int) -> list[Schedule]:
    """The searched schedules a (pp, vp) layout can run with per_dp sequences per data-parallel rank
    (at micro-batch 1: the most micro-batches; micro_batches() checks each size)."""
    out = []
    for sched in space.schedules:
        need = SCHEDULE_TRAITS[sched].fixed_vp
        if pp == 1:
            ok = sched is Schedule.ONE_F_ONE_B and vp == 1
        elif need is None:
            ok = vp > 1 and per_dp % pp == 0  # interleaving needs m divisible by pp
        else:
            ok = vp == need and (sched is not Schedule.DUALPIPE or pp % 2 == 0)
        if ok and (pp == 1 or per_dp >= least_microbatches(sched, pp)):
            out.append(sched)
    return out


def why_no_layout(space: SearchSpace, spec: ModelSpec, shape: TrainingShape, cluster: Cluster) -> str:
    """Why `layouts` yields nothing, naming the binding constraint (for a one-line error)."""
    n = cluster.num_gpus
    tps = tp_values(space, spec, cluster)
    if not tps:
        return (f"no tensor-parallel degree works: tp must divide heads={spec.heads} and gpus={n}, match "
                f"kv_heads={spec.kv_heads}, and be <= {space.max_tp or cluster.gpus_per_node} (--max-tp)")
    dps = [n // (t * c * p) for t in tps for c in cp_values(space, shape, n // t, spec)
           for p in pp_values(space, spec, n // (t * c))]
    if not dps:
        return (f"no (tp, cp, pp) combination divides gpus={n}: tp in {tps}, "
                f"pp in {list(space.pp) if space.pp else 'divisors of layers=' + str(spec.layers)}, "
                f"cp in {list(space.cp) if space.cp else '<= ' + str(space.max_cp)}; "
                f"pick --pp/--cp values whose product with tp divides {n}")
    smallest_dp = min(dps)
    if shape.global_batch < smallest_dp:
        return (f"global_batch={shape.global_batch} is smaller than the fewest data-parallel ways possible: "
                f"gpus={n} / (tp·pp·cp) >= {smallest_dp} with tp <= {max(tps)}, pp <= {spec.layers} layers, "
                f"cp <= {space.max_cp}; every data-parallel rank needs a sequence, so raise --global-batch to "
                f"at least {smallest_dp} or use fewer GPUs")
    return (f"no data-parallel degree dp = gpus/(tp·pp·cp) divides global_batch={shape.global_batch} "
            f"(gpus={n}); choose a global batch with more factors in common with {n}")


def micro_batches(space: SearchSpace, shape: TrainingShape, lay: Layout) -> list[int]:
    """Micro-batch sizes in increasing order (memory grows with it: the planner stops at the first
    that cannot fit even with full recompute)."""
    per_dp = shape.global_batch // lay.dp
    out = []
    for b in range(1, min(space.max_micro_batch, per_dp) + 1):
        if per_dp % b:
            continue
        m = per_dp // b
        if lay.schedule is Schedule.INTERLEAVED and m % lay.pp:
            continue
        if lay.pp > 1 and (m < least_microbatches(lay.schedule, lay.pp) or (lay.schedule is Schedule.DUALPIPE and m % 2)):
            continue
        out.append(b)
    return out


def base_plan(space: SearchSpace, lay: Layout, sharding: tuple[int, bool], sp: bool, micro_batch: int) -> Plan:
    zero, dist_opt = sharding
    return Plan(
        dp=lay.dp, tp=lay.tp, pp=lay.pp, vp=lay.vp, cp=lay.cp, ep=lay.ep, sequence_parallel=sp,
        zero_stage=zero, distributed_optimizer=dist_opt, micro_batch=micro_batch,
        schedule=lay.schedule,
        precision=space.precision, overlap=space.overlap, attention=space.attention, stage_layers=lay.stage_layers,
        framework=space.framework, moe_dispatcher=space.moe_dispatcher if lay.ep > 1 else MoeDispatcher.ALLTOALL,
        moe_balance=space.moe_balance if lay.ep > 1 else None,
        # torchtitan's default FSDP policy keeps parameters gathered across micro-batches under PP
        reshard_after_forward=not (space.framework is Framework.TORCHTITAN and zero == 3 and lay.pp > 1),
    )


def shardings_for(space: SearchSpace, lay: Layout) -> tuple[tuple[int, bool], ...]:
    """The sharding options searched for one layout."""
    if space.sharded_dp_needs_plain_layout and (lay.tp > 1 or lay.cp > 1):
        return tuple(s for s in space.shardings if s[0] < 2)
    return space.shardings


def sharding_of(plan: Plan) -> tuple[int, bool]:
    """The Sharding option a plan's (zero_stage, distributed_optimizer) amounts to (ZeRO-1 = dist-opt)."""
    if plan.zero_stage >= 2:
        return (plan.zero_stage, False)
    return Sharding.DIST_OPT if plan.shards_optimizer else Sharding.DDP


def why_not_in_space(space: SearchSpace, spec: ModelSpec, shape: TrainingShape, cluster: Cluster,
                     plan: Plan) -> str:
    """'' when the planner's space holds `plan` (up to dominated choices: less overlap, GPipe, ZeRO-1
    spelled as zero_stage=1), else the reason. Used to check published plans against the search."""
    n = cluster.num_gpus
    checks = [
        (plan.precision is space.precision, f"precision={plan.precision.value}"),
        (plan.attention is space.attention, f"attention={plan.attention.value}"),
        (plan.overlap <= space.overlap, f"overlap={sorted(d.value for d in plan.overlap)}"),
        (plan.tp in tp_values(space, spec, cluster), f"tp={plan.tp}"),
        (n % plan.tp == 0 and plan.cp in cp_values(space, shape, n // plan.tp, spec), f"cp={plan.cp}"),
        (plan.pp in pp_values(space, spec, n // (plan.tp * plan.cp)), f"pp={plan.pp}"),
        (plan.vp in vp_values(space, spec, plan.pp), f"vp={plan.vp}"),
        (plan.schedule in space.schedules or plan.schedule is Schedule.GPIPE, f"schedule={plan.schedule.value}"),
        (plan.ep in ep_values(space, spec, plan.dp * plan.cp), f"ep={plan.ep}"),
        (plan.ep == 1 or plan.moe_dispatcher is space.moe_dispatcher, f"moe_dispatcher={plan.moe_dispatcher.value}"),
        (plan.ep == 1 or plan.balance is (space.moe_balance or plan.balance), f"moe_balance={plan.balance.value}"),
        (plan.micro_batch <= space.max_micro_batch, f"micro_batch={plan.micro_batch}"),
        (plan.sp in space.sequence_parallel or plan.tp == 1, f"sequence_parallel={plan.sp}"),
        (space.selective_recompute or plan.recompute is not Recompute.SELECTIVE, "recompute=selective"),
        (sharding_of(plan) in space.shardings,
         f"zero_stage={plan.zero_stage} distributed_optimizer={plan.distributed_optimizer}"),
    ]
    bad = [what for ok, what in checks if not ok]
    return ("not in the search space: " + ", ".join(bad)) if bad else ""
