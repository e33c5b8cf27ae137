"""Ready-to-run output: a plan as Megatron-LM arguments and as a torchtitan recipe.

Megatron-LM flag names are those of megatron/training/arguments.py (Megatron-Core 0.12+):
parallel sizes, `--num-layers-per-virtual-pipeline-stage` for an even interleaved split and
`--pipeline-model-parallel-layout` (grammar: chunks separated by '|', E = embedding, t*N = N
transformer layers, L = final norm + LM head + loss; chunks dealt round-robin to the pp ranks) for
any other split; a hybrid of separate Mamba-2, attention and FFN blocks (Nemotron-H, Nemotron 3) runs
pretrain_hybrid.py, whose `--hybrid-layer-pattern` (the model's block order, '|' between pipeline segments)
replaces both and --num-layers; ZeRO-2/3 go through Megatron-FSDP (`--use-megatron-fsdp
--data-parallel-sharding-strategy optim_grads|optim_grads_params`).
Checked against the parser of the pinned Megatron-LM commit (megatron_check.py). Tensor or context
parallelism before Blackwell needs CUDA_DEVICE_MAX_CONNECTIONS=1, which the command sets.
torchtitan reads Python configuration now (a function returning Trainer.Config, picked with
MODULE/CONFIG); the recipe sets the fields of the pinned torchtitan commit's ParallelismConfig,
TrainingConfig and CompileConfig (torchtitan_check.py). Which plans each framework can run:
frameworks.py.
"""

from __future__ import annotations

import shlex

from distscope.dtypes import Precision
from distscope.model.stages import chunk_sizes
from distscope.plan import Dim, Framework, MoeBalance, MoeDispatcher, Plan, Recompute, Schedule
from distscope.workload.spec import ModelSpec
from distscope.workload.training import TrainingShape


def pipeline_layout(sizes: tuple[int, ...], mtp: int = 0) -> str:
    """Megatron's --pipeline-model-parallel-layout for explicit chunk sizes, e.g. 'Et*11|t*11|t*10L';
    `mtp` MTP layers ('m') go before the loss in the last chunk, as Megatron requires
    (pipeline_parallel_layer_layout.py: after every decoder layer, in the last virtual stage)."""
    chunks = [f"t*{n}" for n in sizes]
    chunks[0] = "E" + chunks[0]
    chunks[-1] = chunks[-1] + "m" * mtp + "L"
    return "|".join(chunks)


def megatron_script(spec: ModelSpec) -> str:
    """The Megatron-LM training script that runs `spec`: a hybrid of separate blocks is pretrain_hybrid.py's."""
    return "pretrain_hybrid.py" if spec.blocks != spec.layers else "pretrain_gpt.py"


def hybrid_layer_pattern(pattern: str, sizes: tuple[int, ...]) -> str:
    """Megatron's --hybrid-layer-pattern for a hybrid of separate blocks (LinearMixer.pattern) cut into pipeline
    segments ('|') of `sizes` FFN blocks ('-' or 'E') each, the chunks of the plan in Megatron's order (segment
    vp_stage * pp + pp_rank: hybrid_layer_allocation.select_pipeline_segment). A cut follows a chunk's last FFN
    block, so the mixers before an FFN block go with it; mixers after the last FFN block stay in the last
    segment. One chunk: the pattern uncut."""
    if sum(sizes) != sum(c in "-E" for c in pattern):
        raise ValueError(f"chunk sizes {sizes} do not cover the pattern's {sum(c in '-E' for c in pattern)} FFN blocks")
    out, left, k = [], list(sizes), 0
    for c in pattern:
        out.append(c)
        if c in "-E":
            k += 1
            if k == left[0] and len(left) > 1:
                out.append("|")
                left.pop(0)
                k = 0
    return "".join(out)


