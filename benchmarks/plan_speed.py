"""How long a full `distscope plan` search takes on one core.

Two searches (issue #4): GPT-3 175B on 1024 GPUs of dgx-a100 (global batch 1536, seq 2048) and
Llama 3.1 405B on 16,384 GPUs of h100-roce (global batch 2048, seq 8192), each the CLI's default
search (every layout, sequence parallel, sharding, micro-batch and recompute choice, then the exact
pipeline re-partitioning of the best candidates and the compression options). Target: the 175B
search in at most 10 s on one core. The process is pinned to one core; wall and CPU seconds are both
reported (wall time includes any contention from other processes on that core).

    python benchmarks/plan_speed.py [--out FILE.json]
Last line of output: one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import time

from _results import save
from distscope.model.layer import head_cost, layer_cost
from distscope.model.stages import stage_layers
from distscope.search.compression import best_compressed
from distscope.search.planner import search
from distscope.system import get_cluster
from distscope.workload import TrainingShape, get_model

CASES = (
    ("gpt3-175b", "dgx-a100", 1024, 1536, 2048, 10.0),
    ("llama3.1-405b", "h100-roce", 16384, 2048, 8192, None),
)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})  # one core
    rows = []
    for model, cluster, gpus, gb, seq, target in CASES:
        layer_cost.cache_clear()  # cold caches: a fresh `distscope plan` process
        head_cost.cache_clear()
        stage_layers.cache_clear()
        spec, shape, c = get_model(model), TrainingShape(seq_len=seq, global_batch=gb), get_cluster(cluster, gpus)
        w0, c0 = time.perf_counter(), time.process_time()
        res = search(spec, shape, c)
        cr = best_compressed(spec, shape, c, res.pool, res.comm_pool)
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        assert res.best is not None
        evaluated = res.evaluated + (cr.evaluated if cr else 0)
        rows.append({
            "model": model, "cluster": cluster, "gpus": gpus, "global_batch": gb, "seq": seq,
            "layouts": res.layouts, "plans_evaluated": evaluated, "feasible": res.feasible,
            "search_wall_s": round(wall, 3), "search_cpu_s": round(cpu, 3),
            "plans_per_cpu_s": round(evaluated / cpu), "best_step_s": round(res.best.step_time_s, 4),
            "best_plan": res.best.plan.degrees(), "target_s": target,
            "meets_target": None if target is None else cpu <= target,
        })
    print(f"{'model':<15} {'GPUs':>6} {'layouts':>8} {'evaluated':>10} {'feasible':>9} {'wall s':>7} {'cpu s':>6} "
          f"{'plans/s':>8}  best plan")
    for r in rows:
        print(f"{r['model']:<15} {r['gpus']:>6} {r['layouts']:>8} {r['plans_evaluated']:>10,} {r['feasible']:>9,} "
              f"{r['search_wall_s']:>7.2f} {r['search_cpu_s']:>6.2f} {r['plans_per_cpu_s']:>8,}  "
              f"{r['best_plan']} ({r['best_step_s']} s)")
    result = {"benchmark": "plan_speed", "cases": rows,
              "gpt3_175b_search_s": rows[0]["search_cpu_s"], "target_s": 10.0,
              "meets_target": bool(rows[0]["meets_target"])}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
    save("plan_speed", result)


if __name__ == "__main__":
    main()
