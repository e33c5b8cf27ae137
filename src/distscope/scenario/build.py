"""Turn the three flag families (scenario/flags.py) into (ModelSpec, TrainingShape, Cluster, Plan), once.

Every verb that takes a scenario (estimate, trace generate, plan's printed commands, simulate --cluster,
the emitters' round trip) builds it here, so the same flags give the same Plan everywhere. Strings
become enums here; every error names the flag and the value. Plan choices left out take the software
stack's defaults (software/presets.py PlanDefaults): the named --software preset's, else DEFAULT's.
"""

from __future__ import annotations

import dataclasses
import math

from distscope.compress.spec import parse_compression_config
from distscope.dtypes import Precision
from distscope.errors import DistscopeError, warn
from distscope.plan import (
    AttentionImpl,
    Dim,
    Framework,
    MoeBalance,
    MoeDispatcher,
    Plan,
    Recompute,
    Schedule,
    derive_dp,
    parse_enum,
)
from distscope.scenario.flags import PlanFlags, SystemFlags, WorkloadFlags
from distscope.software.presets import DEFAULT as DEFAULT_SOFTWARE
from distscope.software.presets import SoftwareProfile, get_software
from distscope.system.device import Device
from distscope.system.presets import get_cluster
from distscope.system.topology import Cluster
from distscope.workload.catalog import get_model
from distscope.workload.spec import ModelSpec, PositionKind
from distscope.workload.training import TrainingShape


def parse_overlap(value: str) -> frozenset[Dim]:
    items = [x.strip().lower() for x in value.split(",") if x.strip()]
    if items in ([], ["none"]):
        return frozenset()
    out = set()
    for x in items:
        if x not in ("dp", "tp", "pp"):
            raise DistscopeError(f"--overlap={value!r}: {x!r} is not one of dp, tp, pp, none")
        out.add(Dim(x))
    return frozenset(out)


def parse_int_list(value: str, flag: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in value.split(",") if x.strip())
    except ValueError:
        raise DistscopeError(f"{flag}={value!r} must be a comma list of integers") from None


def parse_links(value: str | None) -> dict[str, float]:
    if not value:
        return {}
    out: dict[str, float] = {}
    for item in value.split(","):
        name, _, bw = item.partition("=")
        try:
            out[name.strip()] = float(bw)
        except ValueError:
            raise DistscopeError(f"--link={value!r}: {item!r} must look like name=GBps") from None
        if not (math.isfinite(out[name.strip()]) and out[name.strip()] > 0):
            raise DistscopeError(f"--link={value!r}: bandwidth of {name.strip()} must be a finite number > 0")
    return out


def split_for(spec: ModelSpec, pp: int, vp: int, flags: PlanFlags) -> tuple[int, ...]:
    """Layers per model chunk: --stage-layers, else Megatron's first/last-stage rule, else uniform when
    the layers divide, else Megatron's embedding/loss accounting (model.stages.balanced_chunks)."""
    from distscope.model.stages import balanced_chunks, first_last_chunks

    first, last = flags.first_stage_layers, flags.last_stage_layers
    for name, v in (("--pp", pp), ("--vp", vp)):  # checked here: the split is computed before Plan.check
        if v < 1:
            raise DistscopeError(f"{name}={v} must be >= 1")
    if flags.stage_layers:
        if first is not None or last is not None:
            raise DistscopeError("--stage-layers and --first-stage-layers/--last-stage-layers exclude each other")
        return parse_int_list(flags.stage_layers, "--stage-layers")
    if first is not None or last is not None:
        return first_last_chunks(spec.layers, pp, vp, first, last)
    return balanced_chunks(spec.layers, pp, vp)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Scenario:
    spec: ModelSpec
    shape: TrainingShape
    cluster: Cluster
    plan: Plan
    software: SoftwareProfile | None = None  # the named --software preset (None: DEFAULT prices it)


def with_profile(c: Cluster, profile: str | None) -> Cluster:
    if not profile:
        return c
    from pathlib import Path

    from distscope.measure.profile import load_profile, profile_warnings
    from distscope.system.calibrated import apply_profile

    prof = load_profile(Path(profile))
    for w in profile_warnings(prof, c.device.name):
        warn(w)
    return apply_profile(c, prof)


def check_seq(spec: ModelSpec, seq: int) -> None:
    """A model with a learned position table cannot run longer sequences than the table has rows; a
    rotary (or ALiBi) model can, but only with context extension the model was not trained for."""
    if seq < 1:
        raise DistscopeError(f"--seq={seq} must be >= 1")
    if spec.position is PositionKind.LEARNED and seq > spec.max_positions:
        raise DistscopeError(f"--seq={seq} exceeds model {spec.name}'s learned position table "
                             f"({spec.max_positions} positions); use --seq {spec.max_positions} or less")
    if (lm := spec.linear_mixer) is not None:
        from distscope.model.linear_mixer import MISSING

        warn(f"model {spec.name}: " + MISSING.format(kind=lm.kind.value, chunk=lm.chunk))
    if spec.compressed_attention is not None:
        from distscope.model import compressed_attention

        warn(f"model {spec.name}: " + compressed_attention.MISSING)
    if spec.sparse_attention is not None:
        from distscope.model import sparse_attention

        warn(f"model {spec.name}: " + sparse_attention.MISSING)
    if spec.max_positions and seq > spec.max_positions:  # the catalog's (or config.json's) context window
        warn(f"--seq={seq} is beyond model {spec.name}'s context of {spec.max_positions} tokens "
             f"({seq / spec.max_positions:.0f}x); predicted as if it ran")


