"""Which training frameworks can run a plan, and what each lacks.

A plan is framework-neutral; the emitters (emit.py) turn it into Megatron-LM arguments or a
torchtitan recipe. A plan one framework cannot run (or runs against its own documented advice) is
not offered for it: `unsupported` says why, and `restrict` narrows the planner's space so that
`distscope plan --framework X` searches only what X runs.

Megatron-LM (megatron/training/arguments.py validate_args, pinned in data/megatron_args.json):
- ZeRO-2/3 exist only as Megatron-FSDP, which asserts CUDA_DEVICE_MAX_CONNECTIONS != 1, while tensor
  or context parallelism on pre-Blackwell GPUs (compute capability < 10) needs it = 1; Megatron warns
  against combining them, so on those GPUs ZeRO-2/3 is offered only with tp = cp = 1.
- pipeline schedules: 1F1B and interleaved 1F1B only (no zero-bubble, DualPipe or 2BW schedule in
  the pinned parser); FSDP keeping parameters across micro-batches is not emitted.
torchtitan (pytorch/torchtitan, pinned in data/torchtitan_config.json):
- FSDP2 shards parameters, gradients and optimizer state together: ZeRO-3 (`data_parallel_shard_degree`)
  or plain replication (`data_parallel_replicate_degree`); no ZeRO-1/2 and no Megatron distributed optimizer;
- activation checkpointing is full (every block), per-op selective (recompute=selective-op), or none: no
  block recompute of k layers, no Megatron-style core-attention recompute;
- its memory differs from Megatron's (FSDP2, its loss, its pipeline runtime: model/framework_memory.py),
  so a plan is offered for the framework whose memory it was priced with (Plan.framework; ANY = neutral).
- pipeline schedules of torch.distributed.pipelining: GPipe, 1F1B, Interleaved1F1B, ZBVZeroBubble;
- model definitions exist for Llama 3/3.1 and DeepSeek-V3 among the catalog's models.
"""

from __future__ import annotations

import dataclasses

from distscope.plan import Framework, MoeBalance, MoeDispatcher, Plan, Recompute, Schedule
from distscope.search.space import SearchSpace, Sharding
from distscope.system.device import Device
from distscope.workload.spec import ModelSpec

# torchtitan config-registry functions that build each catalog model (torchtitan/models/*/config_registry.py),
# and the model_registry flavor to rebuild the model with when the shipped recipe turns on Float8
# (llama3_405b builds a Float8 converter, which also needs torchao at import), so 405B derives the
# 70B recipe and swaps in the 405B model: a BF16 plan runs BF16.
TORCHTITAN_MODELS: dict[str, tuple[str, str, str | None]] = {
    "llama3-8b": ("torchtitan.models.llama3", "llama3_8b", None),
    "llama3.1-8b": ("torchtitan.models.llama3", "llama3_8b", None),
    "llama3-70b": ("torchtitan.models.llama3", "llama3_70b", None),
    "llama3.1-70b": ("torchtitan.models.llama3", "llama3_70b", None),
    "llama3.1-405b": ("torchtitan.models.llama3", "llama3_70b", "405B"),
    "deepseek-v3": ("torchtitan.models.deepseek_v3", "deepseek_v3_671b", None),
}
MEGATRON_SCHEDULES = frozenset({Schedule.ONE_F_ONE_B, Schedule.INTERLEAVED})
TORCHTITAN_SCHEDULES = frozenset({Schedule.GPIPE, Schedule.ONE_F_ONE_B, Schedule.INTERLEAVED, Schedule.ZB_V})
_PRE_BLACKWELL = ("v100", "a100", "h100", "h200", "h800", "mi250x", "mi300x")


def pre_blackwell(device: Device) -> bool:
    return device.name.startswith(_PRE_BLACKWELL)


