"""A process group laid onto a cluster's topology: what each collective algorithm needs to know.

A group {base + i·stride, i < size} has fan-out p_k ranks per level-k unit (Cluster.group_fanout).
The ring's bus bandwidth is the bottleneck over crossed levels of the level's per-GPU bandwidth times
the ranks below it that cross it in parallel (NCCL runs one ring channel per NIC, so a node with p0
group ranks pushes p0·B_net across nodes): B_bus = min_k(B_k · Π_{j<k} p_j).
With rails=False the ring does not aggregate NICs (B_bus = min_k B_k): every rank's traffic crosses
its own link, as a topology-unaware implementation would.
"""

from __future__ import annotations

import dataclasses
import functools

from distscope.system.topology import Cluster


@dataclasses.dataclass(frozen=True, slots=True)
class GroupNet:
    n: int
    fanout: tuple[int, ...]
    alpha_s: float  # the slowest crossed level's per-hop latency
    bus_Bps: float  # ring bus bandwidth, see module docstring
    levels: tuple[tuple[int, float, float], ...]  # crossed levels: (p_k, α_k, B_k per GPU)
    a2a_parts: tuple[tuple[float, float], ...]  # (fraction of a rank's D crossing level k, B_k)
    nvls: tuple[float, float] | None  # (latency_s, B) when the group sits inside one NVLS domain


@functools.lru_cache(maxsize=4096)
def group_net(cluster: Cluster, size: int, stride: int = 1, rails: bool = True) -> GroupNet:
    fan = cluster.group_fanout(size, stride)
    levels: list[tuple[int, float, float]] = []
    bus = float("inf")
    alpha = 0.0
    below = 1
    parts: list[tuple[float, float]] = []
    for p, lv in zip(fan, cluster.levels, strict=True):
        if p > 1:
            levels.append((p, lv.latency_s, lv.eff_Bps))
            bus = min(bus, lv.eff_Bps * (below if rails else 1))
            alpha = max(alpha, lv.latency_s)
            # ranks in my level-k unit but outside my level-(k-1) unit: below*(p-1) of the n
            parts.append((below * (p - 1) / size, lv.eff_Bps))
        below *= p
    nvls = None
    lv0 = cluster.levels[0]
    if len(levels) == 1 and fan[0] == size and lv0.nvls_efficiency > 0:
        nvls = (lv0.nvls_latency_s, lv0.bw_GBps * 1e9 * lv0.nvls_efficiency)
    if not levels:  # a group of one
        bus = lv0.eff_Bps
    return GroupNet(
        n=size, fanout=fan, alpha_s=alpha, bus_Bps=bus, levels=tuple(levels), a2a_parts=tuple(parts), nvls=nvls
    )
