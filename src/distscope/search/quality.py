"""Planner quality on published runs: is each published plan in the planner's feasible set, and is the
planner's best predicted no slower than it?

Per row of a published-runs CSV (validate/rows.py), the published plan is resolved like
`distscope validate` does (`auto` cells: the fastest feasible combination), and the planner searches
the row's GPU count, model, sequence length and global batch with the row's software capabilities:
its precision, its attention kernel, and the communication its framework can overlap. Everything
else (tp, pp, vp, cp, dp, sequence parallel, sharding, micro-batch, recompute, split) is the
planner's choice.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from distscope.errors import DistscopeError
from distscope.plan import Plan, Recompute
from distscope.search.planner import Candidate, search
from distscope.search.space import SearchSpace, Sharding, sharding_of, why_not_in_space
from distscope.validate.cluster_from_row import cluster_for
from distscope.validate.harness import predict_row
from distscope.validate.rows import Row, parse_row, read_rows
from distscope.workload.training import TrainingShape


@dataclasses.dataclass(frozen=True, kw_only=True)
class RowQuality:
    run_id: str
    published: Candidate | None
    best: Candidate | None
    not_in_space: str  # '' when the published plan is in the search space
    evaluated: int
    search_s: float
    error: str = ""

    @property
    def gain_pct(self) -> float | None:
        """Predicted speedup of the planner's best over the published plan, percent of step time."""
        if self.published is None or self.best is None:
            return None
        return 100.0 * (self.published.step_time_s - self.best.step_time_s) / self.published.step_time_s


def _around(d: int) -> tuple[int, ...]:
    """Half (when d is even), the same and twice the degree."""
    return ((d // 2,) if d % 2 == 0 else ()) + (d, 2 * d)


# What the software of a published run could do beyond its attention kernel and overlap (rows.py),
# by `framework`: context parallelism arrived in Megatron-Core 0.5 (2024); sequence parallelism and
# selective recompute in Megatron-LM 3.0 (Korthikanti et al. 2022); the distributed optimizer in
# 2022; Megatron-LM 2020 had no interleaved schedule. Anything not listed: every feature.
ERA_FEATURES: tuple[tuple[str, dict[str, object]], ...] = (
    ("megatron-lm (2020)", dict(cp=(1,), sequence_parallel=(False,), max_vp=1, shardings=(Sharding.DDP,),
                                selective_recompute=False)),
    ("ngc pytorch 20.12", dict(cp=(1,), sequence_parallel=(False,), max_vp=1, shardings=(Sharding.DDP,),
                               selective_recompute=False)),
    ("ptd-p", dict(cp=(1,), sequence_parallel=(False,), shardings=(Sharding.DDP,), selective_recompute=False)),
    ("deepspeed", dict(cp=(1,), sequence_parallel=(False,), selective_recompute=False)),
    ("megatron-lm", dict(cp=(1,), shardings=(Sharding.DDP,))),
)


def era_features(framework: str) -> dict[str, object]:
    fw = framework.lower()
    return next((dict(f) for key, f in ERA_FEATURES if key in fw), {})


def row_space(row: Row, published: Plan, *, framework: str = "", neighbourhood: bool = False,
              era: bool = False) -> SearchSpace:
    """The row's software capabilities (precision, attention, overlap); with `era` also only the
    features its framework had (ERA_FEATURES, widened by what the published plan itself used); with
    `neighbourhood` (the fast CI check) tp and pp limited to half, the same and twice the published
    degrees and cp, ep to the published ones."""
    extra: dict[str, object] = era_features(framework) if era else {}
    if "cp" in extra:
        extra["cp"] = tuple(sorted({1, published.cp}))
    if "sequence_parallel" in extra and published.sp:
        extra["sequence_parallel"] = (True, False)
    if "shardings" in extra:
        extra["shardings"] = tuple(dict.fromkeys([*extra["shardings"], sharding_of(published)]))  # type: ignore[misc]
    if "selective_recompute" in extra and published.recompute is Recompute.SELECTIVE:
        extra["selective_recompute"] = True
    if neighbourhood:
        extra.update(tp=_around(row.tp), pp=_around(row.pp), cp=(row.cp,), ep=(row.ep,))
    base: dict[str, object] = dict(max_micro_batch=max(16, published.micro_batch), max_vp=max(8, row.vp or 1),
                                   max_cp=max(16, row.cp), max_tp=max(row.gpus_per_node, row.tp))
    if "max_vp" in extra:
        extra["max_vp"] = max(int(extra["max_vp"]), row.vp or 1)  # type: ignore[call-overload]
    return SearchSpace(precision=row.precision, attention=row.attention, overlap=row.overlap_capable,
                       moe_dispatcher=row.moe_dispatcher, moe_balance=row.moe_balance, **{**base, **extra})  # type: ignore[arg-type]


def check_row(row: Row, *, framework: str = "", top_k: int = 3, neighbourhood: bool = False,
              era: bool = False) -> RowQuality:
    pub = predict_row(row)
    if pub.plan is None or pub.estimate is None or pub.error:
        return RowQuality(run_id=row.run_id, published=None, best=None, not_in_space="", evaluated=0, search_s=0.0,
                          error=pub.error or "no published plan")
    cluster = cluster_for(row.gpu, row.num_gpus, row.gpus_per_node, row.intra_node_GBps, row.inter_node_GBps_per_gpu)
    shape = TrainingShape(seq_len=row.seq_len, global_batch=row.global_batch)
    space = row_space(row, pub.plan, framework=framework, neighbourhood=neighbourhood, era=era)
    # kept beyond top_k: the search keeps candidates on their screened price (estimate's `screen`:
    # interleaved 1F1B by its closed form, a pipeline's ZeRO streams folded into its passes), and plans
    # within a few ppm of each other (MBRIDGE-H100-LLAMA3.1_405B: pp 8 x vp 8 and pp 16 x vp 5) can swap
    # places there
    res = search(row.spec, shape, cluster, space, top_k=top_k, keep=4 * top_k, repartition_top=top_k)
    return RowQuality(run_id=row.run_id, published=Candidate(pub.plan, pub.estimate), best=res.best,
                      not_in_space=why_not_in_space(space, row.spec, shape, cluster, pub.plan),
                      evaluated=res.evaluated, search_s=res.search_s)


def check_file(path: str | Path, *, neighbourhood: bool = False, era: bool = False) -> list[RowQuality]:
    out = []
    for line, raw in read_rows(path):
        try:
            row = parse_row(raw, line)
        except DistscopeError as exc:
            out.append(RowQuality(run_id=raw.get("run_id") or f"line{line}", published=None, best=None,
                                  not_in_space="", evaluated=0, search_s=0.0, error=str(exc)))
            continue
        out.append(check_row(row, framework=raw.get("framework") or "", neighbourhood=neighbourhood, era=era))
    return out
