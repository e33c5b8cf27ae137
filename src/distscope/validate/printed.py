"""A published run given only the flags its source prints, through the defaults every verb applies.

The flags are the row's degrees, micro-batch where stated, sequence parallelism and recompute where
stated, a ZeRO stage where the run used one, schedule and stage split where stated, MoE layout,
precision and the row's software preset. Everything else (micro-batch `auto`, distributed optimizer,
overlap, attention kernel, framework) comes from scenario/build.py's defaults, as for a user who types
those flags. `distscope validate` resolves `auto` cells by search instead (harness.py); comparing the
two says whether the defaults are what users run.
"""

from __future__ import annotations

from distscope.model.estimate import estimate
from distscope.scenario import PlanFlags, plan_on
from distscope.validate.harness import row_cluster
from distscope.validate.rows import Row
from distscope.workload.training import TrainingShape


def printed_flags(row: Row) -> PlanFlags:
    return PlanFlags(
        tp=row.tp, pp=row.pp, vp=row.vp or 1, cp=row.cp, ep=row.ep, dp=row.dp, micro_batch=row.micro_batch,
        sequence_parallel=row.sequence_parallel, zero=row.zero_stage or None,
        recompute=row.recompute.value if row.recompute is not None else None,
        schedule=row.schedule.value if row.schedule is not None else None, precision=row.precision.value,
        first_stage_layers=row.first_stage_layers, last_stage_layers=row.last_stage_layers, etp=row.etp,
        capacity_factor=row.capacity_factor, moe_dispatcher=row.moe_dispatcher.value, software=row.software.name)


def printed_error_pct(row: Row) -> float:
    """Signed error (percent) of the estimate of the row's printed flags against its measured step."""
    shape = TrainingShape(seq_len=row.seq_len, global_batch=row.global_batch)
    cluster = row_cluster(row)
    plan = plan_on(printed_flags(row), row.spec, shape, cluster)
    est = estimate(row.spec, shape, cluster, plan, software=row.software)
    return 100.0 * (est.step_time_s - row.measured_step_time_s) / row.measured_step_time_s
