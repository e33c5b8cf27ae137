"""Accuracy figures for the README. The headline is leave-one-source-out cross-validation over the
published runs and the evidence rows (each source predicted with the global parameters refitted
without it); the same over the published runs alone; each set's in-sample error with the shipped
calibration (fitted on both sets, benchmarks/calibrate.py); FP8/BF16 speed-ups; the published cost of a
learned router's imbalance against forced balance (model/routing.py); peak memory against published
measurements; the published plans given only their printed flags (validate/printed.py).
Writes benchmarks/results/accuracy.json.

    python benchmarks/accuracy.py
"""

from __future__ import annotations

import dataclasses
import statistics
from pathlib import Path
from typing import Any

from _results import save
from distscope.plan import MoeBalance
from distscope.validate.cv import cross_validate
from distscope.validate.harness import load_rows, predict_row, summary, validate_file
from distscope.validate.memory import check_file
from distscope.validate.printed import printed_error_pct
from distscope.validate.rows import parse_row, read_rows

REPO = Path(__file__).resolve().parents[1]


def step_time(path: Path) -> dict[str, Any]:
    s = summary(validate_file(path))
    errs = [abs(r["error_pct"]) for r in s["rows"] if r["error_pct"] is not None]
    worst = max((r for r in s["rows"] if r["error_pct"] is not None), key=lambda r: abs(r["error_pct"]))
    return {"rows": len(s["rows"]), "predicted": s["predicted_rows"], "failed": s["failed_rows"],
            "mean_abs_error_pct": round(s["mape_pct"], 2), "median_abs_error_pct": round(statistics.median(errs), 2),
            "max_abs_error_pct": round(s["max_ape_pct"], 2), "worst_run": worst["run_id"]}


BLACKWELL = ("b200", "b300", "gb200", "gb300")


def cross_validation(paths: list[Path]) -> dict[str, Any]:
    rows = load_rows(paths)
    res = cross_validate(rows)
    s = summary(res.results, cv=True)
    moe_ids = {r.run_id for r, _ in rows.rows if r.spec.moe is not None}
    blackwell_ids = {r.run_id for r, _ in rows.rows if r.gpu.startswith(BLACKWELL)}
    per_source: dict[str, list[float]] = {}
    moe: list[float] = []
    blackwell: list[float] = []
    for r in s["rows"]:
        if r["cv_error_pct"] is not None:
            err = abs(r["cv_error_pct"])
            per_source.setdefault(r["source"], []).append(err)
            if r["run_id"] in moe_ids:
                moe.append(err)
            if r["run_id"] in blackwell_ids:
                blackwell.append(err)
    return {"moe_rows": len(moe), "moe_cv_mean_abs_error_pct": round(statistics.fmean(moe), 2) if moe else None,
            "blackwell_rows": len(blackwell),
            "blackwell_cv_mean_abs_error_pct": round(statistics.fmean(blackwell), 2) if blackwell else None,
            "rows": s["predicted_rows"], "failed": s["failed_rows"], "sources": len(res.folds),
            "cv_mean_abs_error_pct": round(s["cv_mape_pct"], 2), "cv_max_abs_error_pct": round(s["cv_max_ape_pct"], 2),
            "in_sample_mean_abs_error_pct": round(s["mape_pct"], 2), "fitted_on_all_rows": res.fitted,
            "cv_mean_abs_error_pct_by_source": {k: round(statistics.fmean(v), 1) for k, v in per_source.items()}}


def fp8_pairs(path: Path) -> dict[str, Any]:
    """End-to-end FP8/BF16 speed-ups of the pairs that differ only in precision: measured vs predicted."""
    rows = {r.run_id: r for r in validate_file(path)}
    pairs = {}
    for rid, f in rows.items():
        b = rows.get(rid[:-4] + "-bf16") if rid.endswith("-fp8") else None
        if b and f.predicted_step_time_s and b.predicted_step_time_s:
            pairs[rid[:-4]] = {"measured": round(b.measured_step_time_s / f.measured_step_time_s, 3),
                               "predicted": round(b.predicted_step_time_s / f.predicted_step_time_s, 3)}
    m, p = [v["measured"] for v in pairs.values()], [v["predicted"] for v in pairs.values()]
    return {"pairs": len(pairs), "measured_min": min(m), "measured_max": max(m), "predicted_min": min(p),
            "predicted_max": max(p), "mean_abs_diff": round(statistics.fmean(abs(a - b) for a, b in zip(m, p, strict=True)), 3),
            "per_pair": pairs}


