"""The evidence envelope: the highest MFU any published run measured, per device and precision.

A prediction above it is outside what any run in `data/validation/published_runs.csv` or
`data/evidence/training_runs.csv` reached on that hardware, so `plan` and `estimate` say so (issue 9:
"a prediction outside the evidence should be flagged"). Measured MFU of a row = the estimator's model
FLOPs of the row's plan / (measured step time x GPUs x dense peak), i.e. predicted MFU x predicted /
measured step time. The table is generated (`build`) into model/data/evidence_envelope.json; a test
checks it equals a rebuild from the CSVs.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

from distscope.dtypes import Precision
from distscope.plan import Plan

MARGIN = 0.02  # MFU points above the best measured before a prediction is flagged


def build(paths: Sequence[str | Path]) -> dict[str, dict[str, object]]:
    """`device/precision` -> {"mfu": best measured MFU, "run_id": the run that reached it}."""
    from distscope.validate.harness import validate_file

    best: dict[str, dict[str, object]] = {}
    for path in paths:
        for r in validate_file(path):
            if r.estimate is None or r.plan is None or not r.predicted_step_time_s:
                continue
            mfu = r.estimate.mfu * r.predicted_step_time_s / r.measured_step_time_s
            key = _key_of(r.run_id, path, r.plan)
            if key not in best or mfu > float(best[key]["mfu"]):  # type: ignore[arg-type]
                best[key] = {"mfu": round(mfu, 4), "run_id": r.run_id}
    return dict(sorted(best.items()))


def _key_of(run_id: str, path: str | Path, plan: Plan) -> str:
    import csv

    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            if (row.get("run_id") or "").strip() == run_id:
                return f"{row['gpu'].strip().lower()}/{_family(plan.precision.value)}"
    return f"?/{_family(plan.precision.value)}"


def _family(precision: str) -> str:
    """fp16 and bf16 run at one tensor-core rate on every device here: one envelope for both; the FP8
    recipes share the FP8 rate (fp8), NVFP4 the FP4 rate (fp4)."""
    p = Precision.parse(precision)
    return p.gemm_dtype.value if p.low_precision else "16-bit"


@functools.cache
def _table() -> dict[str, dict[str, object]]:
    text = resources.files("distscope.model").joinpath("data/evidence_envelope.json").read_text()
    data: dict[str, dict[str, object]] = json.loads(text)["envelope"]
    return data


def outside(device: str, precision: str, mfu: float) -> str | None:
    """A one-line warning when `mfu` exceeds the best measured on this device and precision, else None."""
    top = _table().get(f"{device}/{_family(precision)}")
    if top is None:
        return (f"no published run on {device} in {precision} to check against: predicted MFU {mfu:.0%} is "
                "outside the evidence")
    best = float(top["mfu"])  # type: ignore[arg-type]
    if mfu > best + MARGIN:
        return (f"predicted MFU {mfu:.0%} is above the best any published run measured on {device} in {precision} "
                f"({best:.0%}, {top['run_id']}): outside the evidence, treat it as optimistic")
    return None