# Always explicit: Megatron's default --moe-token-dispatcher-type is allgather, which is neither of the
# dispatchers model/moe.py prices (and capacity factors and EP overlap need alltoall). DEEPEP is the flex
# dispatcher's DeepEP backend (MCore 0.12-0.14 spelled it --moe-enable-deepep).
_MOE_DISPATCHER_ARGS: dict[MoeDispatcher, list[str]] = {
    MoeDispatcher.ALLTOALL: ["--moe-token-dispatcher-type", "alltoall"],
    MoeDispatcher.DEEPEP: ["--moe-token-dispatcher-type", "flex", "--moe-flex-dispatcher-backend", "deepep"],
}
# the router's balancing (model/routing.py) as Megatron's arguments.py spells it: aux_loss at the
# coefficient model/routing.py's measured skew was taken at (α = 1e-3); expert bias (aux-loss-free)
# needs the sigmoid score function (transformer_config.py: "Expert bias for aux-loss-free routing only
# supports sigmoid score function")
_MOE_BALANCE_ARGS: dict[MoeBalance, list[str]] = {
    MoeBalance.FORCED: ["--moe-router-force-load-balancing"],
    MoeBalance.AUX_FREE: ["--moe-router-score-function", "sigmoid", "--moe-router-enable-expert-bias",
                          "--moe-router-load-balancing-type", "none"],
    MoeBalance.AUX_LOSS: ["--moe-router-load-balancing-type", "aux_loss", "--moe-aux-loss-coeff", "1e-3"],
}

# validate_args: "Currently GroupedGEMM for MoE only supports bf16 dtype" (asserts --bf16; FP8/FP4 run with --bf16)
_GROUPED_GEMM_PRECISIONS = frozenset(p for p in Precision if p is not Precision.FP16)
# megatron/core/enums.py Fp8Recipe / Fp4Recipe; transformer_config.py fp8 ('e4m3', 'hybrid'), fp4 ('e2m1')
_RECIPE_ARGS: dict[Precision, list[str]] = {
    Precision.FP8: ["--fp8-format", "hybrid"],  # the stack's default recipe
    Precision.FP8_DELAYED: ["--fp8-format", "hybrid", "--fp8-recipe", "delayed"],
    Precision.FP8_CURRENT: ["--fp8-format", "hybrid", "--fp8-recipe", "tensorwise"],
    Precision.FP8_BLOCKWISE: ["--fp8-format", "e4m3", "--fp8-recipe", "blockwise"],
    Precision.MXFP8: ["--fp8-format", "e4m3", "--fp8-recipe", "mxfp8"],
    Precision.NVFP4: ["--fp4-format", "e2m1", "--fp4-recipe", "nvfp4"],
}


def megatron_args(plan: Plan, spec: ModelSpec, shape: TrainingShape) -> list[str]:
    a: list[str] = [
        "--tensor-model-parallel-size", str(plan.tp),
        "--pipeline-model-parallel-size", str(plan.pp),
        "--context-parallel-size", str(plan.cp),
    ]
    if spec.moe is not None:
        a += ["--expert-model-parallel-size", str(plan.ep)]
        if plan.etp is not None:
            a += ["--expert-tensor-parallel-size", str(plan.etp)]
        a += _MOE_DISPATCHER_ARGS[plan.moe_dispatcher]
        if plan.precision in _GROUPED_GEMM_PRECISIONS:
            # the estimator prices the routed experts as one grouped GEMM per layer (model/layer.py);
            # without this flag Megatron runs a sequential loop of per-expert GEMMs
            a.append("--moe-grouped-gemm")
        if plan.capacity_factor is not None:
            a += ["--moe-expert-capacity-factor", str(plan.capacity_factor)]
        if plan.moe_a2a_overlap:
            a.append("--overlap-moe-expert-parallel-comm")
        if plan.moe_balance is not None:  # a plan that names no policy leaves the run's own
            a += _MOE_BALANCE_ARGS[plan.moe_balance]
    if spec.sparse_attention is not None and plan.cp > 1:  # DSAttention's only CP kind (dsa.py), the one priced
        a += ["--cp-comm-type", "allgather"]
    if spec.mtp_layers:
        a += ["--mtp-num-layers", str(spec.mtp_layers)]
    sizes = chunk_sizes(spec.layers, plan.pp, plan.vp, plan.stage_layers)
    hybrid = spec.linear_mixer.pattern if spec.linear_mixer is not None else ""
    if hybrid:  # the pattern sets the layers and the pipeline segments (VPP = segments / pp); no --num-layers
        a += ["--hybrid-layer-pattern", hybrid_layer_pattern(hybrid, sizes)]
    elif plan.pp > 1 and len(set(sizes)) > 1:
        a += ["--pipeline-model-parallel-layout", pipeline_layout(sizes, spec.mtp_layers)]
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
          "--seq-length", str(shape.seq_len), *(() if hybrid else ("--num-layers", str(spec.layers)))]
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
    if Dim.TP in plan.overlap and plan.tp > 1 and plan.sp and plan.zero_stage < 2:
        a.append("--tp-comm-overlap")  # Transformer Engine userbuffers; needs sequence parallel
    if plan.precision in _RECIPE_ARGS:
        a += ["--bf16", *_RECIPE_ARGS[plan.precision]]
    else:
        a.append(f"--{plan.precision.value}")
    return a


