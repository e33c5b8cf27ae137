"""Does the planner's screen drop plans? (issue 19's foundation: `plan` and `estimate` must agree)

The search prices interleaved plans by the closed form and folds per-micro-batch ZeRO streams into the
passes (estimate's `screen`); it keeps the best candidates on that price and re-estimates those in full
(planner._in_full). For each search below, every screened feasible candidate is also estimated in full,
and the benchmark reports:
- how far the screen lies from the full estimate, separately for ZeRO-2/3 plans (streams folded) and
  for the rest (the pipeline's closed form only);
- missed plans: candidates whose full step beats the reported top_k-th step but that are not reported,
  neither as they are nor re-partitioned (the same plan with other stage layers).
    python benchmarks/screen_check.py
Last line of output: one JSON object (also benchmarks/results/screen_check.json).
"""
from __future__ import annotations

import dataclasses
import time
from typing import Any

from _results import save
from distscope.model.estimate import estimate
from distscope.plan import Dim
from distscope.search.planner import _Search, search
from distscope.system import get_cluster
from distscope.workload import TrainingShape, get_model

CASES = (
    ("llama3.1-405b", "h100-roce", 16384, 2048, 8192),
    ("gpt3-175b", "dgx-a100", 1024, 1536, 2048),
    ("llama3-70b", "dgx-h100", 64, 512, 8192),
    ("mixtral-8x22b", "dgx-h100", 128, 1024, 4096),
    ("llama2-13b", "dgx-a100", 32, 512, 4096),
    ("llama3-8b", "dgx-h100", 16, 256, 8192),
)


def main() -> None:
    seen: list[tuple[Any, float, float, bool]] = []  # (plan, screened step, full step, ZeRO streams folded?)
    screened_est = _Search.est

    def est(self: _Search, plan: Any) -> Any:
        e = screened_est(self, plan)
        if e.screened and e.feasible:
            full = estimate(self.spec, self.shape, self.cluster, plan, software=self.space.software)
            if full.feasible:
                folded = plan.zero_stage == 3 or (plan.zero_stage == 2 and Dim.DP in plan.overlap)
                seen.append((plan, e.step_time_s, full.step_time_s, folded))
        return e

    _Search.est = est  # type: ignore[method-assign]
    rows = []
    for model, cluster, gpus, gb, seq in CASES:
        seen.clear()
        t0 = time.perf_counter()
        res = search(get_model(model), TrainingShape(seq_len=seq, global_batch=gb), get_cluster(cluster, gpus))
        kth = res.top[-1].step_time_s
        reported = {dataclasses.replace(c.plan, stage_layers=()) for c in res.top}
        missed = [(p, s, f) for p, s, f, _ in seen
                  if f < kth and dataclasses.replace(p, stage_layers=()) not in reported]
        low = [s / f - 1 for _, s, f, fo in seen if not fo]
        folded = [s / f - 1 for _, s, f, fo in seen if fo]
        row = {"model": model, "cluster": cluster, "gpus": gpus, "global_batch": gb, "seq": seq,
               "top_k": len(res.top), "kth_step_s": round(kth, 4), "screened_pipeline": len(low),
               "pipeline_max_above_pct": round(100 * max(low, default=0.0), 2),
               "pipeline_max_below_pct": round(-100 * min(low, default=0.0), 2),
               "screened_folded": len(folded), "folded_max_above_pct": round(100 * max(folded, default=0.0), 2),
               "folded_max_below_pct": round(-100 * min(folded, default=0.0), 2),
               "missed": len(missed), "wall_s": round(time.perf_counter() - t0, 1)}
        rows.append(row)
        print(f"{model:<15} {gpus:>6} pipeline {len(low):>6} (max above {row['pipeline_max_above_pct']}%, below "
              f"{row['pipeline_max_below_pct']}%)  "
              f"folded {len(folded):>6} (max above {row['folded_max_above_pct']}%, below "
              f"{row['folded_max_below_pct']}%)  missed {len(missed)}  {row['wall_s']} s", flush=True)
    save("screen_check", {
        "benchmark": "screen_check", "cases": rows, "missed_total": sum(r["missed"] for r in rows),
        "pipeline_max_above_pct": max(r["pipeline_max_above_pct"] for r in rows),
        "folded_max_above_pct": max(r["folded_max_above_pct"] for r in rows),
    })


if __name__ == "__main__":
    main()
