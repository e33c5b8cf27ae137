"""Cutting the points still to run into tasks for an engine.

A task is a batch of points: small enough that every worker gets many (~16: the last batches to finish
leave a core idle for at most a few points, and the ETA stays live), large enough (at most 16 points)
that the per-task overhead (pickling, a Ray task's scheduling, ~ms) stays small next to a plan search
(~0.1-2 s per point). Points that share a model, sequence and device go to the same batch, where
the cost functions' cached per-layer work is already warm.
"""

from __future__ import annotations

import math

from distscope.explore.point import Point

Batch = list[tuple[str, Point]]
BATCHES_PER_WORKER = 16
MAX_BATCH = 16


def make_batches(todo: list[tuple[str, Point]], workers: int) -> list[Batch]:
    if not todo:
        return []
    ordered = sorted(todo, key=lambda kp: repr(kp[1].cache_group()))  # stable: grid order inside a group
    size = max(1, min(MAX_BATCH, math.ceil(len(ordered) / (max(workers, 1) * BATCHES_PER_WORKER))))
    return [ordered[i:i + size] for i in range(0, len(ordered), size)]
