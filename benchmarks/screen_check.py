"""Does the planner's screen drop plans? (issue 19's foundation: `plan` and `estimate` must agree)

The search prices interleaved plans by the closed form and folds per-micro-batch ZeRO streams into the
passes (estimate's `screen`); it keeps the best candidates on that price and re-estimates those in full
(planner._in_full). For each search below, every screened feasible candidate is also estimated in full,
and the benchmark reports:
- how far the screen lies from the full estimate, separately for ZeRO-2/3 plans (streams folded) and
  for the rest (the pipeline's closed form only);
- missed plans: candidates whose full step beats the reported top_k-th step but that are not reported,
  neither as they are nor re-partitioned (the same plan with other stage layers);
- the branch and bound (planner module docstring): a (layout, sequence parallel, micro-batch) is skipped
  when its compute bound is not below the kept set's slowest *screened* step. That is safe when the bound
  is a lower bound of every full estimate (checked against every plan the search estimates: `bound_over`
  counts violations) and no skipped bound lies below the reported top_k-th full step; the skipped ones
  that do are estimated here in full, every sharding (full recompute where nothing else fits), and any
  plan of theirs beating the top_k-th step counts as `pruned_missed`.
    python benchmarks/screen_check.py
Last line of output: one JSON object (also benchmarks/results/screen_check.json).
"""
from __future__ import annotations

import dataclasses
import time
from typing import Any

from _results import save
from distscope.model.estimate import estimate
from distscope.plan import Dim, Plan, Recompute
from distscope.search.planner import _Search, search
from distscope.search.space import Layout, base_plan, shardings_for
from distscope.system import get_cluster
from distscope.workload import TrainingShape, get_model

CASES = (
    ("llama3.1-405b", "h100-roce", 16384, 2048, 8192),
    ("gpt3-175b", "dgx-a100", 1024, 1536, 2048),
    ("llama3-70b", "dgx-h100", 64, 512, 8192),
    ("mixtral-8x22b", "dgx-h100", 128, 1024, 4096),
    ("llama2-13b", "dgx-a100", 32, 512, 4096),
    ("llama3-8b", "dgx-h100", 16, 256, 8192),
    ("llama3-70b", "dgx-b200", 512, 1024, 8192),
    ("llama3-8b", "dgx-h100", 128, 512, 8192),
)


Key = tuple[Layout, bool, int]  # (layout, sequence parallel, micro-batch): what one compute bound covers


def key_of(plan: Plan) -> Key:
    return Layout.of(plan), plan.sequence_parallel, plan.micro_batch


def pruned_misses(search_: _Search, keys: list[Key], kth: float,
                  reported: set[Plan]) -> tuple[int, list[tuple[Plan, float]]]:
    """Of the skipped (layout, SP, micro-batch) keys: how many hold a plan that fits (the rest were skipped
    because nothing fits, not by the bound), and their plans whose full step beats `kth`, not reported."""
    fitting, out = 0, []
    for lay, sp, mb in keys:
        fits = False
        for sharding in shardings_for(search_.space, lay):
            plan = base_plan(search_.space, lay, sharding, sp, mb)
            for p in (plan, dataclasses.replace(plan, recompute=Recompute.FULL)):
                e = estimate(search_.spec, search_.shape, search_.cluster, p, software=search_.space.software)
                if e.feasible:
                    fits = True
                    if e.step_time_s < kth and dataclasses.replace(p, stage_layers=()) not in reported:
                        out.append((p, e.step_time_s))
                    break
        fitting += fits
    return fitting, out


