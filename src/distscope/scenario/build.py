"""Turn command-line values into the three config families (workload, system, plan), once.

Shared by every command that takes a scenario (estimate, plan, trace generate). Strings become enums
here; every error names the flag and the value.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated

import typer

from distscope.dtypes import Precision
from distscope.errors import DistscopeError, warn
from distscope.plan import (
    AttentionImpl,
    Dim,
    Framework,
    MoeDispatcher,
    Plan,
    Recompute,
    Schedule,
    derive_dp,
    parse_enum,
)
from distscope.system.presets import get_cluster
from distscope.system.topology import Cluster
from distscope.workload.catalog import get_model
from distscope.workload.spec import ModelSpec, PositionKind
from distscope.workload.training import TrainingShape

ModelOpt = Annotated[str, typer.Option("--model", "-m", help="Catalog key (see `distscope models`) or a Hugging Face config.json path.")]
ClusterOpt = Annotated[str, typer.Option("--cluster", "-c", help="Cluster preset (see `distscope clusters`).")]
GpusOpt = Annotated[int, typer.Option("--gpus", "-n", help="Total GPUs; the preset is scaled to this count.")]
DpOpt = Annotated[int | None, typer.Option("--dp", help="Data-parallel degree (default: gpus / (tp*pp*cp)).")]
TpOpt = Annotated[int, typer.Option("--tp", help="Tensor-parallel degree.")]
PpOpt = Annotated[int, typer.Option("--pp", help="Pipeline-parallel degree.")]
VpOpt = Annotated[int, typer.Option("--vp", help="Virtual pipeline chunks per stage (interleaving).")]
CpOpt = Annotated[int, typer.Option("--cp", help="Context-parallel degree.")]
EpOpt = Annotated[int, typer.Option("--ep", help="Expert-parallel degree (MoE models).")]
SpOpt = Annotated[bool, typer.Option("--sequence-parallel/--no-sequence-parallel", help="Megatron sequence parallelism.")]
ZeroOpt = Annotated[int, typer.Option("--zero", help="ZeRO stage 0-3 (3 = FSDP full shard).")]
DistOptOpt = Annotated[bool, typer.Option("--distributed-optimizer/--no-distributed-optimizer", help="Megatron distributed optimizer (optimizer state sharded over DP).")]
MicroOpt = Annotated[int, typer.Option("--micro-batch", help="Sequences per micro-batch.")]
GlobalOpt = Annotated[int, typer.Option("--global-batch", help="Sequences per optimizer step.")]
SeqOpt = Annotated[int | None, typer.Option("--seq", help="Sequence length in tokens (default: 4096, or the model's context if shorter).")]
RecomputeOpt = Annotated[str, typer.Option("--recompute", help="Activation recompute: none, selective (Megatron: core attention), selective-op (torchtitan: per-op) or full.")]
RecomputeLayersOpt = Annotated[int, typer.Option("--recompute-layers", help="With --recompute full: layers per chunk recomputed (0 = all).")]
ScheduleOpt = Annotated[str | None, typer.Option("--schedule", help="gpipe, 1f1b, interleaved-1f1b, zb-h1, zb-v (vp=2), dualpipe or 2bw (default: interleaved-1f1b when vp > 1).")]
PrecisionOpt = Annotated[str, typer.Option("--precision", help="fp16, bf16 or fp8 (FP8 GEMMs, bf16 elsewhere).")]
OverlapOpt = Annotated[str, typer.Option("--overlap", help="Communication overlapped with compute: comma list of dp,tp,pp, or none.")]
AttentionOpt = Annotated[str, typer.Option("--attention", help="Attention kernel: flash (FlashAttention-2), cudnn (TE/cuDNN fused), fa3 (FlashAttention-3) or unfused.")]
StageLayersOpt = Annotated[str | None, typer.Option("--stage-layers", help="Explicit layers per pipeline chunk, comma list of pp*vp numbers.")]
FirstStageOpt = Annotated[int | None, typer.Option("--first-stage-layers", help="Layers on the first pipeline rank (Megatron --decoder-first-pipeline-num-layers).")]
LastStageOpt = Annotated[int | None, typer.Option("--last-stage-layers", help="Layers on the last pipeline rank (Megatron --decoder-last-pipeline-num-layers).")]
ReshardOpt = Annotated[bool, typer.Option("--reshard-after-forward/--no-reshard-after-forward", help="With --zero 3: free gathered parameters after each forward (default) or keep them across micro-batches.")]
EtpOpt = Annotated[int | None, typer.Option("--etp", help="Expert tensor-parallel degree for MoE layers (default: tp).")]
CapacityOpt = Annotated[float | None, typer.Option("--capacity-factor", help="MoE expert capacity factor; tokens beyond it are dropped (default: dropless).")]
A2AOverlapOpt = Annotated[bool, typer.Option("--moe-a2a-overlap/--no-moe-a2a-overlap", help="Overlap MoE all-to-all with another micro-batch's compute (DeepSeek-V3 DualPipe style).")]
DispatcherOpt = Annotated[str, typer.Option("--moe-dispatcher", help="MoE token dispatcher: alltoall (direct all-to-all) or deepep (node-forwarded: one network copy per destination node, then NVLink).")]
SoftwareOpt = Annotated[str | None, typer.Option("--software", help="Software preset (e.g. megatron-core-0.8, torchtitan-2025, nemo-24): its FSDP engine, FP8 recipe, kernel stack and fixed costs; see software/data/presets.json.")]
ProfileOpt = Annotated[str | None, typer.Option("--profile", help="System profile JSON from `distscope measure calibrate`: measured α/β replace the preset's links.")]
MaxMemoryOpt = Annotated[float | None, typer.Option("--max-memory", help="Cap on memory per GPU in GiB (default: the total the driver reports for the device).")]
HeadroomOpt = Annotated[float | None, typer.Option("--headroom", help="Fraction of per-GPU memory kept free for allocator fragmentation and runtime buffers (default 0.05).")]
FrameworkOpt = Annotated[str, typer.Option("--framework", help="Framework whose own memory behaviour to model: any (Megatron-LM accounting), megatron or torchtitan (FSDP2, its loss, its pipelining).")]
LinkOpt = Annotated[str | None, typer.Option("--link", help="Override level bandwidths in GB/s per GPU per direction, e.g. nvlink=300,ib=25.")]


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
        if out[name.strip()] <= 0:
            raise DistscopeError(f"--link={value!r}: bandwidth of {name.strip()} must be > 0")
    return out


@dataclasses.dataclass(frozen=True, kw_only=True)
class PlanFlags:
    """The less common plan options, as the CLI gives them (validated by Plan and the split rules)."""

    etp: int | None = None
    capacity_factor: float | None = None
    moe_a2a_overlap: bool = False
    moe_dispatcher: str = "alltoall"
    reshard_after_forward: bool = True
    first_stage_layers: int | None = None
    last_stage_layers: int | None = None


def split_for(spec: ModelSpec, pp: int, vp: int, stage_layers: str | None, flags: PlanFlags) -> tuple[int, ...]:
    """Layers per model chunk: --stage-layers, else Megatron's first/last-stage rule, else uniform when
    the layers divide, else Megatron's embedding/loss accounting (model.stages.balanced_chunks)."""
    from distscope.model.stages import balanced_chunks, first_last_chunks

    first, last = flags.first_stage_layers, flags.last_stage_layers
    for name, v in (("--pp", pp), ("--vp", vp)):  # checked here: the split is computed before Plan.check
        if v < 1:
            raise DistscopeError(f"{name}={v} must be >= 1")
    if stage_layers:
        if first is not None or last is not None:
            raise DistscopeError("--stage-layers and --first-stage-layers/--last-stage-layers exclude each other")
        return parse_int_list(stage_layers, "--stage-layers")
    if first is not None or last is not None:
        return first_last_chunks(spec.layers, pp, vp, first, last)
    return balanced_chunks(spec.layers, pp, vp)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Scenario:
    spec: ModelSpec
    shape: TrainingShape
    cluster: Cluster
    plan: Plan


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
    if spec.max_positions and seq > spec.max_positions:
        warn(f"--seq={seq} is beyond model {spec.name}'s context of {spec.max_positions} tokens "
             f"({seq / spec.max_positions:.0f}x); predicted as if it ran")


