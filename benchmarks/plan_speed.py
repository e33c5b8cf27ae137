"""How long a full `distscope plan` search takes on one core.

Two searches (issue #4): GPT-3 175B on 1024 GPUs of dgx-a100 (global batch 1536, seq 2048) and
Llama 3.1 405B on 16,384 GPUs of h100-roce (global batch 2048, seq 8192), each the CLI's default
search (every layout, sequence parallel, sharding, micro-batch and recompute choice, then the exact
pipeline re-partitioning of the best candidates and the compression options). Target: the 175B
search in at most 10 s on one core. The process is pinned to one core; wall and CPU seconds are both
reported (wall time includes any contention from other processes on that core).

    python benchmarks/plan_speed.py [--out FILE.json] [--against REV[,REV...]]

--against also times the planner of each git revision REV (its src/ and this script, from `git archive`)
side by side: the baselines and the current tree alternate twice, each in a fresh process on the same
core, and the lower CPU time of each counts. The README times two: 4297024, the tree when issue 19's
work began (its target: within x1.2), and fe10834, the planner before issue 9. This machine's speed drifts by tens of percent over minutes, so only
such a ratio says whether the search got slower.
Last line of output: one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _results import save
from distscope.model.estimate import clear_cost_cache
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


ROOT = Path(__file__).resolve().parents[1]


def _timed(root: Path, src: Path, out: Path) -> list[dict[str, Any]]:
    """One run of `root`'s plan_speed.py in a fresh process (its own package from `src`)."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    subprocess.run([sys.executable, str(root / "benchmarks/plan_speed.py"), "--out", str(out)], env=env, cwd=root,
                   check=True, capture_output=True, timeout=600)
    cases: list[dict[str, Any]] = json.loads(out.read_text())["cases"]
    return cases


def side_by_side(revs: list[str]) -> list[dict[str, Any]]:
    """Current tree vs each revision in `revs`, all alternating twice in fresh processes on the same core; the
    lower CPU time per case counts, and every ratio divides by the same current-tree timings."""
    with tempfile.TemporaryDirectory() as tmp:
        roots = {}
        for rev in revs:
            base = Path(tmp) / rev
            base.mkdir()
            archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "src", "benchmarks"], check=True,
                                     capture_output=True, timeout=60).stdout
            subprocess.run(["tar", "-x", "-C", str(base)], input=archive, check=True, timeout=60)
            roots[rev] = base
        runs: dict[str, list[list[dict[str, Any]]]] = {k: [] for k in [*revs, "current"]}
        for _ in range(2):
            for rev, base in roots.items():
                runs[rev].append(_timed(base, base / "src", Path(tmp) / "b.json"))
            runs["current"].append(_timed(ROOT, ROOT / "src", Path(tmp) / "c.json"))
    best = {k: [min(r[i]["search_cpu_s"] for r in v) for i in range(len(CASES))] for k, v in runs.items()}
    return [{"against": rev, "baseline_cpu_s": best[rev], "current_cpu_s": best["current"],
             "ratio_current_to_baseline": [round(c / b, 3) for c, b in zip(best["current"], best[rev], strict=True)]}
            for rev in revs]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="")
    ap.add_argument("--against", default="", help="git revisions (comma-separated) to time side by side with the "
                    "current tree")
    args = ap.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})  # one core
    rows = []
    for model, cluster, gpus, gb, seq, target in CASES:
        layer_cost.cache_clear()  # cold caches: a fresh `distscope plan` process
        head_cost.cache_clear()
        stage_layers.cache_clear()
        clear_cost_cache()
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
    result: dict[str, Any] = {"benchmark": "plan_speed", "cases": rows,
                              "gpt3_175b_search_s": rows[0]["search_cpu_s"], "target_s": 10.0,
                              "meets_target": bool(rows[0]["meets_target"])}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
        return  # a timed run for someone else (side_by_side): leave results/ alone
    if args.against:
        result["side_by_side"] = side_by_side(args.against.split(","))
        for sbs in result["side_by_side"]:
            print(f"vs {sbs['against']}: current / baseline CPU time {sbs['ratio_current_to_baseline']}")
    save("plan_speed", result)


if __name__ == "__main__":
    main()
