"""Accuracy figures for the README: step time on the published runs the model was calibrated on
(in-sample) and on the independent evidence rows (out of sample), and peak memory against published
measurements. Writes benchmarks/results/accuracy.json.

    python benchmarks/accuracy.py
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from _results import save

from distscope.validate.harness import summary, validate_file
from distscope.validate.memory import check_file

REPO = Path(__file__).resolve().parents[1]


def step_time(path: Path) -> dict[str, Any]:
    s = summary(validate_file(path))
    errs = [abs(r["error_pct"]) for r in s["rows"] if r["error_pct"] is not None]
    worst = max((r for r in s["rows"] if r["error_pct"] is not None), key=lambda r: abs(r["error_pct"]))
    return {"rows": len(s["rows"]), "predicted": s["predicted_rows"], "failed": s["failed_rows"],
            "mean_abs_error_pct": round(s["mape_pct"], 2), "median_abs_error_pct": round(statistics.median(errs), 2),
            "max_abs_error_pct": round(s["max_ape_pct"], 2), "worst_run": worst["run_id"]}


def memory(path: Path) -> dict[str, Any]:
    checks = check_file(path)
    errs = [abs(c.error_pct) for c in checks]
    eager = [abs(c.error_pct) for c in checks if not c.compiled]
    return {"rows": len(checks), "mean_abs_error_pct": round(statistics.fmean(errs), 1),
            "max_abs_error_pct": round(max(errs), 1), "eager_rows": len(eager),
            "eager_mean_abs_error_pct": round(statistics.fmean(eager), 1) if eager else None}


def main() -> None:
    save("accuracy", {
        "published_in_sample": step_time(REPO / "data/validation/published_runs.csv"),
        "evidence_out_of_sample": step_time(REPO / "data/evidence/training_runs.csv"),
        "memory": memory(REPO / "data/evidence/memory_runs.csv"),
    })


if __name__ == "__main__":
    main()
