"""Software profiles: what a training stack executes, as named presets with sources (data/presets.json).

A profile fixes what the parallelization alone does not: the attention kernel, which communication
the stack can overlap with compute, how its ZeRO-3/FSDP engine moves gradients, how it runs FP8
(Transformer Engine or torchao), and per-step fixed costs its published timings include. The
estimator reads it (`estimate(..., software=...)`); validation rows name one in an optional `software`
column, and their free-text `framework` column is only the fallback (`from_framework`).
"""

from __future__ import annotations

import dataclasses
import functools
import json
from importlib import resources
from typing import Any

from distscope.enums import Enum
from distscope.errors import DistscopeError, closest
from distscope.plan import AttentionImpl, Dim, Framework, Recompute


class KernelStack(Enum):
    """Who writes the kernels between the GEMMs and attention (norms, activations, rotary, casts)."""

    FUSED = "fused"  # Megatron/Transformer Engine hand-fused CUDA kernels (apex, TE LayerNormLinear, ...)
    PYTORCH = "pytorch"  # PyTorch-native modules: eager ops or torch.compile (Inductor/Triton) kernels


@dataclasses.dataclass(frozen=True, kw_only=True)
class PlanDefaults:
    """What the stack runs where a plan does not say (the `plan_defaults` of a preset, each with its source
    in the preset's `sources`). scenario/build.py applies them to every flag left out, in every verb."""

    zero_stage: int = 0
    distributed_optimizer: bool = True  # Megatron-Core's --use-distributed-optimizer (ZeRO-1)
    sequence_parallel: bool = True  # with tp > 1
    recompute: Recompute = Recompute.NONE
    framework: Framework = Framework.ANY

    def __post_init__(self) -> None:
        if self.zero_stage not in (0, 1, 2, 3):
            raise DistscopeError(f"plan_defaults.zero_stage={self.zero_stage} must be 0, 1, 2 or 3")


@dataclasses.dataclass(frozen=True, kw_only=True)
class SoftwareProfile:
    name: str
    attention: AttentionImpl  # the attention kernel the stack runs
    attention_sm100: AttentionImpl | None = None  # the kernel on data-centre Blackwell, where it differs
    overlap: frozenset[Dim]  # communication it can hide behind compute
    zero3_grad_reduce_overlap: bool = True  # ZeRO-3/FSDP gradient reduce-scatter overlapped with backward
    zero3_rail_aggregation: bool = True  # ZeRO-3 traffic reaches the node's aggregated NIC rate
    fp8_weight_cache: bool = True  # FP8 weights cast once per step (TE is_first_microbatch), else per micro-batch
    fp8_current_scaling: bool = False  # just-in-time per-tensor scaling (an amax pass per cast)
    fp8_param_gather: bool = False  # sharded weights all-gathered in FP8
    # sequence-parallel all-gathers of a layer's linear inputs (forward) and output gradients (backward)
    # move FP8, the reduce-scatters stay BF16 (torchao Float8ColwiseParallel / Float8RowwiseParallel)
    fp8_tp_all_gather: bool = False
    fp8_attention: bool = False  # attention in FP8 (TE fp8_dpa); otherwise BF16
    # Transformer Engine's parallel_cross_entropy (Megatron --cross-entropy-fusion-impl te): its forward
    # kernel writes the loss gradient into the logits in place and saves them, so the last stage holds
    # the activation-dtype logits alone, with no fp32 copy (model/framework_memory.py)
    fused_cross_entropy: bool = False
    step_overhead_s: float = 0.0  # per-step fixed cost the source's timing includes beyond the model
    kernels: KernelStack = KernelStack.FUSED  # priced at efficiency.PYTORCH_STACK when PYTORCH
    plan: PlanDefaults = PlanDefaults()  # the plan choices the stack makes when not told
    sources: str = ""

    def __post_init__(self) -> None:
        if not 0.0 <= self.step_overhead_s < float("inf"):
            raise DistscopeError(f"software {self.name}: step_overhead_s={self.step_overhead_s} must be >= 0")

    def attention_on(self, device_name: str) -> AttentionImpl:
        """The attention kernel the stack runs on this device: `attention_sm100` on data-centre Blackwell
        (kernel_data.is_sm100) where the preset names one, else `attention`."""
        from distscope.model.kernel_data import is_sm100  # the model package imports this one

        if self.attention_sm100 is not None and is_sm100(device_name):
            return self.attention_sm100
        return self.attention


# With no preset named: a current Megatron-Core-like stack (FlashAttention-2, DP/TP/PP overlap, the
# distributed optimizer, sequence parallelism with TP, no recompute: PlanDefaults' own defaults).
DEFAULT = SoftwareProfile(name="default", attention=AttentionImpl.FLASH, overlap=frozenset({Dim.DP, Dim.TP, Dim.PP}))


def _plan_defaults(d: dict[str, Any]) -> PlanDefaults:
    return PlanDefaults(
        zero_stage=int(d["zero_stage"]), distributed_optimizer=bool(d["distributed_optimizer"]),
        sequence_parallel=bool(d["sequence_parallel"]), recompute=Recompute(d["recompute"]),
        framework=Framework(d["framework"]))


def _profile(name: str, d: dict[str, Any]) -> SoftwareProfile:
    try:
        return SoftwareProfile(
            name=name, attention=AttentionImpl(d["attention"]), overlap=frozenset(Dim(x) for x in d["overlap"]),
            attention_sm100=AttentionImpl(d["attention_sm100"]) if "attention_sm100" in d else None,
            kernels=KernelStack(d.get("kernels", KernelStack.FUSED.value)), plan=_plan_defaults(d["plan_defaults"]),
            **{f.name: d[f.name] for f in dataclasses.fields(SoftwareProfile)
               if f.name not in ("name", "attention", "attention_sm100", "overlap", "kernels", "plan") and f.name in d},
        )
    except (KeyError, ValueError, TypeError) as exc:
        raise DistscopeError(f"software preset {name}: malformed ({exc})") from None


@functools.cache
def _data() -> tuple[dict[str, SoftwareProfile], tuple[tuple[str, str], ...], str]:
    raw = json.loads(resources.files("distscope.software").joinpath("data/presets.json").read_text())
    presets = {k: _profile(k, v) for k, v in raw["presets"].items()}
    patterns = tuple((str(p), str(n)) for p, n in raw["framework_patterns"])
    for _, n in patterns:
        assert n in presets, n
    return presets, patterns, str(raw["default"])


def software_names() -> list[str]:
    return list(_data()[0])


def get_software(name: str, field: str = "--software") -> SoftwareProfile:
    presets = _data()[0]
    key = name.strip().lower()
    if key not in presets:
        raise DistscopeError(f"{field}={name!r} is not a software preset{closest(key, presets) or ''}; "
                             f"presets: {', '.join(presets)}")
    return presets[key]


def from_framework(framework: str) -> SoftwareProfile:
    """The preset a free-text framework description falls back to (first matching pattern)."""
    presets, patterns, default = _data()
    fw = framework.lower()
    for pat, name in patterns:
        if pat in fw:
            return presets[name]
    return presets[default]
