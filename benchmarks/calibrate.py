"""Fit the efficiency model's global physical parameters to data/validation/published_runs.csv.

Parameters (one value each, shared by every row): GEMM η_max for A100 fp16, H100 bf16 and H100 fp8,
the GEMM saturation constant κ, and fused attention's efficiency relative to GEMMs. The objective is
the mean absolute percentage error of step time over all rows, with each row's `auto` cells
re-resolved at every trial (so the fit cannot pick per-row choices by hand).

    python benchmarks/calibrate.py [CSV] [--write]

Prints the fitted values and the resulting MAPE/max; --write stores them in
src/distscope/model/data/calibration.json, which efficiency.py loads.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from scipy.optimize import minimize

from distscope.model import efficiency as eff
from distscope.model.layer import head_cost, layer_cost
from distscope.report.progress import progress
from distscope.validate.harness import predict_row, summary
from distscope.validate.rows import parse_row, read_rows

ap = argparse.ArgumentParser(description="Fit the estimator's global efficiency parameters to published runs.")
ap.add_argument("csv", nargs="?", default=str(Path(__file__).resolve().parents[1] / "data/validation/published_runs.csv"), help="published-runs CSV")
ap.add_argument("--write", action="store_true", help="store the fit in src/distscope/model/data/calibration.json")
args = ap.parse_args()
CSV = args.csv
rows = [parse_row(r, line) for line, r in read_rows(CSV)]
NAMES = ["a100_fp16", "h100_bf16", "h100_fp8", "kappa", "flash_rel"]
# Physically plausible ranges, from public microbenchmarks (see model/efficiency.py): a fit outside
# them would be absorbing an unmodelled effect into a parameter that cannot carry it.
BOUNDS = [(0.60, 0.90), (0.55, 0.85), (0.45, 0.75), (0.2, 2.0), (0.70, 1.0)]


def apply(x: list[float]) -> None:
    eff.set_calibration(dict(zip(NAMES, x, strict=True)))
    layer_cost.cache_clear()
    head_cost.cache_clear()


def mape(x: list[float]) -> float:
    apply(x)
    s = summary([predict_row(r) for r in rows])
    return float(s["mape_pct"])


t0 = time.time()
x0 = [eff.CALIBRATION[n] for n in NAMES]
print(f"start: {dict(zip(NAMES, x0, strict=True))} MAPE={mape(x0):.2f}%")
MAXITER = 400
with progress(MAXITER, "fitting (Nelder-Mead iterations; stops early when converged)") as advance:
    res = minimize(mape, x0, method="Nelder-Mead", bounds=BOUNDS, callback=lambda _x: advance(),
                   options={"xatol": 1e-3, "fatol": 1e-3, "maxiter": MAXITER})
apply(list(res.x))
s = summary([predict_row(r) for r in rows])
fitted = {n: round(float(v), 4) for n, v in zip(NAMES, res.x, strict=True)}
print(f"fitted: {fitted}")
print(f"MAPE={s['mape_pct']:.2f}% max={s['max_ape_pct']:.2f}% ({time.time() - t0:.0f}s, {res.nfev} evaluations)")
if args.write:
    path = Path(__file__).resolve().parents[1] / "src/distscope/model/data/calibration.json"
    path.write_text(
        json.dumps(
            {
                **fitted,
                "_source": f"benchmarks/calibrate.py on {CSV}: MAPE {s['mape_pct']:.2f}%, max {s['max_ape_pct']:.2f}%",
            },
            indent=1,
        )
        + "\n"
    )
    print(f"wrote {path}")
print(json.dumps({"mape_pct": s["mape_pct"], "max_ape_pct": s["max_ape_pct"], **fitted}))
