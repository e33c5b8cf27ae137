"""A published plan given only its printed flags lands near its published time.

Each row of data/validation/published_runs.csv becomes the flags its source prints: degrees, batch,
sequence, precision, the schedule and stage split where stated, sequence parallelism and recompute
where stated, a ZeRO stage where the run used one, and its software stack (the row's preset). Nothing
else: micro-batch (where `auto`), distributed optimizer, overlap and attention kernel come from the
defaults every verb applies (scenario/build.py: the preset's plan defaults, `--micro-batch auto`).
The mean error must stay within 2 points of the validation harness's, which resolves every `auto`
cell by search (validate/harness.py; 4.7% when this test was written).
"""

from __future__ import annotations

import statistics

from distscope.model.estimate import estimate
from distscope.scenario import PlanFlags, plan_on
from distscope.validate.harness import predict_row, row_cluster
from distscope.validate.rows import Row, parse_row, read_rows
from distscope.workload.training import TrainingShape

TOLERANCE_POINTS = 2.0


def printed_flags(row: Row) -> PlanFlags:
    return PlanFlags(
        tp=row.tp, pp=row.pp, vp=row.vp or 1, cp=row.cp, ep=row.ep, dp=row.dp, micro_batch=row.micro_batch,
        sequence_parallel=row.sequence_parallel, zero=row.zero_stage or None,
        recompute=row.recompute.value if row.recompute is not None else None,
        schedule=row.schedule.value if row.schedule is not None else None, precision=row.precision.value,
        first_stage_layers=row.first_stage_layers, last_stage_layers=row.last_stage_layers, etp=row.etp,
        capacity_factor=row.capacity_factor, moe_dispatcher=row.moe_dispatcher.value, software=row.software.name)


def test_published_plans_from_their_printed_flags(validation_dir) -> None:  # type: ignore[no-untyped-def]
    printed, harness = [], []
    for line, raw in read_rows(validation_dir / "published_runs.csv"):
        row = parse_row(raw, line)
        shape = TrainingShape(seq_len=row.seq_len, global_batch=row.global_batch)
        cluster = row_cluster(row)
        plan = plan_on(printed_flags(row), row.spec, shape, cluster)
        est = estimate(row.spec, shape, cluster, plan, software=row.software)
        printed.append(abs(est.step_time_s - row.measured_step_time_s) / row.measured_step_time_s * 100)
        harness.append(abs(predict_row(row).error_pct or 0.0))
    assert len(printed) == 51
    mean_printed, mean_harness = statistics.mean(printed), statistics.mean(harness)
    assert mean_printed <= mean_harness + TOLERANCE_POINTS, (mean_printed, mean_harness)
