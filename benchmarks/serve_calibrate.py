"""Fit the serving model's global parameters (serve/calibration.py) to data/validation/serving_runs.csv,
and report in-sample and leave-one-source_id-out errors per metric.

    python benchmarks/serve_calibrate.py [CSV] [--write]

--write stores the fit in src/distscope/serve/data/calibration.json. The last line printed is a JSON
object, also written to benchmarks/results/serve_calibrate.json.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from distscope.errors import DistscopeError
from distscope.serve import calibration
from distscope.serve.calibrate import cross_validate, fit
from distscope.serve.calibration import FITTED
from distscope.serve.rows import read_rows
from distscope.serve.validate import report

ROOT = Path(__file__).resolve().parents[1]
ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("csv", nargs="?", default=str(ROOT / "data/validation/serving_runs.csv"))
ap.add_argument("--write", action="store_true", help="store the fit in src/distscope/serve/data/calibration.json")
args = ap.parse_args()

t0 = time.time()
rows = [r for r in read_rows(args.csv) if not isinstance(r, DistscopeError)]
cal = fit(rows)
fitted = {k: getattr(cal, k) for k in FITTED}
with calibration.using(cal):
    ins = report(rows)
print("fitted:", fitted)
print("in-sample MAPE %:", {k: round(v, 2) for k, v in ins["mape_pct"].items()})
if args.write:
    out = {k: float(f"{v:.4g}") for k, v in fitted.items()}
    out["_source"] = (f"benchmarks/serve_calibrate.py on data/validation/serving_runs.csv ({len(ins['rows'])} predicted "
                      f"metrics): in-sample MAPE " + ", ".join(f"{k} {v:.1f}%" for k, v in ins["mape_pct"].items()))
    (ROOT / "src/distscope/serve/data/calibration.json").write_text(json.dumps(out, indent=1) + "\n")
cv = cross_validate(rows)
print("CV MAPE %:", {k: round(v, 2) for k, v in cv["cv_mape_pct"].items()})
result = {
    "fitted": fitted, "mape_pct": ins["mape_pct"], "mape_pct_by_source": ins["mape_pct_by_source"], "n": ins["n"],
    "cv_mape_pct": cv["cv_mape_pct"], "cv_mape_pct_by_source": cv["cv_mape_pct_by_source"], "cv_folds": cv["cv_folds"],
    "skipped_metrics": len(ins["skipped"]), "seconds": round(time.time() - t0, 1),
}
(ROOT / "benchmarks/results").mkdir(exist_ok=True)
(ROOT / "benchmarks/results/serve_calibrate.json").write_text(json.dumps(result, indent=1) + "\n")
print(json.dumps(result))