def megatron_env(plan: Plan, pre_blackwell: bool) -> dict[str, str]:
    """Environment Megatron-LM's validate_args asserts for this plan (see module docstring)."""
    if pre_blackwell and (plan.tp > 1 or plan.cp > 1) and plan.zero_stage < 2:
        return {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}
    return {}


def megatron_command(plan: Plan, spec: ModelSpec, shape: TrainingShape, pre_blackwell: bool = True) -> str:
    env = " ".join(f"{k}={v}" for k, v in megatron_env(plan, pre_blackwell).items())
    return (env + " " if env else "") + " ".join(shlex.quote(x) for x in megatron_args(plan, spec, shape))


_TITAN_SCHEDULE = {Schedule.GPIPE: "GPipe", Schedule.ONE_F_ONE_B: "1F1B", Schedule.INTERLEAVED: "Interleaved1F1B",
                   Schedule.ZB_V: "ZBVZeroBubble"}


def titan_model_parts(spec: ModelSpec, sizes: tuple[int, ...]) -> list[list[str]]:
    """torchtitan's module_fqns_per_model_part for chunk sizes: the embedding with the first chunk,
    the final norm and LM head with the last (module names of torchtitan's decoder models)."""
    parts, first = [], 0
    for n in sizes:
        parts.append([f"layers.{i}" for i in range(first, first + n)])
        first += n
    parts[0].insert(0, "tok_embeddings")
    parts[-1] += ["norm", "lm_head"]
    return parts


