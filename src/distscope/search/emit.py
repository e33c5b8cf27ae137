"""Ready-to-run output: a plan as Megatron-LM arguments and as a torchtitan TOML fragment.

Megatron-LM flag names are those of megatron/training/arguments.py (Megatron-Core 0.12+):
parallel sizes, `--num-layers-per-virtual-pipeline-stage` for an even interleaved split and
`--pipeline-model-parallel-layout` (grammar: chunks separated by '|', E = embedding, t*N = N
transformer layers, L = final norm + LM head + loss; chunks dealt round-robin to the pp ranks) for
any other split; ZeRO-2/3 go through Megatron-FSDP (`--use-megatron-fsdp
--data-parallel-sharding-strategy optim_grads|optim_grads_params`).
torchtitan keys are those of torchtitan/config/job_config.py ([parallelism], [training],
[activation_checkpoint]); torchtitan has no ZeRO-1/2 (FSDP2 shards everything), so a DDP or
distributed-optimizer plan maps to replicate degree dp and ZeRO-2/3 to shard degree dp.
"""

from __future__ import annotations

import shlex

from distscope.dtypes import Precision
from distscope.model.stages import chunk_sizes
from distscope.plan import Dim, Plan, Recompute, Schedule
from distscope.workload.spec import ModelSpec
from distscope.workload.training import TrainingShape


def pipeline_layout(sizes: tuple[int, ...]) -> str:
    """Megatron's --pipeline-model-parallel-layout for explicit chunk sizes, e.g. 'Et*11|t*11|t*10L'."""
    chunks = [f"t*{n}" for n in sizes]
    chunks[0] = "E" + chunks[0]
    chunks[-1] = chunks[-1] + "L"
    return "|".join(chunks)


def megatron_args(plan: Plan, spec: ModelSpec, shape: TrainingShape) -> list[str]:
    a: list[str] = [
        "--tensor-model-parallel-size", str(plan.tp),
        "--pipeline-model-parallel-size", str(plan.pp),
        "--context-parallel-size", str(plan.cp),
    ]
    if spec.moe is not None:
        a += ["--expert-model-parallel-size", str(plan.ep)]
    sizes = chunk_sizes(spec.layers, plan.pp, plan.vp, plan.stage_layers)
    if plan.pp > 1 and len(set(sizes)) > 1:
        a += ["--pipeline-model-parallel-layout", pipeline_layout(sizes)]
    elif plan.vp > 1:
        a += ["--num-layers-per-virtual-pipeline-stage", str(sizes[0])]
    if plan.sp:
        a.append("--sequence-parallel")
    if plan.zero_stage >= 2:
        strategy = "optim_grads_params" if plan.zero_stage == 3 else "optim_grads"
        a += ["--use-megatron-fsdp", "--data-parallel-sharding-strategy", strategy, "--use-distributed-optimizer",
              "--no-gradient-accumulation-fusion", "--ckpt-format", "fsdp_dtensor"]
    elif plan.shards_optimizer:
        a.append("--use-distributed-optimizer")
    a += ["--micro-batch-size", str(plan.micro_batch), "--global-batch-size", str(shape.global_batch),
          "--seq-length", str(shape.seq_len), "--num-layers", str(spec.layers)]
    if plan.recompute is Recompute.SELECTIVE:
        a += ["--recompute-granularity", "selective"]
    elif plan.recompute is Recompute.FULL:
        if plan.recompute_layers:
            a += ["--recompute-granularity", "full", "--recompute-method", "block",
                  "--recompute-num-layers", str(plan.recompute_layers)]
        else:
            a += ["--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers", "1"]
    if Dim.DP in plan.overlap and plan.dp * plan.cp > 1:
        a.append("--overlap-grad-reduce")
        if plan.shards_optimizer:
            a.append("--overlap-param-gather")
    if Dim.TP in plan.overlap and plan.tp > 1 and plan.sp:
        a.append("--tp-comm-overlap")  # Transformer Engine userbuffers; needs sequence parallel
    if plan.precision is Precision.FP8:
        a += ["--bf16", "--fp8-format", "hybrid"]
    else:
        a.append(f"--{plan.precision.value}")
    return a


