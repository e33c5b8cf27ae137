"""Leave-one-source-out cross-validation (`distscope validate FILE... --cv source`).

Rows are grouped by their `source` cell. For each group the global parameters (calibration.py) are
refitted on every other group's rows, starting from the priors (efficiency.PRIORS: nothing fitted on
any row), and the group is predicted with the full model at those parameters. The in-sample
prediction of every row uses parameters fitted on all rows. Component data (kernels, links) is never
fitted to runs, so nothing else needs refitting.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from distscope.errors import DistscopeError
from distscope.measure.profile import SystemProfile
from distscope.model import efficiency as eff
from distscope.validate.calibration import FrozenRow, build_surrogate, calibrated, fit
from distscope.validate.harness import LoadedRows, RowResult, predict_or_fail, row_cluster

GROUPINGS = ("source",)


@dataclasses.dataclass(frozen=True, kw_only=True)
class CvResult:
    results: list[RowResult]
    fitted: dict[str, float]  # on all rows
    folds: dict[str, dict[str, float]]  # held-out source -> parameters fitted without it


def cross_validate(loaded: LoadedRows, profile: SystemProfile | None = None,
                   tick: Callable[[], None] | None = None) -> CvResult:
    on = tick or (lambda: None)
    rows = loaded.rows
    # 1. resolve each row's `auto` cells once at the priors and freeze its plan
    frozen: list[FrozenRow] = []
    keep: list[int] = []
    with calibrated(eff.PRIORS):
        for i, (row, _) in enumerate(rows):
            r = predict_or_fail(row, "", profile)
            if r.plan is not None and not r.error:
                frozen.append(FrozenRow(row=row, cluster=row_cluster(row, profile), plan=r.plan))
                keep.append(i)
            on()
    if not frozen:
        raise DistscopeError("--cv: no row could be predicted, nothing to fit")
    # 2. the cached fit: step time of every frozen row on the parameter grid
    surrogate = build_surrogate(frozen, on_point=on)
    measured = np.array([f.row.measured_step_time_s for f in frozen])
    sources = np.array([rows[i][1] for i in keep])
    fitted = fit(surrogate, measured)
    folds: dict[str, dict[str, float]] = {}
    for src in dict.fromkeys(s for _, s in rows):
        train = np.flatnonzero(sources != src)
        folds[src] = fit(surrogate, measured, train) if len(train) else dict(eff.PRIORS)
    # 3. predictions with the full model (auto cells re-resolved) at each parameter set
    with calibrated(fitted):
        insample = []
        for row, src in rows:
            insample.append(predict_or_fail(row, src, profile))
            on()
    by_source: dict[str, list[int]] = {}
    for i, (_, src) in enumerate(rows):
        by_source.setdefault(src, []).append(i)
    out = list(insample)
    for src, idx in by_source.items():
        with calibrated(folds[src]):
            for i in idx:
                cv = predict_or_fail(rows[i][0], src, profile)
                out[i] = dataclasses.replace(out[i], cv_predicted_step_time_s=cv.predicted_step_time_s)
                on()
    return CvResult(results=loaded.in_file_order(out), fitted=fitted, folds=folds)


def cv_work(loaded: LoadedRows) -> int:
    """Progress units cross_validate reports (rows x 3 passes + grid points)."""
    from distscope.validate.calibration import GRID_POINTS

    return 3 * len(loaded.rows) + int(np.prod(list(GRID_POINTS.values())))
