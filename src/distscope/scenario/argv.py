"""A plan back to the flags that reproduce it: the inverse of scenario/build.py.

`plan_flags(plan)` states every stack-dependent choice explicitly, so the printed command gives the same
Plan whatever the defaults; `to_argv` writes each field that differs from its family's default with the
option names of scenario/flags.py. `build_plan(plan_flags(p), ...) == p` is tested over random plans.
"""

from __future__ import annotations

import dataclasses
import shlex
from typing import Any

from distscope.plan import Plan
from distscope.scenario.flags import PlanFlags, SystemFlags, WorkloadFlags


def plan_flags(plan: Plan, *, software: str | None = None) -> PlanFlags:
    from distscope.search.compression import config_label

    return PlanFlags(
        dp=plan.dp, tp=plan.tp, pp=plan.pp, vp=plan.vp, cp=plan.cp, ep=plan.ep,
        sequence_parallel=plan.sequence_parallel if plan.tp > 1 else None, zero=plan.zero_stage,
        distributed_optimizer=plan.distributed_optimizer, micro_batch=plan.micro_batch,
        recompute=plan.recompute.value, recompute_layers=plan.recompute_layers, schedule=plan.schedule.value,
        precision=plan.precision.value, overlap=",".join(sorted(d.value for d in plan.overlap)) or "none",
        attention=plan.attention.value,
        stage_layers=",".join(str(n) for n in plan.stage_layers) if plan.stage_layers else None,
        reshard_after_forward=plan.reshard_after_forward if plan.zero_stage == 3 else None, etp=plan.etp, capacity_factor=plan.capacity_factor,
        moe_a2a_overlap=plan.moe_a2a_overlap,
        moe_dispatcher=plan.moe_dispatcher.value,
        moe_balance=plan.moe_balance.value if plan.moe_balance is not None else None,
        compress=config_label(plan.compression) if plan.compressed else None,
        framework=plan.framework.value, software=software,
    )


def _words(instance: Any) -> list[str]:
    base = type(instance)()
    out: list[str] = []
    for f in dataclasses.fields(instance):
        value = getattr(instance, f.name)
        if value == getattr(base, f.name) or value is None:
            continue
        decl = f.metadata["decls"][0]
        if "/" in decl:  # a --x/--no-x pair
            on, off = decl.split("/")
            out.append(on if value else off)
        else:
            out += [decl, str(value)]
    return out


def to_argv(*instances: Any) -> list[str]:
    """Option words for the family instances (defaults left out)."""
    return [w for inst in instances for w in _words(inst)]


def command(verb: str, workload: WorkloadFlags, system: SystemFlags, plan: PlanFlags) -> str:
    """`distscope VERB ...` for the flags, shell-quoted. Workload and system fields are always written."""
    always = ["--model", workload.model, "--cluster", system.cluster, "--gpus", str(system.gpus),
              "--global-batch", str(workload.global_batch)]
    if workload.seq is not None:
        always += ["--seq", str(workload.seq)]
    if workload.mtp_layers is not None:
        always += ["--mtp-layers", str(workload.mtp_layers)]
    rest = to_argv(dataclasses.replace(system, cluster=SystemFlags().cluster, gpus=SystemFlags().gpus), plan)
    return " ".join(shlex.quote(x) for x in ["distscope", *verb.split(), *always, *rest])
