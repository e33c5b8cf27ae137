"""Flow-level transfer of a set of flows on routed links: max-min fair rates, completion times.

Rates (no congestion control: the ideal a CC scheme converges to) are max-min fair by progressive
filling (Bertsekas & Gallager, Data Networks, sec. 6.5.2): every unfrozen flow's rate rises together until
a link saturates; the flows on it freeze. A flow puts `fraction` of its rate on each link of its route
(spraying splits it), so the link constraint is sum_f A[l, f] * r_f <= c_l. Each step is two sparse
matrix-vector products; the number of steps is the number of distinct bottleneck levels.

Completion: all flows start together; rates are recomputed whenever a flow ends (fluid model). The
result carries each flow's completion time and the bytes each link carried. Without per-flow times
(`fct=False`) the makespan is the congestion bound max_l bytes_l / c_l (Ethereal's "maximum
congestion", arXiv 2407.00550), a lower bound on any schedule's makespan that the fluid run of equal,
simultaneous flows meets exactly on every pattern tested (tests/fabric: hypothesis over random fabrics);
it costs one sparse product instead of an event per distinct finish time (~500 for an all-to-all).
"""

from __future__ import annotations

import dataclasses

import numpy as np
from scipy.sparse import csc_matrix, csr_matrix

_EPS = 1e-9
# Links within this relative margin of the tightest one freeze in the same filling step, and flows due
# within it of the next completion end in the same event: an allocation within 1% of the exact max-min
# one, in tens of steps instead of hundreds for an all-to-all's many fair-share levels.
TOL = 0.01


def max_min_rates(a: csr_matrix, at: csr_matrix, cap: np.ndarray, active: np.ndarray, tol: float = TOL) -> np.ndarray:
    """Max-min fair rate (B/s) of each flow; `a` is links x flows (fractions), `at` its transpose,
    `active` a boolean mask of the flows that still send."""
    rate = np.zeros(a.shape[1])
    free = active.astype(float)
    left = cap.astype(float).copy()
    while free.any():
        per = a @ free  # each link's sum of fractions of the unfrozen flows
        used = per > _EPS
        if not used.any():
            break  # unfrozen flows that touch no link (empty routes): unbounded, left at 0 (callers skip them)
        inc = np.full_like(left, np.inf)
        inc[used] = np.maximum(left[used], 0.0) / per[used]
        t = inc.min()
        rate += t * free
        left -= t * per
        tight = used & (inc <= t * (1 + tol) + _EPS)
        frozen = (at @ tight.astype(float)) > 0
        free[frozen] = 0.0
    return rate


@dataclasses.dataclass(frozen=True, kw_only=True)
class FlowResult:
    finish_s: np.ndarray  # per flow: completion time (transfer only; add path latency separately)
    link_bytes: np.ndarray  # per link: bytes carried
    makespan_s: float
    events: int


def transfer(links: np.ndarray, flows: np.ndarray, fracs: np.ndarray, sizes_bytes: np.ndarray,
             cap_Bps: np.ndarray, *, fct: bool = True) -> FlowResult:
    """Run flows of `sizes_bytes` (all starting at 0) over routes given as COO triplets to completion;
    with fct=False only the makespan (the congestion bound, module docstring) and the link bytes."""
    n_links, n_flows = len(cap_Bps), len(sizes_bytes)
    a = csr_matrix((fracs, (links, flows)), shape=(n_links, n_flows))
    if not fct:
        link_bytes = np.asarray(a @ sizes_bytes.astype(float)).ravel()
        span = float((link_bytes / cap_Bps).max(initial=0.0))
        return FlowResult(finish_s=np.full(n_flows, np.nan), link_bytes=link_bytes, makespan_s=span, events=0)
    at = csr_matrix(csc_matrix(a).T)
    remaining = sizes_bytes.astype(float).copy()
    routed = np.asarray((at @ np.ones(n_links)) > 0).ravel()
    active = (remaining > 0) & routed
    finish = np.zeros(n_flows)
    now = 0.0
    events = 0
    while active.any():
        rate = max_min_rates(a, at, cap_Bps, active)
        with np.errstate(divide="ignore"):
            eta = np.where(active & (rate > 0), remaining / np.where(rate > 0, rate, 1.0), np.inf)
        dt = eta.min()
        if not np.isfinite(dt):
            raise RuntimeError("flows without a positive rate")  # unreachable: every routed flow gets one
        now += dt
        remaining -= rate * dt
        done = active & ((remaining <= _EPS * np.maximum(sizes_bytes, 1.0)) | (eta <= dt * (1 + TOL)))
        finish[done] = now
        active &= ~done
        events += 1
    link_bytes = a @ sizes_bytes.astype(float)
    return FlowResult(finish_s=finish, link_bytes=np.asarray(link_bytes).ravel(), makespan_s=float(finish.max(initial=0.0)),
                      events=events)