def torchtitan_recipe(plan: Plan, spec: ModelSpec, shape: TrainingShape, gpus_per_node: int) -> str:
    """A torchtitan recipe (a function returning Trainer.Config, torchtitan's current configuration
    format) that derives the model's shipped config and sets the plan. Call only for plans
    `frameworks.unsupported(TORCHTITAN, ...)` accepts."""
    from distscope.search.frameworks import TORCHTITAN_MODELS
    from distscope.search.torchtitan_check import pinned_commit

    module, base, plain_flavor = TORCHTITAN_MODELS[spec.name]
    shard = plan.zero_stage == 3
    m = plan.microbatches(shape.global_batch)
    ac = {Recompute.NONE: None, Recompute.SELECTIVE_OP: "SelectiveAC", Recompute.FULL: "FullAC"}[plan.recompute]
    lines = [
        f'"""distscope plan for torchtitan (config API of pytorch/torchtitan@{pinned_commit()[:8]}).',
        "",
        "Save as distscope_plan.py where torchtitan can import it, and on each node run:",
        f"    NGPU={gpus_per_node} MODULE=distscope_plan CONFIG=distscope_plan ./run_train.sh",
        '"""',
        "",
    ]
    if ac is not None:
        lines.append(f"from torchtitan.distributed.activation_checkpoint import {ac}")
    lines.append(f"from {module}.config_registry import {base}")
    if plain_flavor:
        lines.append(f"from {module} import model_registry")
    lines += ["", "", "def distscope_plan():", f"    config = {base}()"]
    if plain_flavor:
        lines += [f'    config.model_spec = model_registry("{plain_flavor}")  # see frameworks.TORCHTITAN_MODELS',
                  f'    config.hf_assets_path = "./assets/hf/Llama-3.1-{plain_flavor}"']
    set_: list[tuple[str, object]] = [
        ("training.max_context_length", shape.seq_len),
        ("training.num_tokens_per_microbatch_per_dp_rank", plan.micro_batch * shape.seq_len),
        ("training.num_tokens_per_train_step", shape.global_batch * shape.seq_len),
        ("parallelism.data_parallel_replicate_degree", 1 if shard else plan.dp),
        ("parallelism.data_parallel_shard_degree", plan.dp if shard else 1),
        *((("parallelism.fsdp_reshard_after_forward", "always" if plan.reshard_after_forward else "never"),)
          if shard else ()),
        ("parallelism.tensor_parallel_degree", plan.tp),
        ("parallelism.enable_sequence_parallel", plan.sp),
        ("parallelism.context_parallel_degree", plan.cp),
        ("parallelism.pipeline_parallel_degree", plan.pp),
    ]
    if spec.moe is not None:
        set_.append(("parallelism.expert_parallel_degree", plan.ep))
        if plan.moe_balance is MoeBalance.FORCED:
            set_.append(("debug.moe_force_load_balance", True))
    if plan.pp > 1:
        sizes = chunk_sizes(spec.layers, plan.pp, plan.vp, plan.stage_layers)
        set_ += [("parallelism.pipeline_parallel_schedule", _TITAN_SCHEDULE[plan.schedule]),
                 ("parallelism.num_pp_microbatches", m),
                 ("parallelism.module_fqns_per_model_part", titan_model_parts(spec, sizes)),
                 ("training.disable_cuda_graphs", True)]  # torchtitan: CUDA graphs do not support PP yet
    if Dim.TP in plan.overlap and plan.tp > 1:
        set_ += [("compile.enable", True), ("compile.components", ["model", "loss"]),
                 ("compile.enable_async_tensor_parallel", True)]  # async TP requires the compiled model
    lines += [f"    config.{k} = {v!r}" for k, v in set_]
    lines.append(f"    config.activation_checkpoint = {ac + '.Config()' if ac else 'None'}")
    lines += ["    return config", ""]
    return "\n".join(lines)


def estimate_command(plan: Plan, *, model: str, cluster: str, gpus: int, shape: TrainingShape,
                     software: str | None = None) -> str:
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
    if not plan.reshard_after_forward:
        a.append("--no-reshard-after-forward")
    if plan.etp is not None:
        a += ["--etp", str(plan.etp)]
    if plan.capacity_factor is not None:
        a += ["--capacity-factor", str(plan.capacity_factor)]
    if plan.moe_a2a_overlap:
        a.append("--moe-a2a-overlap")
    if plan.moe_dispatcher is not MoeDispatcher.ALLTOALL:
        a += ["--moe-dispatcher", plan.moe_dispatcher.value]
    if plan.moe_balance is not None:
        a += ["--moe-balance", plan.moe_balance.value]
    if plan.stage_layers:
        a += ["--stage-layers", ",".join(str(n) for n in plan.stage_layers)]
    if plan.framework is not Framework.ANY:
        a += ["--framework", plan.framework.value]
    if software is not None:
        a += ["--software", software]
    if plan.compressed:
        from distscope.search.compression import config_label

        a += ["--compress", config_label(plan.compression)]
    return " ".join(shlex.quote(x) for x in a)