DEFAULT_SEQ = 4096


def default_seq(spec: ModelSpec) -> int:
    """The sequence length every command uses when --seq is not given: 4096, or the model's context if shorter."""
    return min(spec.max_positions or DEFAULT_SEQ, DEFAULT_SEQ)


def warn_kernel_fallbacks(device: Device, precision: Precision) -> None:
    """A device or dtype (or block-scaled recipe) priced without a GEMM measurement of its own says so, once per process."""
    from distscope.model.kernel_data import missing_scaling, missing_tables

    for w in missing_tables(device.name, [precision.activation_dtype, precision.gemm_dtype]):
        warn(w)
    if (note := missing_scaling(device.name, precision.scaling)) is not None:
        warn(note)


def check_tp_domain(plan: Plan, cluster: Cluster) -> None:
    if plan.tp > cluster.gpus_per_node:
        warn(f"--tp={plan.tp} spans {plan.tp // cluster.gpus_per_node} nodes of {cluster.gpus_per_node} GPUs "
             f"({cluster.name}): tensor-parallel traffic crosses the {cluster.levels[-1].name} network every layer")


def build_cluster(flags: SystemFlags) -> Cluster:
    c = get_cluster(flags.cluster, flags.gpus)
    links = parse_links(flags.link)
    c = with_profile(c.with_bandwidths(links) if links else c, flags.profile)
    if flags.max_memory is not None or flags.headroom is not None:
        c = c.with_memory(flags.max_memory, flags.headroom)
    if flags.host_op_us is not None:
        c = c.with_host_op(flags.host_op_us)
    return c


def software_of(flags: PlanFlags) -> SoftwareProfile | None:
    """The named --software preset, or None (the estimator then prices with software.presets.DEFAULT)."""
    return get_software(flags.software) if flags.software is not None else None


MAX_AUTO_MICRO_BATCH = 16  # the largest micro-batch `auto` tries (validate/harness.py uses the same rule)


def auto_micro_batches(global_batch: int, dp: int) -> list[int]:
    """The micro-batches `--micro-batch auto` tries: divisors of global_batch/dp up to MAX_AUTO_MICRO_BATCH."""
    per_replica = global_batch // dp if dp > 0 and global_batch % dp == 0 else 0
    return [d for d in range(1, min(MAX_AUTO_MICRO_BATCH, max(per_replica, 1)) + 1) if per_replica % d == 0] or [1]


def fastest_micro_batch(flags: PlanFlags, spec: ModelSpec, shape: TrainingShape, cluster: Cluster) -> Plan:
    """The plan with `--micro-batch auto`: the fastest candidate (auto_micro_batches) whose memory fits,
    else the one with the least memory (its estimate then reports that it does not fit)."""
    from distscope.model.estimate import estimate

    sw = software_of(flags)
    dp = flags.dp if flags.dp is not None else derive_dp(cluster.num_gpus, flags.tp, flags.pp, flags.cp)
    best: tuple[float, Plan] | None = None
    least: tuple[float, Plan] | None = None
    error: DistscopeError | None = None
    for mb in auto_micro_batches(shape.global_batch, dp):
        try:
            plan = build_plan(dataclasses.replace(flags, micro_batch=mb), spec, shape, cluster)
        except DistscopeError as exc:
            error = error or exc
            continue
        est = estimate(spec, shape, cluster, plan, software=sw)
        if est.feasible and (best is None or est.step_time_s < best[0]):
            best = (est.step_time_s, plan)
        if least is None or est.memory.total_bytes < least[0]:
            least = (est.memory.total_bytes, plan)
    chosen = best or least
    if chosen is None:
        assert error is not None
        raise error
    return chosen[1]


