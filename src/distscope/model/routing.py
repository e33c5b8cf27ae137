"""Routing imbalance: the load of the busiest expert-parallel rank over the mean, for top-k routing.

Every MoE layer ends in an all-to-all, so the rank whose experts received the most tokens sets the
pace of the layer: its grouped GEMMs are the longest and it receives the most bytes. Over n = ep ranks
holding g = E/n experts each, rank r's share of the k·N routed copies of one dispatch (N tokens routed
by the EP group) deviates from the mean 1/n by

    D_r = (mean over its g experts of δ_i) + (sampling noise of N finite tokens)

  - δ_i, the routing policy's own skew: expert i's expected load over the mean, less one, with spread
    c over the experts (the policy's load coefficient of variation, from MAX_VIO). Experts are
    placed on ranks without regard to their load, so the mean of g of them has variance
    c²/g · (E − g)/(E − 1) (sampling without replacement: the deviations sum to zero).
  - sampling: each token puts Hypergeometric(E, g, k) of its k distinct experts on rank r, so over N
    tokens the share's relative variance is n · (1 − 1/n) · (E − k)/(E − 1) / (N·k).

The D_r sum to zero over the ranks. For zero-sum normal deviations of variance σ² the expected maximum
is σ · z(n) / sqrt(1 − 1/n), with z(n) = E[max of n iid N(0, 1)] (X_r = Y_r − Ȳ, Y iid), so

    R = 1 + z(n) / sqrt(1 − 1/n) · sqrt(c²/g · (E − g)/(E − 1) + n(1 − 1/n)(E − k)/((E − 1)·N·k))

and under a capacity factor f the busiest expert keeps at most f times the mean: min(R, f) (f < 1:
every expert is cut to f, the routed share model/moe.py always priced).

The same formula read per expert (g = 1, n = E, no sampling) gives a published statistic, MaxVio
(Wang et al. 2024, "Auxiliary-Loss-Free Load Balancing Strategy for Mixture-of-Experts", arXiv
2408.15664: max_i load_i / mean − 1), as MaxVio = c · z(E) / sqrt(1 − 1/E); expert_load_cv inverts it,
so c comes from the measured MaxVio of each balancing policy (MAX_VIO), not from a fit.
"""

from __future__ import annotations

import functools
import math

from distscope.plan import MoeBalance, Plan
from distscope.workload.spec import ModelSpec

# The measured skew of each policy, as (MaxVio, routed experts it was measured over). Wang et al. 2024
# (arXiv 2408.15664), Table 2: MaxVio_global (load counted over the ~71M-token validation set, so sampling
# noise is negligible: the policy's own skew), averaged over the MoE layers, of DeepSeekMoE models with 64
# routed experts, top-6, sigmoid gate: auxiliary loss at α = 1e-3, 0.72 (1B) and 0.52 (3B), taken as their
# mean 0.62; loss-free balancing 0.04 at both sizes. (Its Table 6, softmax gate at α = 3e-4: 0.937 and 0.027.)
# The paper's per-batch MaxVio is plotted only (Figs. 3-5), so the batch-to-batch drift of the skew is not
# priced: the busiest rank here is a lower bound where training batches differ in domain mix.
MAX_VIO: dict[MoeBalance, tuple[float, int]] = {
    MoeBalance.FORCED: (0.0, 1),
    MoeBalance.AUX_FREE: (0.04, 64),
    MoeBalance.AUX_LOSS: (0.62, 64),
}


@functools.lru_cache(maxsize=256)
def normal_max_mean(n: int) -> float:
    """z(n) = E[max of n iid standard normals] = ∫ x · n φ(x) Φ(x)^(n−1) dx (trapezoid on [−9, 9])."""
    if n <= 1:
        return 0.0
    steps, lo, hi = 3600, -9.0, 9.0
    h = (hi - lo) / steps
    total = 0.0
    for i in range(steps + 1):
        x = lo + i * h
        phi = math.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)
        cdf = 0.5 * (1.0 + math.erf(x / math.sqrt(2)))
        w = 0.5 if i in (0, steps) else 1.0
        total += w * x * n * phi * cdf ** (n - 1)
    return total * h


def _zero_sum_max(n: int) -> float:
    """E[max_r D_r] / σ for n zero-sum normal deviations of variance σ² each."""
    return normal_max_mean(n) / math.sqrt(1.0 - 1.0 / n) if n > 1 else 0.0


def expert_load_cv(max_vio: float, experts: int) -> float:
    """c from a measured MaxVio over `experts` experts: MaxVio = c · z(E) / sqrt(1 − 1/E) inverted."""
    if max_vio <= 0 or experts <= 1:
        return 0.0
    return max_vio / _zero_sum_max(experts)


@functools.lru_cache(maxsize=4096)
def busiest_rank_load(experts: int, top_k: int, ep: int, tokens: float, balance: MoeBalance) -> float:
    """R, the expected load of the busiest of `ep` ranks over the mean, when the EP group routes
    `tokens` tokens to `top_k` of `experts` experts under `balance` (module docstring). 1 without EP."""
    if ep <= 1 or experts <= 1:
        return 1.0
    g = experts / ep
    vio, measured_over = MAX_VIO[balance]
    c = expert_load_cv(vio, measured_over)
    skew = c * c / g * (experts - g) / (experts - 1)
    k = min(top_k, experts)
    sampling = ep * (1 - 1 / ep) * (experts - k) / ((experts - 1) * max(tokens, 1.0) * k)
    return 1.0 + _zero_sum_max(ep) * math.sqrt(skew + sampling)


def routed_load(spec: ModelSpec, plan: Plan, tokens: float) -> float:
    """The routed copies the busiest EP rank's experts process per micro-batch over the balanced share:
    R (busiest_rank_load) under the plan's balancing policy, capped by a capacity factor f at min(R, f)
    (f < 1 drops every expert to f). `tokens`: one rank's tokens per micro-batch (b·s/cp); each rank of
    the EP group dispatches its sequence-parallel shard of them (model/moe.py)."""
    assert spec.moe is not None
    routed = (tokens / plan.tp if plan.sp else tokens) * plan.ep
    r = busiest_rank_load(spec.moe.experts, spec.moe.top_k, plan.ep, routed, plan.balance)
    cf = plan.capacity_factor
    return r if cf is None else min(r, cf)
