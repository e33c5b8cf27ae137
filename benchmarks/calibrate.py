"""Fit the estimator's few bounded global parameters (model/efficiency.py CALIBRATION) to published runs.

Component data (GEMM ceilings, attention kernels, links) comes from kernel and collective benchmarks
and is not fitted here. The globals are σ (`sustained`: the share of benchmarked kernel throughput a
training job sustains), κ (GEMM saturation), ρ (`overlap_cost`: compute slowdown per second of
hidden communication) and π (`pytorch_stack`: speed of PyTorch-native stacks' attention and element-wise
kernels relative to fused ones), each within efficiency.BOUNDS. The fit is validate/calibration.py's cached
least-squares fit (each row's `auto` cells resolved at the priors, step time tabulated on a parameter
grid), the same one `distscope validate --cv source` refits per fold; the reported in-sample and
leave-one-source-out errors use the full model.

    python benchmarks/calibrate.py [CSV ...] [--write]

Default CSVs: data/validation/published_runs.csv and data/evidence/training_runs.csv. The shipped
calibration is fitted on both: π (`pytorch_stack`) is informed only by rows of PyTorch-native stacks,
which are all in the evidence set. Its out-of-sample accuracy is therefore the leave-one-source-out
figure (benchmarks/accuracy.py), never the in-sample one. --write stores the fit in
src/distscope/model/data/calibration.json, which efficiency.py loads.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from distscope.validate.cv import cross_validate
from distscope.validate.harness import load_rows, summary

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = [ROOT / "data/validation/published_runs.csv", ROOT / "data/evidence/training_runs.csv"]

ap = argparse.ArgumentParser(description="Fit the estimator's global parameters to published runs.")
ap.add_argument("csv", nargs="*", default=[str(p) for p in DEFAULT], help="validation CSVs")
ap.add_argument("--write", action="store_true", help="store the fit in src/distscope/model/data/calibration.json")
args = ap.parse_args()

t0 = time.time()
res = cross_validate(load_rows(args.csv))
s = summary(res.results, cv=True)
fitted = {k: round(v, 4) for k, v in res.fitted.items()}
print(f"fitted on all rows: {fitted}")
print(f"leave-one-source-out: mean {s['cv_mape_pct']:.2f}%, max {s['cv_max_ape_pct']:.2f}% · in-sample: mean "
      f"{s['mape_pct']:.2f}%, max {s['max_ape_pct']:.2f}% ({time.time() - t0:.0f} s)")
if args.write:
    path = ROOT / "src/distscope/model/data/calibration.json"
    names = ", ".join(Path(c).name for c in args.csv)
    path.write_text(json.dumps({
        **fitted,
        "_source": (f"benchmarks/calibrate.py on {names}: leave-one-source-out mean {s['cv_mape_pct']:.2f}% "
                    f"(max {s['cv_max_ape_pct']:.2f}%), in-sample mean {s['mape_pct']:.2f}% (max {s['max_ape_pct']:.2f}%)"),
    }, indent=1) + "\n")
    print(f"wrote {path}")
out = {"cv_mape_pct": s["cv_mape_pct"], "cv_max_ape_pct": s["cv_max_ape_pct"], "mape_pct": s["mape_pct"],
       "max_ape_pct": s["max_ape_pct"], "rows": s["predicted_rows"], **fitted, "seconds": round(time.time() - t0, 1)}
(ROOT / "benchmarks/results").mkdir(exist_ok=True)
(ROOT / "benchmarks/results/calibrate.json").write_text(json.dumps(out) + "\n")
print(json.dumps(out))