def main() -> None:
    seen: list[tuple[Any, float, float, bool]] = []  # (plan, screened step, full step, ZeRO streams folded?)
    bounds: dict[Key, float] = {}  # every compute bound the search computed
    visited: dict[Key, float] = {}  # keys with an estimated plan: the fastest full step among them
    searches: list[_Search] = []
    screened_est, compute_bound = _Search.est, _Search.compute_bound

    def est(self: _Search, plan: Any) -> Any:
        if not searches or searches[-1] is not self:
            searches.append(self)
        e = screened_est(self, plan)
        full = e
        if e.screened and e.feasible:
            full = estimate(self.spec, self.shape, self.cluster, plan, software=self.space.software)
            if full.feasible:
                folded = plan.zero_stage == 3 or (plan.zero_stage == 2 and Dim.DP in plan.overlap)
                seen.append((plan, e.step_time_s, full.step_time_s, folded))
        if full.feasible:
            k = key_of(plan)
            visited[k] = min(visited.get(k, float("inf")), full.step_time_s)
        return e

    def bound(self: _Search, lay: Layout, sp: bool, mb: int) -> float:
        b = compute_bound(self, lay, sp, mb)
        bounds[(lay, sp and lay.tp > 1, mb)] = b
        return b

    _Search.est = est  # type: ignore[method-assign]
    _Search.compute_bound = bound  # type: ignore[method-assign]
    rows = []
    for model, cluster, gpus, gb, seq in CASES:
        seen.clear()
        bounds.clear()
        visited.clear()
        t0 = time.perf_counter()
        res = search(get_model(model), TrainingShape(seq_len=seq, global_batch=gb), get_cluster(cluster, gpus))
        kth = res.top[-1].step_time_s
        reported = {dataclasses.replace(c.plan, stage_layers=()) for c in res.top}
        missed = [(p, s, f) for p, s, f, _ in seen
                  if f < kth and dataclasses.replace(p, stage_layers=()) not in reported]
        # the bound is a lower bound of every full estimate of its key (tolerance: float rounding)
        bound_over = sum(1 for k, t in visited.items() if k in bounds and t < bounds[k] * (1 - 1e-9))
        skipped = [k for k, b in bounds.items() if k not in visited and b < kth]
        t1 = time.perf_counter()
        fitting, p_missed = pruned_misses(searches[-1], skipped, kth, reported)
        check_s = time.perf_counter() - t1
        low = [s / f - 1 for _, s, f, fo in seen if not fo]
        folded = [s / f - 1 for _, s, f, fo in seen if fo]
        row = {"model": model, "cluster": cluster, "gpus": gpus, "global_batch": gb, "seq": seq,
               "top_k": len(res.top), "kth_step_s": round(kth, 4), "screened_pipeline": len(low),
               "pipeline_max_above_pct": round(100 * max(low, default=0.0), 2),
               "pipeline_max_below_pct": round(-100 * min(low, default=0.0), 2),
               "screened_folded": len(folded), "folded_max_above_pct": round(100 * max(folded, default=0.0), 2),
               "folded_max_below_pct": round(-100 * min(folded, default=0.0), 2),
               "missed": len(missed), "bounds": len(bounds), "bound_over": bound_over,
               "pruned_below_kth": fitting, "pruned_missed": len(p_missed),
               "wall_s": round(time.perf_counter() - t0 - check_s, 1), "pruned_check_s": round(check_s, 1)}
        rows.append(row)
        print(f"{model:<15} {gpus:>6} pipeline {len(low):>6} (max above {row['pipeline_max_above_pct']}%, below "
              f"{row['pipeline_max_below_pct']}%)  "
              f"folded {len(folded):>6} (max above {row['folded_max_above_pct']}%, below "
              f"{row['folded_max_below_pct']}%)  missed {len(missed)}  bound over full {bound_over}  "
              f"skipped below #{len(res.top)} {fitting} (missed {len(p_missed)})  {row['wall_s']} s", flush=True)
    save("screen_check", {
        "benchmark": "screen_check", "cases": rows, "missed_total": sum(r["missed"] for r in rows),
        "bound_over_total": sum(r["bound_over"] for r in rows),
        "pruned_below_kth_total": sum(r["pruned_below_kth"] for r in rows),
        "pruned_missed_total": sum(r["pruned_missed"] for r in rows),
        "pipeline_max_above_pct": max(r["pipeline_max_above_pct"] for r in rows),
        "folded_max_above_pct": max(r["folded_max_above_pct"] for r in rows),
    })


if __name__ == "__main__":
    main()
