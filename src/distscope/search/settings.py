"""The planner's search space from its settings: one rule for `distscope plan` and every `explore` point.

Attention kernel and overlap default to the software stack's (the named --software preset's, else
software.presets.DEFAULT's); a named preset also caps the overlap to what it can hide. The framework
whose limits apply defaults to the preset's framework, and to Megatron-LM when none is named
(search/frameworks.py `restrict`).
"""

from __future__ import annotations

import dataclasses

from distscope.dtypes import Precision
from distscope.errors import DistscopeError
from distscope.plan import AttentionImpl, Dim, Framework, MoeBalance, MoeDispatcher
from distscope.search.frameworks import TORCHTITAN_MODELS, restrict
from distscope.search.space import SearchSpace
from distscope.software.presets import DEFAULT, SoftwareProfile
from distscope.system.device import Device
from distscope.workload.spec import ModelSpec

PLANNER_FRAMEWORK = Framework.MEGATRON  # with no --software and no --framework: plans Megatron-LM runs


def planner_framework(framework: Framework | None, software: SoftwareProfile | None) -> Framework:
    if framework is not None:
        return framework
    if software is not None and software.plan.framework is not Framework.ANY:
        return software.plan.framework
    return PLANNER_FRAMEWORK


def planner_space(*, spec: ModelSpec, device: Device, precision: Precision, software: SoftwareProfile | None,
                  framework: Framework | None = None, attention: AttentionImpl | None = None,
                  overlap: frozenset[Dim] | None = None, moe_dispatcher: MoeDispatcher = MoeDispatcher.ALLTOALL,
                  moe_balance: MoeBalance | None = None, limits: SearchSpace | None = None) -> SearchSpace:
    """The space (module doc). `limits`: a space carrying the degree restrictions and maxima to keep."""
    device.check_precision(precision)
    sw = software or DEFAULT
    space = dataclasses.replace(
        limits or SearchSpace(), precision=precision, attention=attention or sw.attention_on(device.name),
        overlap=(sw.overlap if overlap is None else overlap) & sw.overlap if software is not None
        else (sw.overlap if overlap is None else overlap),
        moe_dispatcher=moe_dispatcher, moe_balance=moe_balance, software=software)
    fw = planner_framework(framework, software)
    if fw is Framework.TORCHTITAN and spec.name not in TORCHTITAN_MODELS:
        raise DistscopeError(f"--framework=torchtitan: torchtitan has no model definition for {spec.name}; "
                             f"it has {', '.join(sorted(TORCHTITAN_MODELS))}")
    return restrict(fw, space, device)


def auto_precisions(device: Device) -> list[Precision]:
    """What `plan --precision auto` searches: BF16 and each low-precision GEMM rate the device has, in
    the recipe its stack runs there (per-tensor FP8 of the stack; MXFP8 and NVFP4 where the tensor cores
    run block-scaled formats). The explicit recipes (fp8-delayed, fp8-cs, fp8-blockwise) are searched
    only when named: they price the same GEMMs with different cast traffic."""
    return [p for p in (Precision.BF16, Precision.FP8, Precision.MXFP8, Precision.NVFP4) if device.supports(p)]

