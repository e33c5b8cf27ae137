"""Fit the estimator's few global parameters (model/efficiency.py CALIBRATION) to validation rows, fast
enough to refit once per cross-validation fold.

Everything component-level (GEMM ceilings, attention kernels, links) comes from kernel and collective
benchmarks; end-to-end runs only set the bounded globals efficiency.BOUNDS names (σ: sustained share of
benchmarked kernel throughput; κ: GEMM saturation; ρ: compute slowdown per second of hidden
communication; π: speed of PyTorch-native stacks' attention and element-wise kernels relative to fused ones).

A cached fit: each row's `auto` cells are resolved once at the prior parameters (the plan is then
frozen), its step time is evaluated on a small grid of parameter values, and a trial is a vectorized
multilinear interpolation of log(step time) on that grid (scipy RegularGridInterpolator), so a fit
over any subset of rows costs milliseconds. The objective is a robust (soft-L1) least-squares fit of
log(predicted / measured); predictions reported for a fitted parameter set re-run the full model
with `auto` cells re-resolved (harness.predict_row), never the surrogate.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator, Sequence

import numpy as np

from distscope.model import efficiency as eff
from distscope.model.estimate import clear_cost_cache, estimate
from distscope.model.layer import head_cost, layer_cost
from distscope.plan import Plan
from distscope.software.presets import KernelStack
from distscope.system.topology import Cluster
from distscope.validate.rows import Row
from distscope.workload.training import TrainingShape

FITTED: tuple[str, ...] = ("sustained", "kappa", "overlap_cost", "pytorch_stack")
# Grid per parameter (κ on a log axis: its effect is m/(m + κ·balance); π divides attention and
# element-wise time, so log(step) is close to linear in log π as well).
GRID_POINTS = {"sustained": 5, "kappa": 5, "overlap_cost": 4, "pytorch_stack": 4}
LOG_AXES = ("kappa", "pytorch_stack")


def clear_caches() -> None:
    layer_cost.cache_clear()
    head_cost.cache_clear()
    clear_cost_cache()


@contextlib.contextmanager
def calibrated(values: dict[str, float]) -> Iterator[None]:
    """Run with these global parameters installed, then restore the previous ones."""
    saved = dict(eff.CALIBRATION)
    eff.set_calibration(values)
    clear_caches()
    try:
        yield
    finally:
        eff.set_calibration(saved)
        clear_caches()


@dataclasses.dataclass(frozen=True, kw_only=True)
class FrozenRow:
    """A row with its `auto` cells resolved: the plan the surrogate evaluates."""

    row: Row
    cluster: Cluster
    plan: Plan

    def step_s(self) -> float:
        shape = TrainingShape(seq_len=self.row.seq_len, global_batch=self.row.global_batch)
        return estimate(self.row.spec, shape, self.cluster, self.plan, software=self.row.software).step_time_s


def _axes() -> list[np.ndarray]:
    out = []
    for name in FITTED:
        lo, hi = eff.BOUNDS[name]
        n = GRID_POINTS[name]
        out.append(np.linspace(np.log(lo), np.log(hi), n) if name in LOG_AXES else np.linspace(lo, hi, n))
    return out


def _to_axis(name: str, v: float) -> float:
    return float(np.log(v)) if name in LOG_AXES else v


@dataclasses.dataclass(frozen=True)
class Surrogate:
    """log(step time) of each frozen row on the parameter grid, interpolated multilinearly."""

    axes: tuple[np.ndarray, ...]
    log_step: np.ndarray  # shape (*grid, rows)
    pi_rows: np.ndarray  # bool per row: does π move it (a PyTorch-native kernel stack)

    def __call__(self, values: Sequence[float]) -> np.ndarray:
        from scipy.interpolate import RegularGridInterpolator

        interp = RegularGridInterpolator(self.axes, self.log_step)
        pt = [_to_axis(n, v) for n, v in zip(FITTED, values, strict=True)]
        return np.asarray(interp(np.array([pt]))[0])


def _moved_by_pi(f: FrozenRow) -> bool:
    """Only rows of a PyTorch-native kernel stack depend on π (efficiency.PYTORCH_STACK)."""
    return f.row.software.kernels is KernelStack.PYTORCH


def build_surrogate(frozen: Sequence[FrozenRow], on_point: Callable[[], None] | None = None) -> Surrogate:
    axes = _axes()
    shape = tuple(len(a) for a in axes)
    out = np.empty((*shape, len(frozen)))
    pi = FITTED.index("pytorch_stack")
    moved = [i for i, f in enumerate(frozen) if _moved_by_pi(f)]
    for idx in np.ndindex(*shape):
        vals = {n: float(np.exp(axes[i][j]) if n in LOG_AXES else axes[i][j])
                for i, (n, j) in enumerate(zip(FITTED, idx, strict=True))}
        with calibrated(vals):
            if idx[pi] == 0:
                out[idx] = [np.log(f.step_s()) for f in frozen]
            else:  # rows of fused stacks do not move along the π axis: copy them from its first point
                out[idx] = out[(*idx[:pi], 0, *idx[pi + 1:])]
                out[idx][moved] = [np.log(frozen[i].step_s()) for i in moved]
        if on_point is not None:
            on_point()
    pi_rows = np.zeros(len(frozen), dtype=bool)
    pi_rows[moved] = True
    return Surrogate(axes=tuple(axes), log_step=out, pi_rows=pi_rows)


def fit(surrogate: Surrogate, measured_s: np.ndarray, rows: np.ndarray | None = None) -> dict[str, float]:
    """Bounded robust least squares of log(predicted/measured) over `rows` (indices; default all). A
    parameter no training row depends on (π without a PyTorch-native row) keeps its prior."""
    from scipy.optimize import least_squares

    idx = np.arange(len(measured_s)) if rows is None else rows
    target = np.log(measured_s[idx])
    free = [n for n in FITTED if n != "pytorch_stack" or surrogate.pi_rows[idx].any()]
    fixed = {n: eff.PRIORS[n] for n in FITTED if n not in free}
    lo = [eff.BOUNDS[n][0] for n in free]
    hi = [eff.BOUNDS[n][1] for n in free]
    x0 = np.clip([eff.CALIBRATION[n] for n in free], lo, hi)

    def values(x: np.ndarray) -> list[float]:
        got = dict(zip(free, x, strict=True))
        return [float(got[n]) if n in got else fixed[n] for n in FITTED]

    res = least_squares(lambda x: surrogate(values(x))[idx] - target, x0, bounds=(lo, hi), loss="soft_l1",
                        f_scale=0.03, x_scale=np.array(hi) - np.array(lo))
    return dict(zip(FITTED, values(res.x), strict=True))
