"""Fit the alpha-beta (latency-bandwidth, Hockney) model t(S) = alpha + beta * S per (level, op).

S is the message size in nccl-tests bytes (see `distscope.comm.collective`) at the measured rank count, so
beta folds in the algorithm factor: beta = factor(n) / busbw_peak. The fit is least squares on relative
residuals, minimising sum_i ((alpha + beta S_i - t_i) / t_i)^2, i.e. rows of [1, S_i] / t_i against 1,
so small-message latency and large-message bandwidth weigh alike. When the unconstrained optimum has a
negative alpha or beta, that parameter is pinned to 0 and the other refitted (alpha, beta >= 0).
Quality: max_i |t_pred - t_i| / t_i over the points fitted.

Which time: `stat="median"` (default, the reported time_s) or `stat="min"` (the fastest iteration). On a
shared or oversubscribed host (CI: 4 ranks on 2 cores) interference only ever adds time, so the minimum
is the steadier estimate of what the system itself costs.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Iterable, Sequence

import numpy as np

from distscope.comm.collective import Collective
from distscope.errors import DistscopeError
from distscope.measure.profile import OpFit, SystemProfile
from distscope.measure.result import CollectiveResult


@dataclasses.dataclass(frozen=True, kw_only=True)
class AlphaBeta:
    alpha_s: float
    beta_s_per_byte: float

    def time_s(self, size_bytes: int | float) -> float:
        return self.alpha_s + self.beta_s_per_byte * size_bytes


def fit_alpha_beta(sizes_bytes: Sequence[float], times_s: Sequence[float]) -> AlphaBeta:
    s = np.asarray(sizes_bytes, dtype=float)
    t = np.asarray(times_s, dtype=float)
    if s.shape != t.shape or s.size < 2:
        raise DistscopeError(f"calibration needs >= 2 (size, time) points, got {s.size}")
    if np.any(t <= 0):
        raise DistscopeError("calibration times must be > 0")
    w = 1.0 / t
    a_mat = np.stack([w, s * w], axis=1)
    (alpha, beta), *_ = np.linalg.lstsq(a_mat, np.ones_like(t), rcond=None)
    if beta < 0:  # latency-bound sweep: t ~ alpha; the relative-LS optimum of a constant
        alpha, beta = float(np.sum(w) / np.sum(w * w)), 0.0
    elif alpha < 0:  # bandwidth-bound sweep: t ~ beta S
        x = s * w
        alpha, beta = 0.0, float(np.sum(x) / np.sum(x * x))
    return AlphaBeta(alpha_s=float(alpha), beta_s_per_byte=float(beta))


def max_rel_error(fit: AlphaBeta, sizes_bytes: Sequence[float], times_s: Sequence[float]) -> float:
    return max(abs(fit.time_s(sz) - t) / t for sz, t in zip(sizes_bytes, times_s, strict=True))


STATS = ("median", "min")


def calibrate(
    results: Iterable[CollectiveResult],
    *,
    name: str,
    device: str = "",
    source: str = "",
    stat: str = "median",
) -> SystemProfile:
    """One OpFit per (level, op, dtype) from the out-of-place results (nranks must be constant per
    triple): a sweep of several dtypes is never fitted as one line (gloo's float16 all-reduce moves half
    the bytes per second of its float32 one). "levels" takes float32's fits, `by_dtype` keeps each."""
    if stat not in STATS:
        raise DistscopeError(f"stat={stat!r} must be one of {', '.join(STATS)}")
    by_key: dict[tuple[str, Collective, str], list[CollectiveResult]] = defaultdict(list)
    for r in results:
        if not r.in_place:
            by_key[(r.level, r.op, r.dtype)].append(r)
    if not by_key:
        raise DistscopeError("calibration got no (out-of-place) results")
    by_dtype: dict[str, dict[str, dict[Collective, OpFit]]] = defaultdict(lambda: defaultdict(dict))
    for (level, op, dtype), rs in sorted(by_key.items(), key=lambda kv: (kv[0][0], kv[0][1].value, kv[0][2])):
        nr = {r.nranks for r in rs}
        if len(nr) != 1:
            raise DistscopeError(
                f"level={level} op={op.value} dtype={dtype} mixes nranks {sorted(nr)}; calibrate each apart"
            )
        rs = sorted(rs, key=lambda r: r.bytes)
        sizes = [r.bytes for r in rs]
        times = [r.time_s if stat == "median" else r.time_min_s for r in rs]
        fit = fit_alpha_beta(sizes, times)
        by_dtype[dtype][level][op] = OpFit(
            alpha_s=fit.alpha_s,
            beta_s_per_byte=fit.beta_s_per_byte,
            max_rel_err=max_rel_error(fit, sizes, times),
            n_points=len(rs),
            min_bytes=sizes[0],
            max_bytes=sizes[-1],
            nranks=nr.pop(),
            dtype=dtype,
        )
    # one dtype per (level, op) in "levels": float32 where it was swept (a sweep's default), else the first
    levels: dict[str, dict[Collective, OpFit]] = defaultdict(dict)
    for dtype in sorted(by_dtype, key=lambda d: (d != "float32", d)):
        for level, ops in by_dtype[dtype].items():
            for op, op_fit in ops.items():
                levels[level].setdefault(op, op_fit)
    extra = {dt: {lv: dict(ops) for lv, ops in lvs.items()} for dt, lvs in by_dtype.items()} if len(by_dtype) > 1 else {}
    return SystemProfile(name=name, device=device, source=source, levels=dict(levels), by_dtype=extra)
