"""`distscope validate`: predict every row of a published-runs CSV and compare with its measurement.

`auto` cells are resolved by the tool: every combination of the auto fields is estimated and the
fastest plan that fits in memory wins (micro-batch over the divisors of global_batch/dp up to
scenario.build.MAX_AUTO_MICRO_BATCH, vp over 1..MAX_AUTO_VP). Layers that do not divide by pp·vp are split as
Megatron does (first/last-stage columns, else its embedding/loss accounting: model.stages). A
malformed row is reported with its run_id and column; the others still run.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from distscope.errors import DistscopeError
from distscope.measure.profile import SystemProfile
from distscope.model import Estimate, estimate
from distscope.model.stages import balanced_chunks, first_last_chunks
from distscope.plan import SCHEDULE_TRAITS, Plan, Recompute, Schedule
from distscope.scenario.build import auto_micro_batches
from distscope.system.calibrated import apply_profile
from distscope.system.topology import Cluster
from distscope.validate.cluster_from_row import cluster_for
from distscope.validate.rows import Row, parse_row, read_rows
from distscope.workload.training import TrainingShape

MAX_AUTO_VP = 8  # as the planner's default --max-vp


@dataclasses.dataclass(frozen=True, kw_only=True)
class RowResult:
    run_id: str
    measured_step_time_s: float
    predicted_step_time_s: float | None = None
    plan: Plan | None = None
    estimate: Estimate | None = None
    error: str = ""
    source: str = ""
    # leave-one-source-out: predicted with parameters fitted without this row's source (validate --cv)
    cv_predicted_step_time_s: float | None = None

    @property
    def error_pct(self) -> float | None:
        if self.predicted_step_time_s is None:
            return None
        return 100.0 * (self.predicted_step_time_s - self.measured_step_time_s) / self.measured_step_time_s

    @property
    def cv_error_pct(self) -> float | None:
        if self.cv_predicted_step_time_s is None:
            return None
        return 100.0 * (self.cv_predicted_step_time_s - self.measured_step_time_s) / self.measured_step_time_s


def layouts(row: Row) -> Iterator[tuple[int, Schedule, tuple[int, ...]]]:
    """(vp, schedule, chunk sizes) the row allows: its vp, or with vp=auto every vp up to MAX_AUTO_VP
    the schedule and the split accept. An explicit vp whose split is invalid raises (one line)."""
    fixed = SCHEDULE_TRAITS[row.schedule].fixed_vp if row.schedule is not None else None
    if row.vp is not None:
        vps = [row.vp]
    elif row.pp == 1:
        vps = [1]
    elif fixed is not None:
        vps = [fixed]
    else:
        vps = [v for v in range(1 if row.schedule is None else 2, MAX_AUTO_VP + 1) if row.pp * v <= row.spec.layers + 2]
    for vp in vps:
        schedule = row.schedule or (Schedule.INTERLEAVED if vp > 1 else Schedule.ONE_F_ONE_B)
        if row.first_stage_layers is not None or row.last_stage_layers is not None:
            try:
                split = first_last_chunks(row.spec.layers, row.pp, vp, row.first_stage_layers, row.last_stage_layers)
            except DistscopeError:
                if row.vp is not None:
                    raise
                continue
        else:
            split = balanced_chunks(row.spec.layers, row.pp, vp)
        yield vp, schedule, split


def candidate_plans(row: Row) -> Iterator[Plan]:
    mbs = [row.micro_batch] if row.micro_batch is not None else auto_micro_batches(row.global_batch, row.dp)
    sps = [row.sequence_parallel] if row.sequence_parallel is not None else ([False, True] if row.tp > 1 else [False])
    dos = [row.distributed_optimizer] if row.distributed_optimizer is not None else [False, True]
    ovs = [row.overlap] if row.overlap is not None else [row.overlap_capable]
    for vp, schedule, split in layouts(row):
        if row.recompute is not None:
            rcs: list[tuple[Recompute, int]] = [(row.recompute, 0)]
        else:
            chunk = max(split) if split else row.spec.layers // (row.pp * vp)
            rcs = [(Recompute.NONE, 0), (Recompute.SELECTIVE, 0), (Recompute.FULL, 0)]
            rcs += [(Recompute.FULL, k) for k in range(1, chunk)]  # Megatron block recompute of k layers per chunk
        for mb, sp, do, ov, (rc, rk) in itertools.product(mbs, sps, dos, ovs, rcs):
            try:
                yield Plan(
                    dp=row.dp, tp=row.tp, pp=row.pp, vp=vp, cp=row.cp, ep=row.ep, sequence_parallel=bool(sp),
                    zero_stage=row.zero_stage, distributed_optimizer=bool(do), micro_batch=mb, recompute=rc,
                    recompute_layers=rk, schedule=schedule, precision=row.precision, overlap=ov,
                    attention=row.attention, stage_layers=split, reshard_after_forward=row.reshard_after_forward,
                    etp=row.etp, capacity_factor=row.capacity_factor, moe_dispatcher=row.moe_dispatcher,
                    moe_a2a_overlap=row.moe_a2a_overlap, moe_balance=row.moe_balance,
                )
            except DistscopeError:
                if row.vp is not None:
                    raise
                break  # this vp does not fit the schedule


def row_cluster(row: Row, profile: SystemProfile | None = None) -> Cluster:
    cluster = cluster_for(row.gpu, row.num_gpus, row.gpus_per_node, row.intra_node_GBps, row.inter_node_GBps_per_gpu)
    return apply_profile(cluster, profile) if profile is not None else cluster


def predict_row(row: Row, profile: SystemProfile | None = None) -> RowResult:
    cluster = row_cluster(row, profile)
    shape = TrainingShape(seq_len=row.seq_len, global_batch=row.global_batch)
    best: tuple[Estimate, Plan] | None = None
    fallback: tuple[Estimate, Plan] | None = None
    last_err = ""
    experts = row.spec.moe.experts if row.spec.moe else 0
    for plan in candidate_plans(row):
        try:
            plan.check(layers=row.spec.layers, heads=row.spec.heads, kv_heads=row.spec.kv_heads, experts=experts,
                       seq_len=row.seq_len, global_batch=row.global_batch, num_gpus=row.num_gpus,
                       gpus_per_node=row.gpus_per_node)
        except DistscopeError as exc:
            last_err = str(exc)
            continue
        est = estimate(row.spec, shape, cluster, plan, software=row.software)
        if est.feasible and (best is None or est.step_time_s < best[0].step_time_s):
            best = (est, plan)
        if fallback is None or est.memory.total_bytes < fallback[0].memory.total_bytes:
            fallback = (est, plan)
    if best is None:
        if fallback is None:
            return RowResult(run_id=row.run_id, measured_step_time_s=row.measured_step_time_s,
                             error=f"run_id={row.run_id}: no valid plan: {last_err}")
        est, plan = fallback
        return RowResult(run_id=row.run_id, measured_step_time_s=row.measured_step_time_s,
                         predicted_step_time_s=est.step_time_s, plan=plan, estimate=est,
                         error=f"run_id={row.run_id}: does not fit in memory ({est.infeasible_reason})")
    est, plan = best
    return RowResult(run_id=row.run_id, measured_step_time_s=row.measured_step_time_s,
                     predicted_step_time_s=est.step_time_s, plan=plan, estimate=est)


@dataclasses.dataclass(frozen=True, kw_only=True)
class LoadedRows:
    rows: list[tuple[Row, str]]  # parsed rows with their `source` cell
    failed: list[RowResult]  # rows that could not be parsed, with the reason
    order: list[tuple[bool, int]]  # file order: (parsed?, index into rows or failed)

    def in_file_order(self, results: Sequence[RowResult]) -> list[RowResult]:
        """`results` (one per parsed row) merged with the failed rows, in the order of the files."""
        return [results[i] if ok else self.failed[i] for ok, i in self.order]


def load_rows(paths: Sequence[str | Path]) -> LoadedRows:
    """Parse every row of every file; a malformed row becomes a failed RowResult with its reason."""
    rows: list[tuple[Row, str]] = []
    failed: list[RowResult] = []
    order: list[tuple[bool, int]] = []
    for path in paths:
        for line, raw in read_rows(path):
            source = (raw.get("source") or "").strip() or str(path)
            try:
                rows.append((parse_row(raw, line), source))
                order.append((True, len(rows) - 1))
            except DistscopeError as exc:
                order.append((False, len(failed)))
                try:
                    m = float(raw.get("measured_step_time_s") or "")
                except ValueError:
                    m = float("nan")
                failed.append(RowResult(run_id=(raw.get("run_id") or f"line{line}").strip(), measured_step_time_s=m,
                                        error=str(exc), source=source))
    return LoadedRows(rows=rows, failed=failed, order=order)


def predict_or_fail(row: Row, source: str, profile: SystemProfile | None = None) -> RowResult:
    try:
        return dataclasses.replace(predict_row(row, profile), source=source)
    except DistscopeError as exc:  # e.g. a GPU count the row's topology cannot hold
        return RowResult(run_id=row.run_id, measured_step_time_s=row.measured_step_time_s,
                         error=f"run_id={row.run_id}: {exc}", source=source)


def validate_files(paths: Sequence[str | Path], profile: SystemProfile | None = None,
                   on_row: Callable[[], None] | None = None) -> list[RowResult]:
    loaded = load_rows(paths)
    out = []
    for row, source in loaded.rows:
        out.append(predict_or_fail(row, source, profile))
        if on_row is not None:
            on_row()
    return loaded.in_file_order(out)


def validate_file(path: str | Path, profile: SystemProfile | None = None) -> list[RowResult]:
    return validate_files([path], profile)


def summary(results: list[RowResult], cv: bool = False) -> dict[str, Any]:
    errs = [abs(r.error_pct) for r in results if r.error_pct is not None]
    cv_errs = [abs(r.cv_error_pct) for r in results if r.cv_error_pct is not None]
    return {
        "rows": [
            {"run_id": r.run_id, "source": r.source, "predicted_step_time_s": r.predicted_step_time_s,
             "measured_step_time_s": r.measured_step_time_s, "error_pct": r.error_pct,
             **({"cv_predicted_step_time_s": r.cv_predicted_step_time_s, "cv_error_pct": r.cv_error_pct} if cv else {}),
             **({"problem": r.error} if r.error else {})}
            for r in results
        ],
        "mape_pct": sum(errs) / len(errs) if errs else None,
        "max_ape_pct": max(errs) if errs else None,
        **({"cv_mape_pct": sum(cv_errs) / len(cv_errs) if cv_errs else None,
            "cv_max_ape_pct": max(cv_errs) if cv_errs else None} if cv else {}),
        "predicted_rows": len(errs),
        "failed_rows": sum(1 for r in results if r.predicted_step_time_s is None),
    }
