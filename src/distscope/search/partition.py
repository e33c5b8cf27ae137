"""Optimal pipeline partitioning: split a layer sequence into contiguous stages minimising the slowest.

The pipeline's steady state runs at the pace of its slowest stage (m·t_max dominates
m·t_max + (Σt − t_max)/vp), so the split that minimises max_k t_k is the one to use. With per-layer
costs c_1..c_n, a first-stage extra E (embedding) and a last-stage extra H (LM head + loss), the
exact min-max contiguous partition into K parts is the dynamic program of PipeDream (Narayanan et
al. 2019, §3.1) restricted to a linear chain, the exact formulation of Tarnawski et al. 2020:

    B[1][j] = E + P[j] (+ H if K = 1 and j = n)
    B[k][j] = min_{k-1 <= i < j} max(B[k-1][i], P[j] − P[i] (+ H if k = K and j = n))

with prefix sums P. O(K·n²), vectorised over i with numpy (n ~ 100-130 layers, K <= 128 chunks:
well under a millisecond per row). Optional per-part capacities (`max_items`, e.g. what a stage's
memory can hold) restrict the segment lengths.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from distscope.errors import DistscopeError


@dataclasses.dataclass(frozen=True, kw_only=True)
class Partition:
    sizes: tuple[int, ...]  # items per part, in order
    bottleneck_s: float  # cost of the slowest part


def part_costs(costs: Sequence[float], sizes: Sequence[int], first_extra: float = 0.0,
               last_extra: float = 0.0) -> list[float]:
    """Cost of each part of a split (the objective the DP minimises the max of)."""
    out, start = [], 0
    for n in sizes:
        out.append(float(sum(costs[start:start + n])))
        start += n
    out[0] += first_extra
    out[-1] += last_extra
    return out


def min_max_partition(costs: Sequence[float], parts: int, *, first_extra: float = 0.0, last_extra: float = 0.0,
                      max_items: Sequence[int] | None = None) -> Partition:
    """Exact min-max contiguous partition of `costs` into `parts` non-empty parts (module docstring)."""
    n = len(costs)
    if parts < 1 or parts > n:
        raise DistscopeError(f"parts={parts} must be in 1..{n} (one layer per part at least)")
    if any(c < 0 for c in costs) or first_extra < 0 or last_extra < 0:
        raise DistscopeError("layer costs and extras must be >= 0")
    cap = list(max_items) if max_items is not None else [n] * parts
    if len(cap) != parts:
        raise DistscopeError(f"max_items has {len(cap)} entries, need parts={parts}")
    P = np.concatenate(([0.0], np.cumsum(np.asarray(costs, dtype=float))))
    inf = np.inf
    idx = np.arange(n + 1)
    # seg[i, j] = P[j] - P[i] for i < j, inf elsewhere
    seg = P[None, :] - P[:, None]
    seg[idx[:, None] >= idx[None, :]] = inf
    best = np.full(n + 1, inf)
    best[1:] = P[1:] + first_extra
    best[idx > cap[0]] = inf
    choice = np.zeros((parts, n + 1), dtype=np.int64)
    for k in range(1, parts):
        length = idx[None, :] - idx[:, None]
        s = seg.copy()
        s[length > cap[k]] = inf
        if k == parts - 1:
            s[:, n] += last_extra
        cand = np.maximum(best[:, None], s)
        choice[k] = np.argmin(cand, axis=0)
        best = cand[choice[k], idx]
    if parts == 1:
        best = best + np.where(idx == n, last_extra, 0.0)
    if not np.isfinite(best[n]):
        raise DistscopeError(f"no split of {n} layers into {parts} parts fits max_items={cap}")
    sizes: list[int] = []
    j = n
    for k in range(parts - 1, 0, -1):
        i = int(choice[k][j])
        sizes.append(j - i)
        j = i
    sizes.append(j)
    return Partition(sizes=tuple(reversed(sizes)), bottleneck_s=float(best[n]))


def layer_costs(layers: int, dense_first: int, dense_s: float, moe_s: float) -> list[float]:
    """Per-layer cost vector: the first `dense_first` layers dense, the rest MoE (a dense model has
    dense_first = layers)."""
    return [dense_s if i < dense_first else moe_s for i in range(layers)]
