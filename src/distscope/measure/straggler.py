"""Find slow ranks from logged collective timings (the C4 idea: collective timing exposes the faulty rank).

For every collective instance (group, seq) seen on all ranks of its group, a rank's arrival skew is its
issue time minus the earliest issue time in that instance. A healthy rank's skew is ~0 on most
instances; a rank that reaches its collectives late (slow compute, a sleep, a noisy neighbour) shows a
consistently positive skew while the others wait for it. Clocks: start_s is time.time() of each rank, so
across hosts the skew includes clock offset (fine on one host; use NTP/PTP-synced hosts otherwise).
"""

from __future__ import annotations

import dataclasses
import statistics
from collections import defaultdict
from collections.abc import Iterable

from distscope.comm.collective import Collective
from distscope.measure.calls import CommCall

_P2P = (Collective.SEND, Collective.RECV)


@dataclasses.dataclass(frozen=True, kw_only=True)
class RankSkew:
    rank: int
    instances: int
    median_skew_s: float
    mean_skew_s: float
    last_fraction: float  # share of instances where this rank arrived last


@dataclasses.dataclass(frozen=True, kw_only=True)
class StragglerReport:
    ranks: list[RankSkew]
    stragglers: list[int]
    threshold_s: float


def arrival_skew(calls: Iterable[CommCall]) -> dict[int, list[float]]:
    """Per rank, the arrival skew (s) on every complete collective instance (p2p excluded)."""
    inst: dict[tuple[str, int], dict[int, CommCall]] = defaultdict(dict)
    for c in calls:
        if c.op not in _P2P:
            inst[(c.group, c.seq)][c.rank] = c
    skews: dict[int, list[float]] = defaultdict(list)
    for by_rank in inst.values():
        first = next(iter(by_rank.values()))
        if set(by_rank) != set(first.group_ranks):
            continue
        t0 = min(c.start_s for c in by_rank.values())
        for r, c in by_rank.items():
            skews[r].append(c.start_s - t0)
    return dict(skews)


def find_stragglers(
    calls: Iterable[CommCall], *, threshold_s: float = 0.005, ratio: float = 5.0
) -> StragglerReport:
    """Ranks whose median skew exceeds both `threshold_s` and `ratio` x the median of the other ranks."""
    calls = list(calls)
    skews = arrival_skew(calls)
    last_count: dict[int, int] = defaultdict(int)
    inst: dict[tuple[str, int], list[CommCall]] = defaultdict(list)
    for c in calls:
        if c.op not in _P2P:
            inst[(c.group, c.seq)].append(c)
    for cs in inst.values():
        if len(cs) > 1:
            last_count[max(cs, key=lambda c: c.start_s).rank] += 1
    rows = [
        RankSkew(
            rank=r,
            instances=len(s),
            median_skew_s=statistics.median(s),
            mean_skew_s=statistics.fmean(s),
            last_fraction=last_count[r] / len(s),
        )
        for r, s in sorted(skews.items())
        if s
    ]
    stragglers = []
    for row in rows:
        others = [o.median_skew_s for o in rows if o.rank != row.rank]
        base = statistics.median(others) if others else 0.0
        if row.median_skew_s > threshold_s and row.median_skew_s > ratio * base:
            stragglers.append(row.rank)
    return StragglerReport(ranks=rows, stragglers=stragglers, threshold_s=threshold_s)
