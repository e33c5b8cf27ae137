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
from distscope.search.planner import Candidate, search
from distscope.search.space import SearchSpace, why_not_in_space
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


def row_space(row: Row, micro_batch: int, *, neighbourhood: bool = False) -> SearchSpace:
    """The row's software capabilities; with `neighbourhood` (the fast CI check) tp and pp are limited
    to half, the same and twice the published degrees and cp, ep to the published ones."""
    narrow = dict(tp=_around(row.tp), pp=_around(row.pp), cp=(row.cp,), ep=(row.ep,)) if neighbourhood else {}
    return SearchSpace(precision=row.precision, attention=row.attention, overlap=row.overlap_capable,
                       max_micro_batch=max(16, micro_batch), max_vp=max(8, row.vp), max_cp=max(16, row.cp),
                       max_tp=max(row.gpus_per_node, row.tp), **narrow)  # type: ignore[arg-type]


def check_row(row: Row, *, top_k: int = 3, neighbourhood: bool = False) -> RowQuality:
    pub = predict_row(row)
    if pub.plan is None or pub.estimate is None or pub.error:
        return RowQuality(run_id=row.run_id, published=None, best=None, not_in_space="", evaluated=0, search_s=0.0,
                          error=pub.error or "no published plan")
    cluster = cluster_for(row.gpu, row.num_gpus, row.gpus_per_node, row.intra_node_GBps, row.inter_node_GBps_per_gpu)
    shape = TrainingShape(seq_len=row.seq_len, global_batch=row.global_batch)
    space = row_space(row, pub.plan.micro_batch, neighbourhood=neighbourhood)
    res = search(row.spec, shape, cluster, space, top_k=top_k, keep=top_k, repartition_top=top_k)
    return RowQuality(run_id=row.run_id, published=Candidate(pub.plan, pub.estimate), best=res.best,
                      not_in_space=why_not_in_space(space, row.spec, shape, cluster, pub.plan),
                      evaluated=res.evaluated, search_s=res.search_s)


def check_file(path: str | Path, *, neighbourhood: bool = False) -> list[RowQuality]:
    out = []
    for line, raw in read_rows(path):
        try:
            row = parse_row(raw, line)
        except DistscopeError as exc:
            out.append(RowQuality(run_id=raw.get("run_id") or f"line{line}", published=None, best=None,
                                  not_in_space="", evaluated=0, search_s=0.0, error=str(exc)))
            continue
        out.append(check_row(row, neighbourhood=neighbourhood))
    return out
