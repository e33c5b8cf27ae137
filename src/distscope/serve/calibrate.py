"""Fit the serving calibration's few global parameters (calibration.py) and cross-validate them.

Objective: the mean over metrics (throughput, TTFT, TPOT) of each metric's mean absolute percentage
error, over every predicted row. Search: bounded coordinate descent, a golden-section line search per
parameter (numpy only; the core must not need scipy), two sweeps from the stored prior.
Cross-validation: for each source_id, fit on the other sources and predict the held-out one.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from distscope.errors import DistscopeError
from distscope.serve import calibration
from distscope.serve.calibration import BOUNDS, FITTED, ServeCalibration
from distscope.serve.rows import ServingRow
from distscope.serve.validate import mape, report

_GOLDEN = (math.sqrt(5) - 1) / 2


def _with(cal: ServeCalibration, name: str, value: float) -> ServeCalibration:
    values: dict[str, Any] = {name: value}
    return dataclasses.replace(cal, **values)


def objective(rows: Sequence[ServingRow], cal: ServeCalibration) -> float:
    with calibration.using(cal):
        rep = report(rows)
    m = rep["mape_pct"]
    return float(np.mean(list(m.values()))) if m else math.inf


def fit(rows: Sequence[ServingRow], start: ServeCalibration | None = None, sweeps: int = 2, evals: int = 10,
        progress: Callable[[], None] | None = None) -> ServeCalibration:
    cal = start or ServeCalibration()  # the priors, never a stored fit (CV folds must not see it)
    best = objective(rows, cal)
    for _ in range(sweeps):
        for name in FITTED:
            lo, hi = BOUNDS[name]
            a, b = lo, hi
            c, d = b - _GOLDEN * (b - a), a + _GOLDEN * (b - a)
            fc = objective(rows, _with(cal, name, c))
            fd = objective(rows, _with(cal, name, d))
            for _ in range(evals):
                if fc < fd:
                    b, d, fd = d, c, fc
                    c = b - _GOLDEN * (b - a)
                    fc = objective(rows, _with(cal, name, c))
                else:
                    a, c, fc = c, d, fd
                    d = a + _GOLDEN * (b - a)
                    fd = objective(rows, _with(cal, name, d))
                if progress:
                    progress()
            x, fx = (c, fc) if fc < fd else (d, fd)
            if fx < best:
                best, cal = fx, _with(cal, name, x)
    return dataclasses.replace(cal, source=f"fit over {len(rows)} rows: objective {best:.2f}%")


def cross_validate(rows: Sequence[ServingRow], key: str = "source_id", progress: Callable[[], None] | None = None,
                   **fit_kw: Any) -> dict[str, Any]:
    """Leave-one-group-out: rows[...] predicted with parameters fitted without their group, CV MAPE per
    metric and per group, and each fold's fitted values."""
    if key != "source_id":
        raise DistscopeError(f"--cv={key!r}: only source_id is supported")
    groups = sorted({r.source_id for r in rows if any(k not in r.skip for k in r.measured)})
    if len(groups) < 2:
        raise DistscopeError(f"--cv source_id needs rows from at least 2 sources; got {len(groups)}")
    cv_rows: list[dict[str, Any]] = []
    folds: dict[str, dict[str, float]] = {}
    for g in groups:
        train = [r for r in rows if r.source_id != g]
        test = [r for r in rows if r.source_id == g]
        cal = fit(train, progress=progress, **fit_kw)
        folds[g] = {k: getattr(cal, k) for k in FITTED}
        with calibration.using(cal):
            cv_rows += report(test)["rows"]
    m = mape(cv_rows)
    return {"cv_rows": cv_rows, "cv_mape_pct": m["mape_pct"], "cv_max_ape_pct": m["max_ape_pct"],
            "cv_mape_pct_by_source": m["mape_pct_by_source"], "cv_folds": folds}
