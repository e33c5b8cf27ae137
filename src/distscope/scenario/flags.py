"""The flags every training verb takes, as three typed families (workload, system, plan), each field's
default and help defined once, here.

A field whose default is None is resolved later (scenario/build.py): a plan default that depends on the
software stack (ZeRO stage, distributed optimizer, sequence parallelism, recompute, overlap, attention
kernel) comes from the named `--software` preset, or from the default preset when none is named
(software/data/presets.json, `plan_defaults`). CLI metadata (option names, help, help panel) sits on
each field so the typer options (scenario/options.py) and the printed commands that reproduce a plan
(scenario/argv.py) come from the same definition.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from distscope.model.host import OP_S
from distscope.software.presets import DEFAULT

WORKLOAD, SYSTEM, PLAN = "Workload", "System", "Plan"


def flag(default: Any, *decls: str, help: str) -> Any:
    """A field with its CLI option names and help text (the panel is its family's)."""
    return dataclasses.field(default=default, metadata={"decls": decls, "help": help})


@dataclasses.dataclass(frozen=True, kw_only=True)
class WorkloadFlags:
    model: str = flag("llama3-8b", "--model", "-m",
                      help="Catalog key (see `distscope models`) or a Hugging Face config.json path.")
    seq: int | None = flag(None, "--seq", help="Sequence length in tokens (default: 4096, or the model's context if shorter).")
    global_batch: int = flag(128, "--global-batch", help="Sequences per optimizer step.")
    input: str | None = flag(None, "--input", help="With --model torch:FILE.py:FACTORY (or torchvision:NAME, timm:NAME): "
                             "the sample input, name:shape:dtype[:layout], e.g. x:8x3x224x224:bf16 (leading dim: the "
                             "per-GPU micro-batch; layout channels_last, the default, or nchw).")
    mtp_layers: int | None = flag(None, "--mtp-layers", help="Multi-token prediction modules (DeepSeek-V3 trains "
                                  "with 1; default: the model's own, 0 for catalog models).")


@dataclasses.dataclass(frozen=True, kw_only=True)
class SystemFlags:
    cluster: str = flag("dgx-h100", "--cluster", "-c", help="Cluster preset (see `distscope clusters`).")
    gpus: int = flag(8, "--gpus", "-n", help="Total GPUs; the preset is scaled to this count.")
    link: str | None = flag(None, "--link", help="Override level bandwidths in GB/s per GPU per direction, e.g. nvlink=300,ib=25.")
    profile: str | None = flag(None, "--profile", help="System profile JSON from `distscope measure calibrate`: "
                               "measured α/β replace the preset's links.")
    max_memory: float | None = flag(None, "--max-memory", help="Cap on memory per GPU in GiB (default: the total the "
                                    "driver reports for the device).")
    headroom: float | None = flag(None, "--headroom", help="Fraction of per-GPU memory kept free for allocator "
                                  "fragmentation and runtime buffers (default 0.05).")
    host_op_us: float | None = flag(None, "--host-op-us", help="Host microseconds to issue one eager op, for the "
                                    f"host floor of eager steps (default {OP_S * 1e6:.0f}: a bare op loop's; model code adds its "
                                    "own: eager diffusers UNets measured 38-67 on H100 and H200 hosts).")


_D = DEFAULT.plan


def stack_default(none_named: str) -> str:
    """Help text for a choice whose default is the software stack's."""
    return f"default: the --software preset's; none named: {none_named}"


@dataclasses.dataclass(frozen=True, kw_only=True)
class PlanFlags:
    dp: int | None = flag(None, "--dp", help="Data-parallel degree (default: gpus / (tp*pp*cp)).")
    tp: int = flag(1, "--tp", help="Tensor-parallel degree.")
    pp: int = flag(1, "--pp", help="Pipeline-parallel degree.")
    vp: int = flag(1, "--vp", help="Virtual pipeline chunks per stage (interleaving).")
    cp: int = flag(1, "--cp", help="Context-parallel degree.")
    ep: int = flag(1, "--ep", help="Expert-parallel degree (MoE models).")
    sequence_parallel: bool | None = flag(None, "--sequence-parallel/--no-sequence-parallel",
                                          help=f"Megatron sequence parallelism, with tp > 1 "
                                               f"({stack_default('on' if _D.sequence_parallel else 'off')}).")
    zero: int | None = flag(None, "--zero", help=f"ZeRO stage 0-3 (3 = FSDP full shard; {stack_default(str(_D.zero_stage))}).")
    distributed_optimizer: bool | None = flag(
        None, "--distributed-optimizer/--no-distributed-optimizer",
        help=f"Megatron distributed optimizer: optimizer state sharded over DP, gradients reduce-scattered once per "
             f"step ({stack_default('on with --zero 0' if _D.distributed_optimizer else 'off')}).")
    micro_batch: int | None = flag(None, "--micro-batch", help="Sequences per micro-batch (default: auto, the fastest "
                                   "of the divisors of global-batch/dp up to 16 that fits in memory, as users tune it).")
    recompute: str | None = flag(None, "--recompute", help="Activation recompute: none, selective (Megatron: core "
                                 f"attention), selective-op (torchtitan: per-op) or full ({stack_default(_D.recompute.value)}).")
    recompute_layers: int = flag(0, "--recompute-layers", help="With --recompute full: layers per chunk recomputed (0 = all).")
    schedule: str | None = flag(None, "--schedule", help="gpipe, 1f1b, interleaved-1f1b, zb-h1, zb-v (vp=2), dualpipe "
                                "or 2bw (default: interleaved-1f1b when vp > 1, else 1f1b).")
    precision: str = flag("bf16", "--precision", help="fp16, bf16, or a low-precision GEMM recipe with bf16 "
                          "elsewhere: fp8 (the stack's per-tensor recipe), fp8-delayed, fp8-cs, fp8-blockwise "
                          "(DeepSeek-V3 1x128/128x128), mxfp8 or nvfp4 (Blackwell); `plan` also takes auto (bf16 and each "
                          "low-precision rate the device has).")
    overlap: str | None = flag(None, "--overlap", help="Communication overlapped with compute: comma list of dp,tp,pp, "
                               f"or none ({stack_default(','.join(sorted(d.value for d in DEFAULT.overlap)))}).")
    attention: str | None = flag(None, "--attention", help="Attention kernel: flash (FlashAttention-2), cudnn (TE/cuDNN "
                                 f"fused), fa3 (FlashAttention-3) or unfused ({stack_default(DEFAULT.attention.value)}).")
    stage_layers: str | None = flag(None, "--stage-layers", help="Explicit layers per pipeline chunk, comma list of pp*vp numbers.")
    first_stage_layers: int | None = flag(None, "--first-stage-layers", help="Layers on the first pipeline rank "
                                          "(Megatron --decoder-first-pipeline-num-layers).")
    last_stage_layers: int | None = flag(None, "--last-stage-layers", help="Layers on the last pipeline rank "
                                         "(Megatron --decoder-last-pipeline-num-layers).")
    reshard_after_forward: bool | None = flag(
        None, "--reshard-after-forward/--no-reshard-after-forward",
        help="With --zero 3: free gathered parameters after each forward, or keep them across micro-batches "
             "(default: free them, except torchtitan under pipeline parallelism, which keeps them).")
    etp: int | None = flag(None, "--etp", help="Expert tensor-parallel degree for MoE layers (default: tp).")
    capacity_factor: float | None = flag(None, "--capacity-factor", help="MoE expert capacity factor; tokens beyond it "
                                         "are dropped (default: dropless).")
    moe_a2a_overlap: bool = flag(False, "--moe-a2a-overlap/--no-moe-a2a-overlap", help="Overlap MoE all-to-all with "
                                 "another micro-batch's compute (DeepSeek-V3 DualPipe style).")
    moe_dispatcher: str = flag("alltoall", "--moe-dispatcher", help="MoE token dispatcher: alltoall (direct all-to-all) "
                               "or deepep (node-forwarded: one network copy per destination node, then NVLink).")
    moe_balance: str | None = flag(None, "--moe-balance", help="MoE router load balancing: forced (benchmark "
                                   "switch, uniform random routing), aux-free (expert bias) or aux-loss; prices the "
                                   "busiest expert-parallel rank (default: aux-free).")
    compress: str | None = flag(None, "--compress", help="Quantized communication per class, e.g. "
                                "dp-grad=int4-hs,weights=int4-diff,tp=fp8 (default: none); for --model dlrm:..., the "
                                "embedding all-to-all's error-bounded codec, emb=sz3:0.01 (measured entries), or "
                                "auto with `plan` (search them).")
    framework: str | None = flag(None, "--framework", help="Framework whose own memory behaviour to model: any "
                                 "(Megatron-LM accounting), megatron or torchtitan (FSDP2, its loss, its pipelining) "
                                 "(default: the --software preset's framework, else any).")
    sharding: str | None = flag(None, "--sharding", help="With --model dlrm:...: the embedding sharding, TorchRec's "
                                "types: table_wise, column_wise, row_wise, table_row_wise or data_parallel for every "
                                "table, a file from `plan --write-sharding`, or HugeCTR's multi-node plan "
                                "hugectr:hier_auto[:mem_comm_bw_ratio=67:dp_sharding_threshold=0.0125] (estimate; "
                                "default: the planner's choice); for `plan`, a comma list of the types it may use.")
    software: str | None = flag(None, "--software", help="Software preset (e.g. megatron-core-0.8, torchtitan-2025, "
                                "nemo-24): its plan defaults, FSDP engine, FP8 recipe, kernel stack and fixed costs "
                                "(software/data/presets.json).")


def first_set_flag(flags: Any, allowed: tuple[str, ...] = ()) -> tuple[str, Any] | None:
    """(option name, value) of the first field of a flag family that differs from its default and is not
    in `allowed`: what a verb's special path (torch modules, recommendation models) refuses in one line."""
    default = type(flags)()
    for f in dataclasses.fields(flags):
        value = getattr(flags, f.name)
        if f.name not in allowed and value != getattr(default, f.name):
            return f.metadata["decls"][0].split("/")[0], value
    return None


# The workload the planning verbs (plan, explore) run on when none is given: the README's main job.
PLANNER_WORKLOAD = WorkloadFlags(model="llama3-70b")
PLANNER_SYSTEM = SystemFlags(gpus=64)