def megatron_command(plan: Plan, spec: ModelSpec, shape: TrainingShape) -> str:
    return " ".join(shlex.quote(x) for x in megatron_args(plan, spec, shape))


_TITAN_SCHEDULE = {Schedule.GPIPE: "GPipe", Schedule.ONE_F_ONE_B: "1F1B", Schedule.INTERLEAVED: "Interleaved1F1B"}


def torchtitan_toml(plan: Plan, spec: ModelSpec, shape: TrainingShape) -> str:
    shard = plan.zero_stage >= 2
    lines = [
        "[training]",
        f"local_batch_size = {shape.global_batch // plan.dp}",
        f"global_batch_size = {shape.global_batch}",
        f"seq_len = {shape.seq_len}",
        f'mixed_precision_param = "{"float16" if plan.precision is Precision.FP16 else "bfloat16"}"',
        "",
        "[parallelism]",
        f"data_parallel_replicate_degree = {1 if shard else plan.dp}",
        f"data_parallel_shard_degree = {plan.dp if shard else 1}",
        f"tensor_parallel_degree = {plan.tp}",
        f"context_parallel_degree = {plan.cp}",
        f"pipeline_parallel_degree = {plan.pp}",
    ]
    if spec.moe is not None:
        lines.append(f"expert_parallel_degree = {plan.ep}")
    if plan.pp > 1:
        sizes = chunk_sizes(spec.layers, plan.pp, plan.vp, plan.stage_layers)
        lines += [f'pipeline_parallel_schedule = "{_TITAN_SCHEDULE[plan.schedule]}"',
                  f"pipeline_parallel_microbatch_size = {plan.micro_batch}"]
        if len(set(sizes)) == 1:
            lines.append(f"pipeline_parallel_layers_per_stage = {sizes[0]}")
        else:
            lines.append(f"# uneven split, layers per virtual stage: {list(sizes)} (module_fqns_per_model_part)")
    if Dim.TP in plan.overlap and plan.tp > 1:
        lines.append("enable_async_tensor_parallel = true")
    mode = {Recompute.NONE: "none", Recompute.SELECTIVE: "selective", Recompute.FULL: "full"}[plan.recompute]
    lines += ["", "[activation_checkpoint]", f'mode = "{mode}"']
    if plan.recompute is Recompute.FULL and plan.recompute_layers:
        lines.append(f"# distscope recomputes {plan.recompute_layers} layers per chunk; torchtitan's full AC"
                     " recomputes all (selective_ac_option = \"<n>\" checkpoints every n-th layer)")
    if plan.precision is Precision.FP8:
        lines += ["", "[model]", 'converters = ["float8"]']
    return "\n".join(lines) + "\n"


def estimate_command(plan: Plan, *, model: str, cluster: str, gpus: int, shape: TrainingShape) -> str:
    """The `distscope estimate` invocation that reproduces a plan's prediction (explicit split included)."""
    a = ["distscope", "estimate", "--model", model, "--cluster", cluster, "--gpus", str(gpus),
         "--global-batch", str(shape.global_batch), "--seq", str(shape.seq_len),
         "--tp", str(plan.tp), "--pp", str(plan.pp), "--vp", str(plan.vp), "--cp", str(plan.cp), "--ep", str(plan.ep),
         "--dp", str(plan.dp), "--micro-batch", str(plan.micro_batch), "--zero", str(plan.zero_stage),
         "--distributed-optimizer" if plan.distributed_optimizer else "--no-distributed-optimizer",
         "--sequence-parallel" if plan.sequence_parallel else "--no-sequence-parallel",
         "--recompute", plan.recompute.value, "--recompute-layers", str(plan.recompute_layers),
         "--schedule", plan.schedule.value, "--precision", plan.precision.value, "--attention", plan.attention.value,
         "--overlap", ",".join(sorted(d.value for d in plan.overlap)) or "none"]
    if plan.stage_layers:
        a += ["--stage-layers", ",".join(str(n) for n in plan.stage_layers)]
    if plan.compressed:
        from distscope.search.compression import config_label

        a += ["--compress", config_label(plan.compression)]
    return " ".join(shlex.quote(x) for x in a)
