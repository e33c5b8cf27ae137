"""Simulate vs estimate over random valid plans of the whole plan space (validate/plan_space.py): the
distribution of (simulated - estimated) / estimated and the worst plans. Target: max |diff| <= 3%.

    python benchmarks/consistency.py [--plans 1000] [--seed 0]
"""

from __future__ import annotations

import argparse
import random
import time

from _results import save
from distscope.errors import DistscopeError
from distscope.report.progress import progress
from distscope.scenario import build_scenario
from distscope.scenario.argv import command, plan_flags
from distscope.sim.consistency import agreement
from distscope.validate.plan_space import draw_flags

TARGET = 0.03


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--plans", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    rows, rejected = [], 0
    t0 = time.perf_counter()
    with progress(args.plans, "simulating random plans") as advance:
        while len(rows) < args.plans:
            flags = draw_flags(rng.choice)
            try:
                sc = build_scenario(*flags)
            except DistscopeError:
                rejected += 1
                continue
            a = agreement(sc)
            rows.append({"command": command("estimate", flags[0], flags[1],
                                            plan_flags(sc.plan, software=flags[2].software)),
                         "estimated_step_s": a.estimated_step_s, "simulated_step_s": a.simulated_step_s,
                         "rel_diff": a.rel_diff})
            advance()
    diffs = sorted(abs(r["rel_diff"]) for r in rows)
    worst = sorted(rows, key=lambda r: -abs(r["rel_diff"]))[:10]
    q = lambda p: diffs[min(len(diffs) - 1, int(p * len(diffs)))]  # noqa: E731
    save("consistency", {
        "plans": len(rows), "rejected_draws": rejected, "seed": args.seed, "target_max_abs": TARGET,
        "max_abs_rel_diff": diffs[-1], "mean_abs_rel_diff": sum(diffs) / len(diffs), "p50": q(0.5), "p90": q(0.9),
        "p99": q(0.99), "within_target": sum(d <= TARGET for d in diffs), "meets_target": diffs[-1] <= TARGET,
        "wall_s": round(time.perf_counter() - t0, 1), "worst": worst,
    })


if __name__ == "__main__":
    main()
