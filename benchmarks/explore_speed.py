"""How fast `distscope explore` sweeps, locally and on Ray (issue #13 targets).

Measured, each with the 1-minute load average before and after (other jobs share this machine):
- per_core: points/s of the issue's 10×10 grid (Llama 3 70B on 1,024 H100s, HBM bandwidth × NIC
  bandwidth, default global batch 128 and seq 4096, compression searched) on one pinned core;
- scaling: 40 points of that grid (4 HBM × 10 NIC values) with 1 process (in-process) and 2 processes (the local pool, its start-up
  included): speed-up, target >= 1.7x;
- grid_10x10: the whole 100-point grid on the local pool over 2 cores: wall time, target < 60 s;
- ray: the same 40 points on a local Ray instance with 2 CPUs (start-up timed apart): overhead per
  point vs the local pool; then a 1,000-point sweep of cheap points (Llama 3 8B on 8 GPUs, HBM × NIC ×
  NVLink bandwidth) on Ray, wall time (target: CI time, i.e. minutes), and 100 of its points (one HBM
  value) on both engines, alternated twice, for the overhead on short tasks;
- cache_reuse: per-point CPU time of 8 points differing only in NIC bandwidth, run as one batch
  (the cost functions' per-layer caches shared, as the engines batch them) vs with every cache
  emptied before each point (as if each point were its own process), 3 alternations, one pinned core.

    python benchmarks/explore_speed.py [--skip-ray] [--out benchmarks/results/explore_speed.json]
Last line of output: one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

from distscope.explore.axes import parse_vary
from distscope.explore.local import LocalEngine
from distscope.explore.point import PlanSettings, _cluster, model_spec, run_batch
from distscope.explore.runner import run_sweep
from distscope.explore.sweep import Base, Sweep
from distscope.model.layer import head_cost, layer_cost
from distscope.model.stages import stage_layers

OUT = Path(__file__).resolve().parent / "results" / "explore_speed.json"
GRID = Sweep(base=Base(model="llama3-70b", cluster="dgx-h100", gpus=1024),
             axes=(parse_vary("hbm_GBps=2000:8000:10"), parse_vary("nic_GBps=25:100:10")))
CHEAP = Sweep(base=Base(model="llama3-8b", cluster="dgx-h100", gpus=8, global_batch=32),
              axes=(parse_vary("hbm_GBps=2000:8000:10"), parse_vary("nic_GBps=25:100:10"),
                    parse_vary("nvlink_GBps=300:900:10")))


def load() -> float:
    return round(os.getloadavg()[0], 2)


def cold() -> None:
    """Empty every cache a fresh process would start without."""
    for f in (layer_cost, head_cost, stage_layers, model_spec, _cluster):
        f.cache_clear()


def grid(hbm: str, nic: str = "25:100:10") -> Sweep:
    return Sweep(base=GRID.base, axes=(parse_vary(f"hbm_GBps={hbm}"), parse_vary(f"nic_GBps={nic}")))


def timed_sweep(sweep: Sweep, engine: Any) -> tuple[float, dict[str, Any]]:
    cold()
    t = time.perf_counter()
    res = run_sweep(sweep, engine, show_progress=False)
    return time.perf_counter() - t, res.doc


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--skip-ray", action="store_true")
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args()
    cores = sorted(os.sched_getaffinity(0))
    out: dict[str, Any] = {"benchmark": "explore_speed", "cpus": len(cores)}

    # --- per core, and the cache-reuse A/B (pinned to one core) ---
    os.sched_setaffinity(0, {cores[0]})
    l0 = load()
    c0 = time.process_time()
    wall1, _ = timed_sweep(grid("2000:8000:2"), LocalEngine(workers=1))
    cpu1 = time.process_time() - c0
    out["per_core"] = {"points": 20, "wall_s": round(wall1, 2), "cpu_s": round(cpu1, 2),
                       "points_per_s": round(20 / wall1, 3), "points_per_cpu_s": round(20 / cpu1, 3),
                       "load_before": l0, "load_after": load()}
    # 8 NIC bandwidths on one device: the batching keeps such points together so the per-layer costs
    # (keyed on model, shapes and device) computed for the first serve the rest
    pts = [(p.key(GRID.plan), p) for p in grid("2000:2000:1", "25:100:8").points()]
    warm, cold_ = [], []
    for _ in range(3):
        cold()
        t = time.process_time()
        run_batch(pts, PlanSettings())
        warm.append((time.process_time() - t) / len(pts))
        t = time.process_time()
        for kp in pts:
            cold()
            run_batch([kp], PlanSettings())
        cold_.append((time.process_time() - t) / len(pts))
    out["cache_reuse"] = {"cpu_s_per_point_shared_caches": round(statistics.median(warm), 3),
                          "cpu_s_per_point_cold_caches": round(statistics.median(cold_), 3),
                          "speedup": round(statistics.median(cold_) / statistics.median(warm), 3), "load_after": load()}
    os.sched_setaffinity(0, set(cores))

    # --- scaling 1 -> 2 processes on the same 40 points ---
    head = grid("2000:8000:4")
    l0 = load()
    t1, doc1 = timed_sweep(head, LocalEngine(workers=1))
    t2, doc2 = timed_sweep(head, LocalEngine(workers=2))
    assert doc1 == doc2
    out["scaling"] = {"points": 40, "wall_1proc_s": round(t1, 2), "wall_2proc_s": round(t2, 2),
                      "speedup": round(t1 / t2, 3), "target": 1.7, "meets_target": t1 / t2 >= 1.7,
                      "load_before": l0, "load_after": load()}

    # --- the 10x10 grid on 2 cores ---
    l0 = load()
    tg, docg = timed_sweep(GRID, LocalEngine(workers=2))
    ok = sum(r["status"] == "ok" for r in docg["rows"])
    out["grid_10x10"] = {"points": GRID.size, "feasible": ok, "wall_s": round(tg, 2), "target_s": 60.0,
                         "meets_target": tg < 60.0, "load_before": l0, "load_after": load(),
                         "command": "distscope explore --model llama3-70b --cluster dgx-h100 --gpus 1024 "
                                    "--vary hbm_GBps=2000:8000:10 --vary nic_GBps=25:100:10 --workers 2"}

    if not args.skip_ray:
        import logging

        import ray

        from distscope.explore.ray_engine import RayEngine

        l0 = load()
        t = time.perf_counter()
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
        t_init = time.perf_counter() - t
        tr, docr = timed_sweep(head, RayEngine(address="local"))
        assert docr == doc1, "Ray and local outputs differ"
        cheap_head = Sweep(base=CHEAP.base, axes=(parse_vary("hbm_GBps=2000:2000:1"), *CHEAP.axes[1:]))
        local_c, ray_c = [], []
        for _ in range(2):  # alternated, best of two each: the machine's load drifts
            tl_c, doc_lc = timed_sweep(cheap_head, LocalEngine(workers=2))
            tr_c, doc_rc = timed_sweep(cheap_head, RayEngine(address="local"))
            assert doc_lc == doc_rc
            local_c.append(tl_c)
            ray_c.append(tr_c)
        tl_c, tr_c = min(local_c), min(ray_c)
        t1000, doc1000 = timed_sweep(CHEAP, RayEngine(address="local"))
        ray.shutdown()
        out["ray"] = {
            "startup_s": round(t_init, 2),
            "grid_40_points": {"local_2proc_s": round(t2, 2), "ray_2cpu_s": round(tr, 2),
                               "overhead_per_point_ms": round(1e3 * (tr - t2) / 40, 1)},
            "cheap_100_points": {"local_2proc_s": round(tl_c, 2), "ray_2cpu_s": round(tr_c, 2),
                                 "overhead_per_point_ms": round(1e3 * (tr_c - tl_c) / 100, 1)},
            "cheap_1000_points_s": round(t1000, 2), "cheap_1000_feasible": sum(r["status"] == "ok" for r in doc1000["rows"]),
            "load_before": l0, "load_after": load(),
        }

    print(json.dumps(out, indent=1))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
