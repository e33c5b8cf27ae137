"""CPU serving as Packrat plans it, on this host: ResNet-50 (examples/modules/resnet.py, fp32, 224x224,
random weights) profiled here for one instance with t threads on a batch of b, the best split of each
total batch into instances x threads x batch (serve/cpu_plan.py), then that plan and one all-cores
instance run side by side for real (serve/cpu_measure.py). Reports the predicted and measured latency of
each, and the measured gain of the plan over the all-cores instance. Run it on a quiet host: instances
on disjoint cores still share the memory system, and anything else running shares the cores.
Writes benchmarks/results/cpu_serving.json.

    python benchmarks/cpu_serving.py [--input x:1x3x224x224:fp32 ...] [--batches 1,2,4,8] [--repeats 5]

By default at 224x224 (the ImageNet size) and at 112x112 (a smaller input, where threads scale worse).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

from _results import save
from distscope.report.progress import progress
from distscope.serve.cpu_cli import CpuServeFlags, cpu_measure

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--input", action="append", help="repeatable (default: 224x224 and 112x112)")
    ap.add_argument("--batches", default="1,2,4,8")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    out = {}
    for inp in args.input or ["x:1x3x224x224:fp32", "x:1x3x112x112:fp32"]:
        out[inp.split(":")[1]] = run(inp, args.batches, args.repeats)
    errs = [e for r in out.values() for e in r["errors"]]
    gains = [g for r in out.values() for g in r["gains"]]
    save("cpu_serving", {"model": "resnet50", "inputs": out, "mean_abs_error_pct": round(statistics.fmean(errs), 1),
                         "max_abs_error_pct": round(max(errs), 1), "points": len(errs),
                         "measured_gain_max": max(gains), "logical_cpus": os.cpu_count()})


def run(inp: str, batches: str, repeats: int) -> dict:
    flags = CpuServeFlags(model=f"torch:{REPO}/examples/modules/resnet.py:resnet50", input=inp, cores=None,
                          batches=batches, repeats=repeats)
    t0 = time.perf_counter()
    with progress(None, f"profiling and serving ResNet-50 ({inp}) on this host's cores") as bar:
        res = cpu_measure(flags, bar)
    rows = []
    for r in res["runs"]:
        b, base = r["best"], r["baseline"]
        rows.append({"batch": r["batch"], "plan": b["plan"], "predicted_s": b["predicted_latency_s"],
                     "measured_s": b["latency_s"], "error_pct": round(b["error_pct"], 1),
                     "baseline_predicted_s": base["predicted_latency_s"], "baseline_measured_s": base["latency_s"],
                     "baseline_error_pct": round(base["error_pct"], 1),
                     "measured_gain": round(r["measured_speedup"], 3), "predicted_gain": round(r["predicted_speedup"], 3)})
        print(f"{inp} batch {r['batch']}: {b['plan']:18s} predicted {b['predicted_latency_s'] * 1e3:7.1f} ms measured "
              f"{b['latency_s'] * 1e3:7.1f} ms ({b['error_pct']:+.1f}%); 1 x all cores measured "
              f"{base['latency_s'] * 1e3:7.1f} ms; gain measured {r['measured_speedup']:.2f}x, predicted "
              f"{r['predicted_speedup']:.2f}x")
    # each distinct run once: where the plan is the all-cores instance both rows are the same run
    errs = [abs(x["error_pct"]) for x in rows] + [abs(x["baseline_error_pct"]) for x in rows if x["plan"] != f"1 x t{res['cores']} b{x['batch']}"]
    return {"cores": res["cores"], "rows": rows, "errors": errs, "gains": [x["measured_gain"] for x in rows],
            "mean_abs_error_pct": round(statistics.fmean(errs), 1), "seconds": round(time.perf_counter() - t0, 1)}


if __name__ == "__main__":
    main()