DEFAULT_SEQ = 4096


def default_seq(spec: ModelSpec) -> int:
    """The sequence length every command uses when --seq is not given: 4096, or the model's context if shorter."""
    return min(spec.max_positions or DEFAULT_SEQ, DEFAULT_SEQ)


def check_tp_domain(plan: Plan, cluster: Cluster) -> None:
    if plan.tp > cluster.gpus_per_node:
        warn(f"--tp={plan.tp} spans {plan.tp // cluster.gpus_per_node} nodes of {cluster.gpus_per_node} GPUs "
             f"({cluster.name}): tensor-parallel traffic crosses the {cluster.levels[-1].name} network every layer")


def build_cluster(cluster: str, gpus: int, link: str | None = None, profile: str | None = None,
                  max_memory: float | None = None, headroom: float | None = None) -> Cluster:
    c = get_cluster(cluster, gpus)
    links = parse_links(link)
    c = with_profile(c.with_bandwidths(links) if links else c, profile)
    return c.with_memory(max_memory, headroom) if max_memory is not None or headroom is not None else c


def build_scenario(*, model: str, cluster: str, gpus: int, dp: int | None, tp: int, pp: int, vp: int, cp: int,
                   ep: int, sequence_parallel: bool, zero: int, distributed_optimizer: bool, micro_batch: int,
                   global_batch: int, seq: int | None, recompute: str, recompute_layers: int, schedule: str | None,
                   precision: str, overlap: str, attention: str, stage_layers: str | None,
                   link: str | None, profile: str | None = None, max_memory: float | None = None,
                   headroom: float | None = None, flags: PlanFlags | None = None,
                   framework: str = "any") -> Scenario:
    flags = flags or PlanFlags()
    spec = get_model(model)
    seq = default_seq(spec) if seq is None else seq
    check_seq(spec, seq)
    c = build_cluster(cluster, gpus, link, profile, max_memory, headroom)
    shape = TrainingShape(seq_len=seq, global_batch=global_batch)
    sched = Schedule.INTERLEAVED if vp > 1 else Schedule.ONE_F_ONE_B
    if schedule is not None:
        sched = parse_enum(Schedule, schedule, "--schedule")  # type: ignore[assignment]
    fw: Framework = parse_enum(Framework, framework, "--framework")  # type: ignore[assignment]
    plan = Plan(
        dp=dp if dp is not None else derive_dp(gpus, tp, pp, cp), tp=tp, pp=pp, vp=vp, cp=cp, ep=ep,
        sequence_parallel=sequence_parallel, zero_stage=zero, distributed_optimizer=distributed_optimizer,
        micro_batch=micro_batch, recompute=parse_enum(Recompute, recompute, "--recompute"),  # type: ignore[arg-type]
        recompute_layers=recompute_layers, schedule=sched,
        precision=Precision.parse(precision, "--precision"), overlap=parse_overlap(overlap),
        attention=parse_enum(AttentionImpl, attention, "--attention"),  # type: ignore[arg-type]
        stage_layers=split_for(spec, pp, vp, stage_layers, flags),
        etp=flags.etp, capacity_factor=flags.capacity_factor, moe_a2a_overlap=flags.moe_a2a_overlap,
        moe_dispatcher=parse_enum(MoeDispatcher, flags.moe_dispatcher, "--moe-dispatcher"),  # type: ignore[arg-type]
        framework=fw,
        # torchtitan keeps FSDP parameters gathered across micro-batches under PP (its default policy)
        reshard_after_forward=flags.reshard_after_forward and not (fw is Framework.TORCHTITAN and zero == 3 and pp > 1),
    )
    plan.check(layers=spec.layers, heads=spec.heads, kv_heads=spec.kv_heads,
               experts=spec.moe.experts if spec.moe else 0, seq_len=seq, global_batch=global_batch, num_gpus=gpus)
    check_tp_domain(plan, c)
    return Scenario(spec=spec, shape=shape, cluster=c, plan=plan)