def build_plan(flags: PlanFlags, spec: ModelSpec, shape: TrainingShape, cluster: Cluster) -> Plan:
    """The Plan the flags describe, checked against the model, the training shape and the cluster's GPU
    count. Every choice left out (None) takes the software stack's default on the cluster's GPU (module
    doc); a micro-batch left out is 1 here (plan_on chooses it: fastest_micro_batch)."""
    sw = software_of(flags) or DEFAULT_SOFTWARE
    d = sw.plan
    tp, pp, vp, cp = flags.tp, flags.pp, flags.vp, flags.cp
    sched = Schedule.INTERLEAVED if vp > 1 else Schedule.ONE_F_ONE_B
    if flags.schedule is not None:
        sched = parse_enum(Schedule, flags.schedule, "--schedule")  # type: ignore[assignment]
    fw: Framework = (d.framework if flags.framework is None
                     else parse_enum(Framework, flags.framework, "--framework"))  # type: ignore[assignment]
    zero = d.zero_stage if flags.zero is None else flags.zero
    # a ZeRO stage named alone decides the optimizer sharding (ZeRO-1 and up shard it); the stack's
    # distributed optimizer applies where the plan leaves both to it
    dist_opt = flags.distributed_optimizer
    if dist_opt is None:
        dist_opt = d.distributed_optimizer and flags.zero is None and zero == 0
    rec = d.recompute if flags.recompute is None else parse_enum(Recompute, flags.recompute, "--recompute")
    reshard = flags.reshard_after_forward
    if reshard is None:  # torchtitan keeps FSDP parameters gathered across micro-batches under PP
        reshard = not (fw is Framework.TORCHTITAN and zero == 3 and pp > 1)
    plan = Plan(
        dp=flags.dp if flags.dp is not None else derive_dp(cluster.num_gpus, tp, pp, cp), tp=tp, pp=pp, vp=vp, cp=cp,
        ep=flags.ep, sequence_parallel=tp > 1 and (d.sequence_parallel if flags.sequence_parallel is None
                                                  else flags.sequence_parallel),
        zero_stage=zero, distributed_optimizer=dist_opt, micro_batch=flags.micro_batch or 1,
        recompute=rec, recompute_layers=flags.recompute_layers, schedule=sched,  # type: ignore[arg-type]
        precision=Precision.parse(flags.precision, "--precision"),
        overlap=sw.overlap if flags.overlap is None else parse_overlap(flags.overlap),
        attention=(sw.attention_on(cluster.device.name) if flags.attention is None
                   else parse_enum(AttentionImpl, flags.attention, "--attention")),  # type: ignore[arg-type]
        stage_layers=split_for(spec, pp, vp, flags),
        etp=flags.etp, capacity_factor=flags.capacity_factor, moe_a2a_overlap=flags.moe_a2a_overlap,
        moe_dispatcher=parse_enum(MoeDispatcher, flags.moe_dispatcher, "--moe-dispatcher"),  # type: ignore[arg-type]
        moe_balance=(None if flags.moe_balance is None
                     else parse_enum(MoeBalance, flags.moe_balance, "--moe-balance")),  # type: ignore[arg-type]
        framework=fw, reshard_after_forward=reshard,
        compression=parse_compression_config(flags.compress) if flags.compress else None,
    )
    plan.check(layers=spec.layers, heads=spec.heads, kv_heads=spec.kv_heads,
               experts=spec.moe.experts if spec.moe else 0, seq_len=shape.seq_len,
               global_batch=shape.global_batch, num_gpus=cluster.num_gpus, gpus_per_node=cluster.gpus_per_node)
    from distscope.model.refusal import refusal

    if (why := refusal(spec, plan)) is not None:
        raise DistscopeError(f"invalid plan: {why} [plan: {plan.degrees()}]")
    return plan


def plan_on(flags: PlanFlags, spec: ModelSpec, shape: TrainingShape, cluster: Cluster) -> Plan:
    """The Plan the flags describe on this cluster: build_plan, with `--micro-batch auto` resolved."""
    cluster.device.check_precision(Precision.parse(flags.precision, "--precision"))
    if flags.micro_batch is not None:
        return build_plan(flags, spec, shape, cluster)
    return fastest_micro_batch(flags, spec, shape, cluster)


def build_workload(flags: WorkloadFlags) -> tuple[ModelSpec, TrainingShape]:
    spec = get_model(flags.model)
    if flags.input is not None:
        raise DistscopeError(f"--input is for torch modules (--model torch:FILE.py:FACTORY); {flags.model} is a "
                             "transformer model, shaped by --seq and --global-batch")
    if flags.mtp_layers is not None:
        if flags.mtp_layers < 0:
            raise DistscopeError(f"--mtp-layers={flags.mtp_layers} must be >= 0")
        spec = dataclasses.replace(spec, mtp_layers=flags.mtp_layers)
    seq = default_seq(spec) if flags.seq is None else flags.seq
    check_seq(spec, seq)
    if flags.global_batch < 1:
        raise DistscopeError(f"--global-batch={flags.global_batch} must be >= 1")
    return spec, TrainingShape(seq_len=seq, global_batch=flags.global_batch)


def build_scenario(workload: WorkloadFlags, system: SystemFlags, plan: PlanFlags) -> Scenario:
    """The one place flags become a scenario (module doc)."""
    if plan.sharding is not None:
        raise DistscopeError(f"--sharding={plan.sharding} is for recommendation models (--model dlrm:FILE.yaml or "
                             "dlrm:mlperf-dcnv2)")
    spec, shape = build_workload(workload)
    c = build_cluster(system)
    p = plan_on(plan, spec, shape, c)
    check_tp_domain(p, c)
    warn_kernel_fallbacks(c.device, p.precision)
    return Scenario(spec=spec, shape=shape, cluster=c, plan=p, software=software_of(plan))
