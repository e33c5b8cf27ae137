"""Two-objective Pareto fronts (both minimised).

A point is on the front when no other point is at least as good in both objectives and strictly
better in one. Sort by (x, y); a sweep keeps each point whose y is below every y seen at a smaller x
(equal (x, y) pairs are all kept: neither dominates the other). O(n log n).
"""

from __future__ import annotations

from collections.abc import Sequence


def pareto_front(xs: Sequence[float], ys: Sequence[float], ids: Sequence[int] | None = None) -> list[int]:
    """Ids (default: positions) of the non-dominated points, in increasing id order."""
    ids = list(range(len(xs))) if ids is None else list(ids)
    if not (len(xs) == len(ys) == len(ids)):
        raise ValueError("xs, ys and ids must have the same length")
    order = sorted(range(len(xs)), key=lambda i: (xs[i], ys[i]))
    front: list[int] = []
    best_y = float("inf")  # smallest y over strictly smaller x
    i = 0
    while i < len(order):
        j = i
        x = xs[order[i]]
        while j < len(order) and xs[order[j]] == x:
            j += 1
        group = order[i:j]  # same x, sorted by y: the smallest y (and its ties) may be on the front
        y0 = ys[group[0]]
        if y0 < best_y:
            front += [k for k in group if ys[k] == y0]
            best_y = y0
        i = j
    return sorted(ids[k] for k in front)