def unsupported(fw: Framework, plan: Plan, spec: ModelSpec, device: Device) -> list[str]:
    """Why `fw` cannot (or should not) run `plan`; [] when it can."""
    out: list[str] = []
    if fw is Framework.MEGATRON:
        if plan.zero_stage >= 2 and (plan.tp > 1 or plan.cp > 1) and pre_blackwell(device):
            out.append(f"ZeRO-{plan.zero_stage} is Megatron-FSDP, which Megatron warns against with tp={plan.tp} "
                       f"cp={plan.cp} on {device.name} (FSDP needs CUDA_DEVICE_MAX_CONNECTIONS > 1, TP/CP needs 1)")
        if plan.pp > 1 and plan.schedule not in MEGATRON_SCHEDULES:
            out.append(f"Megatron-LM has no {plan.schedule.value} pipeline schedule")
        if not plan.reshard_after_forward:
            out.append("distscope does not emit Megatron-FSDP with parameters kept across micro-batches")
        if plan.moe_a2a_overlap and (plan.recompute is Recompute.FULL or (plan.pp > 1 and plan.vp == 1)
                                     or plan.ep == 1):
            # megatron/core/transformer/transformer_config.py, overlap_moe_expert_parallel_comm checks
            out.append("Megatron's --overlap-moe-expert-parallel-comm needs ep > 1, no full recompute and, "
                       "with pp > 1, an interleaved schedule")
        if plan.moe_dispatcher is MoeDispatcher.DEEPEP and plan.capacity_factor is not None:
            out.append("Megatron's DeepEP dispatcher (--moe-token-dispatcher-type flex) is dropless: no capacity factor")
        if spec.compressed_attention is not None:
            # DSv4HybridSelfAttention, mHC and hash routing are on Megatron-LM's dev branch (Megatron Bridge's
            # DeepSeek-V4 README); the arguments distscope checks against are main's
            out.append("distscope does not emit DeepSeek-V4's attention and hyper-connection arguments (Megatron-LM's "
                       "dev branch only)")
        if spec.blocks != spec.layers:
            # Megatron's hybrid (pretrain_hybrid.py) counts blocks, one mixer or one FFN each, in its layers, its
            # pipeline segments and its recompute; distscope's layers are the FFN blocks (workload/spec.py), and
            # emit.hybrid_layer_pattern cuts the model's block order after a chunk's last FFN block
            assert spec.linear_mixer is not None
            if not spec.linear_mixer.pattern:
                out.append("distscope does not know this hybrid's block order (linear_mixer.pattern) for Megatron's "
                           "--hybrid-layer-pattern")
            if spec.mtp_layers:
                out.append("distscope does not emit a hybrid's MTP block pattern (--hybrid-layer-pattern '.../MTP')")
            if plan.recompute is Recompute.FULL and plan.recompute_layers:
                out.append(f"Megatron's block recompute of a hybrid counts its mixer and FFN blocks, not the "
                           f"{plan.recompute_layers} layers (FFN blocks) the plan recomputes per chunk")
            if plan.moe_a2a_overlap:  # combined 1F1B calls model.build_schedule_plan, which only GPTModel has
                out.append("Megatron's --overlap-moe-expert-parallel-comm needs GPTModel.build_schedule_plan; the hybrid "
                           "model has none (pipeline_parallel/combined_1f1b.py)")
    elif fw is Framework.TORCHTITAN:
        if spec.name not in TORCHTITAN_MODELS:
            out.append(f"torchtitan has no model definition for {spec.name}")
        if plan.zero_stage in (1, 2) or (plan.zero_stage == 0 and plan.distributed_optimizer):
            out.append("torchtitan has no ZeRO-1/2 or distributed optimizer (FSDP2 shards parameters too)")
        if plan.precision.low_precision:
            out.append(f"{plan.precision.value} in torchtitan is a model converter "
                       "(torchtitan/components/quantization/) that distscope does not emit")
        if plan.recompute is Recompute.FULL and plan.recompute_layers:
            out.append(f"torchtitan cannot recompute only {plan.recompute_layers} layers per chunk (full AC "
                       "recomputes every block)")
        if plan.pp > 1 and plan.schedule not in TORCHTITAN_SCHEDULES:
            out.append(f"torchtitan (torch.distributed.pipelining) has no {plan.schedule.value} schedule")
        if (plan.etp not in (None, plan.tp) or plan.capacity_factor is not None or plan.moe_a2a_overlap
                or plan.moe_dispatcher is not MoeDispatcher.ALLTOALL
                or plan.moe_balance not in (None, MoeBalance.FORCED)):
            out.append("distscope does not emit torchtitan's expert tensor parallelism, capacity factor, "
                       "all-to-all overlap, DeepEP dispatcher or router balancing (only the forced balance)")
        if plan.recompute is Recompute.SELECTIVE:
            out.append("torchtitan's selective AC is per-op (recompute=selective-op), not Megatron's core-attention "
                       "recompute")
    if fw is Framework.MEGATRON and plan.recompute is Recompute.SELECTIVE_OP:
        out.append("Megatron-LM has no per-op selective checkpointing (recompute=selective-op is torchtitan's)")
    if fw is not Framework.ANY and plan.framework not in (Framework.ANY, fw):
        out.append(f"the plan's memory is {plan.framework.value}'s (model/framework_memory.py), not {fw.value}'s")
    return out


def restrict(fw: Framework, space: SearchSpace, device: Device) -> SearchSpace:
    """The planner's space narrowed to what `fw` runs (model support is checked by the caller)."""
    if fw is Framework.TORCHTITAN:
        return dataclasses.replace(space, shardings=(Sharding.DDP, Sharding.ZERO3), block_recompute=False,
                                   selective_recompute=False, framework=fw,
                                   schedules=_only(space.schedules, TORCHTITAN_SCHEDULES, "torchtitan"))
    if fw is Framework.MEGATRON:
        return dataclasses.replace(space, sharded_dp_needs_plain_layout=pre_blackwell(device), framework=fw,
                                   schedules=_only(space.schedules, MEGATRON_SCHEDULES, "megatron"))
    return space


def _only(schedules: tuple[Schedule, ...], runs: frozenset[Schedule], name: str) -> tuple[Schedule, ...]:
    from distscope.errors import DistscopeError

    kept = tuple(x for x in schedules if x in runs)
    if not kept:
        raise DistscopeError(f"--framework={name} runs none of --schedules={','.join(x.value for x in schedules)}; "
                             f"it runs {', '.join(sorted(x.value for x in runs))} (or use --framework any)")
    return kept


def allowed(fw: Framework, plan: Plan, spec: ModelSpec, device: Device) -> bool:
    return fw is Framework.ANY or not unsupported(fw, plan, spec, device)
