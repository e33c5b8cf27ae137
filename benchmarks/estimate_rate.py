"""How many `estimate` evaluations per second one core sustains.

The workload is a planner-like sweep: GPT-3 175B on 1024 A100s (dgx-a100), every valid
(tp, pp, micro-batch, recompute, zero) combination, evaluated repeatedly. Each evaluation is a full
estimate (compute, memory, every communication class, pipeline), as the planner calls it; per-layer
costs are memoised across plans that share them, as they are in a real search.
Target (issue #2): >= 5,000 evaluations/s; Calculon's reference point is ~240 configurations/s.

    python benchmarks/estimate_rate.py [--seconds S] [--out FILE.json]
Last line of output: one JSON object with `evaluations_per_s`.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import time

from _results import save
from distscope.model import estimate
from distscope.model.estimate import clear_cost_cache
from distscope.model.layer import head_cost, layer_cost
from distscope.plan import Plan, Recompute
from distscope.system import get_cluster
from distscope.workload import TrainingShape, get_model


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})  # one core

    spec, shape = get_model("gpt3-175b"), TrainingShape(seq_len=2048, global_batch=1536)
    cluster = get_cluster("dgx-a100", 1024)
    plans = []
    for tp, pp, mb, rc, z in itertools.product((1, 2, 4, 8), (1, 2, 4, 8, 16, 32), (1, 2, 4), Recompute, (0, 1)):
        dp = 1024 // (tp * pp)
        if spec.layers % pp or shape.global_batch % (dp * mb):
            continue
        plans.append(Plan(dp=dp, tp=tp, pp=pp, micro_batch=mb, recompute=rc, zero_stage=z))

    layer_cost.cache_clear()
    head_cost.cache_clear()
    clear_cost_cache()
    cold_t0 = time.perf_counter()
    for p in plans:
        estimate(spec, shape, cluster, p)
    cold_s = time.perf_counter() - cold_t0

    n = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < args.seconds:
        for p in plans:
            estimate(spec, shape, cluster, p)
        n += len(plans)
    dt = time.perf_counter() - t0
    rate = n / dt
    print(f"plans in sweep: {len(plans)}; first pass (cold caches): {len(plans) / cold_s:,.0f} evaluations/s")
    print(
        f"steady state: {n} evaluations in {dt:.2f} s = {rate:,.0f} evaluations/s on one core "
        f"(target 5,000; Calculon ~240)"
    )
    result = {
        "evaluations_per_s": round(rate, 1),
        "cold_evaluations_per_s": round(len(plans) / cold_s, 1),
        "plans": len(plans),
        "evaluations": n,
        "seconds": round(dt, 3),
        "target": 5000,
    }
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
    save("estimate_rate", result)


if __name__ == "__main__":
    main()