def mx_pairs(path: Path) -> dict[str, Any]:
    """MXFP8 rows against their FP8-current-scaling (or BF16) twins of the same layout (E9, Blackwell): the
    step-time ratio mxfp8 / other, measured vs predicted. Out of sample for the MXFP8 GEMM rate, which
    is TransformerEngine's B300 kernel measurement (model/data/kernels/fp8_scaling.csv)."""
    rows = {r.run_id: r for r in validate_file(path)}
    pairs = {}
    for rid, mx in rows.items():
        if not rid.endswith("-mxfp8"):
            continue
        for suffix in ("-fp8cs", "-bf16"):
            o = rows.get(rid[:-6] + suffix)
            if o and mx.predicted_step_time_s and o.predicted_step_time_s:
                pairs[rid[:-6] + f" mxfp8/{suffix[1:]}"] = {
                    "measured": round(mx.measured_step_time_s / o.measured_step_time_s, 3),
                    "predicted": round(mx.predicted_step_time_s / o.predicted_step_time_s, 3)}
    cs = [v for k, v in pairs.items() if k.endswith("fp8cs")]
    diffs = [100 * abs(v["predicted"] / v["measured"] - 1) for v in pairs.values()]
    return {"pairs": len(pairs), "fp8cs_pairs": len(cs), "fp8cs_measured_min": min(v["measured"] for v in cs),
            "fp8cs_measured_max": max(v["measured"] for v in cs), "fp8cs_predicted_min": min(v["predicted"] for v in cs),
            "fp8cs_predicted_max": max(v["predicted"] for v in cs), "max_rel_diff_pct": round(max(diffs), 1),
            "per_pair": pairs}


def memory(path: Path) -> dict[str, Any]:
    checks = check_file(path)
    errs = [abs(c.error_pct) for c in checks]
    eager = [abs(c.error_pct) for c in checks if not c.compiled]
    held_out = [abs(c.error_pct) for c in checks if c.run_id.startswith("ZB24-")]  # added after the model was built
    return {"held_out_rows": len(held_out), "held_out_mean_abs_error_pct": round(statistics.fmean(held_out), 1),
            "rows": len(checks), "mean_abs_error_pct": round(statistics.fmean(errs), 1),
            "max_abs_error_pct": round(max(errs), 1), "eager_rows": len(eager),
            "eager_mean_abs_error_pct": round(statistics.fmean(eager), 1) if eager else None}


# E8's Mixtral 8x22B (128 H100, EP 8, one expert per rank), fine-tuned from the Mixtral checkpoint with the
# script's aux loss at 1e-2: ~465 TFLOP/s per GPU with forced balance, ~445 without (the row's notes,
# best_practice/mixtral/run_mixtral_8x22B.sh): the published cost of its learned router's imbalance
MIXTRAL_FORCED_TFLOPS, MIXTRAL_LEARNED_TFLOPS = 465.0, 445.0


def routing_pair(path: Path) -> dict[str, Any]:
    """The Mixtral pair's step-time ratio (learned router / forced balance), published and predicted
    under each balancing policy (model/routing.py); nothing in the routing model was fitted to it."""
    row = next(r for r, _ in load_rows([path]).rows if r.run_id == "E8-Mixtral8x22B-balanced-bf16")
    forced = predict_row(row).predicted_step_time_s
    out: dict[str, Any] = {"published": round(MIXTRAL_FORCED_TFLOPS / MIXTRAL_LEARNED_TFLOPS, 3)}
    for b in (MoeBalance.AUX_FREE, MoeBalance.AUX_LOSS):
        t = predict_row(dataclasses.replace(row, moe_balance=b)).predicted_step_time_s
        assert t is not None and forced is not None
        out[b.value.replace("-", "_")] = round(t / forced, 3)
    return out


PUBLISHED = REPO / "data/validation/published_runs.csv"
EVIDENCE = REPO / "data/evidence/training_runs.csv"


def printed_flags(path: Path) -> dict[str, Any]:
    """Published plans given only their printed flags (validate/printed.py), beside the harness's search."""
    rows = [parse_row(raw, line) for line, raw in read_rows(path)]
    errs = [abs(printed_error_pct(r)) for r in rows]
    return {"rows": len(rows), "mean_abs_error_pct": round(statistics.mean(errs), 2),
            "max_abs_error_pct": round(max(errs), 2)}


def main() -> None:
    save("accuracy", {
        "published_printed_flags": printed_flags(PUBLISHED),
        "cross_validation": cross_validation([PUBLISHED, EVIDENCE]),
        "cross_validation_published_only": cross_validation([PUBLISHED]),
        "published_in_sample": step_time(PUBLISHED),
        "evidence_in_sample": step_time(EVIDENCE),
        "fp8_pairs": fp8_pairs(EVIDENCE),
        "routing_pair": routing_pair(EVIDENCE),
        "mx_pairs": mx_pairs(EVIDENCE),
        "memory": memory(REPO / "data/evidence/memory_runs.csv"),
    })


if __name__ == "__main__":
    main()
