"""DLRM step time against published runs (data/evidence/dlrm_runs.csv): each row's tables file, cluster,
GPUs, global batch and sharding (a published one where the source prints it, else distscope's planner),
estimated with nothing fitted to the rows. Issue 22's target is 15% mean over at least 10 runs per family.

    python benchmarks/dlrm_accuracy.py
"""

from __future__ import annotations

import csv
import json
import statistics
import subprocess
import sys
from pathlib import Path

from _results import save

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    rows = []
    with open(ROOT / "data/evidence/dlrm_runs.csv", newline="") as fh:
        for r in csv.DictReader(fh):
            args = ["estimate", "--model", r["model"], "--cluster", r["cluster"], "--gpus", r["gpus"],
                    "--global-batch", r["global_batch"], "--json"]
            if r["sharding"] != "planner":
                args += ["--sharding", r["sharding"]]
            out = subprocess.run([sys.executable, "-m", "distscope", *args], capture_output=True, text=True, cwd=ROOT,
                                 check=True).stdout
            pred = json.loads(out)["step_time_s"] * 1e3
            meas = float(r["measured_step_ms"])
            rows.append({"id": r["id"], "gpus": int(r["gpus"]), "sharding": r["sharding"], "measured_ms": meas,
                         "predicted_ms": pred, "error_pct": 100 * (pred / meas - 1)})
            print(f"{r['id']}: measured {meas:.3f} ms, predicted {pred:.3f} ms ({rows[-1]['error_pct']:+.1f}%)")
    errs = [abs(r["error_pct"]) for r in rows]
    save("dlrm_accuracy", {"rows": rows, "count": len(rows), "mean_abs_error_pct": statistics.mean(errs),
                           "max_abs_error_pct": max(errs)})


if __name__ == "__main__":
    main()
