"""CPU inference serving as Packrat plans it: how many model instances, how many threads each, and how
the batch is split among them (Bhardwaj et al., "Packrat: Automatic Reconfiguration for Latency
Minimization in CPU-based DNN Serving", 2023).

A request batch of B items is served by instances that run concurrently on disjoint cores; instance j
has t_j threads and takes b_j items (Σ t_j ≤ C cores, Σ b_j = B), and the batch is done when the slowest
instance is. Given the latency L(t, b) of one instance with t threads on a batch of b, measured on the
host (serve/cpu_measure.py), the best split minimises max_j L(t_j, b_j). Packrat solves it as a knapsack
over cores and items; here the same dynamic program:

    F(c, b) = min over t ≤ c, 1 ≤ b' ≤ b of max(L(t, b'), F(c − t, b − b')),   F(c, 0) = 0,  F(0, b > 0) = ∞

which is O(C² B²) (C = 2..64, B ≤ 256 here). Ties go to fewer instances, then to the more even split.
Intra-op parallelism scales sub-linearly on small batches, so several narrow instances often beat one
wide one: the gain Packrat reports, and the question this answers for a given host and model.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

from distscope.errors import DistscopeError


@dataclasses.dataclass(frozen=True)
class CpuProfile:
    """latency_s[t - 1][b - 1]: one instance with t threads on a batch of b, seconds (median)."""

    latency_s: tuple[tuple[float, ...], ...]
    source: str = ""

    @property
    def cores(self) -> int:
        return len(self.latency_s)

    @property
    def max_batch(self) -> int:
        return len(self.latency_s[0]) if self.latency_s else 0

    def at(self, threads: int, batch: int) -> float:
        return self.latency_s[threads - 1][batch - 1]

    def to_dict(self) -> dict[str, Any]:
        return {"latency_s": [list(r) for r in self.latency_s], "source": self.source}


@dataclasses.dataclass(frozen=True)
class CpuPlan:
    """Instances as (threads, batch), and the latency the profile predicts for them."""

    instances: tuple[tuple[int, int], ...]
    latency_s: float

    @property
    def batch(self) -> int:
        return sum(b for _, b in self.instances)

    @property
    def threads(self) -> int:
        return sum(t for t, _ in self.instances)

    def label(self) -> str:
        """'2 x t1 b2': two instances of one thread with two items each."""
        groups: dict[tuple[int, int], int] = {}
        for inst in self.instances:
            groups[inst] = groups.get(inst, 0) + 1
        return " + ".join(f"{n} x t{t} b{b}" for (t, b), n in sorted(groups.items(), reverse=True))

    def to_dict(self) -> dict[str, Any]:
        return {"instances": [{"threads": t, "batch": b} for t, b in self.instances], "latency_s": self.latency_s,
                "throughput_per_s": self.batch / self.latency_s if self.latency_s > 0 else math.inf,
                "label": self.label()}


def baseline(prof: CpuProfile, batch: int, cores: int) -> CpuPlan:
    """What a server does untuned: one instance with every core on the whole batch."""
    _check(prof, batch, cores)
    return CpuPlan(instances=((cores, batch),), latency_s=prof.at(cores, batch))


def _check(prof: CpuProfile, batch: int, cores: int) -> None:
    if cores < 1 or cores > prof.cores:
        raise DistscopeError(f"cores={cores}: the profile covers 1..{prof.cores} threads")
    if batch < 1 or batch > prof.max_batch:
        raise DistscopeError(f"batch={batch}: the profile covers batches 1..{prof.max_batch}")


def best_plan(prof: CpuProfile, batch: int, cores: int) -> CpuPlan:
    """The split of `batch` items over at most `cores` threads in instances that minimises the latency of
    the slowest instance (module docstring); ties: fewer instances, then the smaller spread of batches."""
    _check(prof, batch, cores)
    inf = (math.inf, 0, 0)
    # F[c][b] = (latency, instances, spread key); choice[c][b] = (t, b') of the last instance placed
    F = [[(0.0, 0, 0) if b == 0 else inf for b in range(batch + 1)] for _ in range(cores + 1)]
    choice: list[list[tuple[int, int] | None]] = [[None] * (batch + 1) for _ in range(cores + 1)]
    for c in range(1, cores + 1):
        for b in range(1, batch + 1):
            best, pick = F[c - 1][b], None  # leaving a core idle
            for t in range(1, c + 1):
                for bb in range(1, b + 1):
                    rest = F[c - t][b - bb]
                    if rest[0] == math.inf:
                        continue
                    cand = (max(prof.at(t, bb), rest[0]), rest[1] + 1, max(rest[2], bb))
                    if cand < best:
                        best, pick = cand, (t, bb)
            F[c][b], choice[c][b] = best, pick  # pick None: as with one core fewer
    instances: list[tuple[int, int]] = []
    c, b = cores, batch
    while b > 0:
        pick = choice[c][b]
        if pick is None:
            c -= 1
            continue
        instances.append(pick)
        c, b = c - pick[0], b - pick[1]
    return CpuPlan(instances=tuple(sorted(instances, reverse=True)), latency_s=F[cores][batch][0])


def plans_for(prof: CpuProfile, batches: Sequence[int], cores: int) -> list[tuple[CpuPlan, CpuPlan]]:
    """(best, baseline) per total batch."""
    return [(best_plan(prof, b, cores), baseline(prof, b, cores)) for b in batches]
