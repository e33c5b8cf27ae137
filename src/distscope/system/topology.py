"""Clusters: a device plus topology levels (e.g. NVLink inside a node, then IB/RoCE across nodes).

Ranks are laid out level by level: rank r sits in node r // levels[0].size, in pod
r // (levels[0].size * levels[1].size), and so on. The last level spans everything above it.
"""

from __future__ import annotations

import dataclasses
import math

from distscope.errors import DistscopeError
from distscope.hashing import cached_hash
from distscope.system.device import Device
from distscope.system.memory_budget import DEFAULT_HEADROOM_FRAC, capacity_bytes, check_budget


@cached_hash
@dataclasses.dataclass(frozen=True, kw_only=True)
class Level:
    """One topology level.

    size: how many units of the level below form one unit of this level (GPUs per node for level 0);
      0 for the outermost level (unbounded).
    bw_GBps: bandwidth per GPU per direction, line rate (GB = 1e9 bytes).
    latency_s: per-hop latency α.
    efficiency: achieved fraction of line rate for large ring transfers at this level.
    nvls_efficiency: >0 when the level's switch reduces in-network (NVLink SHARP): the achieved
      fraction of bw_GBps for the NVLS all-reduce, whose per-GPU traffic is D each way.
    nvls_latency_s: the NVLS all-reduce's fixed cost (start-up and pipeline fill).
    profiled: set from a measured profile; collectives on it are priced with the ring formula the
      fit was read through, not re-chosen among algorithms.
    """

    name: str
    size: int
    bw_GBps: float
    latency_s: float
    efficiency: float = 1.0
    nvls_efficiency: float = 0.0
    nvls_latency_s: float = 0.0
    profiled: bool = False  # bandwidth/latency come from a measured α-β fit (system/calibrated.py)

    def __post_init__(self) -> None:
        if self.size < 0 or self.bw_GBps <= 0 or self.latency_s < 0 or not 0 < self.efficiency <= 1:
            raise DistscopeError(
                f"level {self.name}: size={self.size} bw_GBps={self.bw_GBps} latency_s={self.latency_s} "
                f"efficiency={self.efficiency} (need size>=0, bw>0, latency>=0, 0<efficiency<=1)"
            )

    @property
    def eff_Bps(self) -> float:
        """Achieved bytes/s per GPU per direction."""
        return self.bw_GBps * 1e9 * self.efficiency


@cached_hash
@dataclasses.dataclass(frozen=True, kw_only=True)
class Cluster:
    name: str
    device: Device
    levels: tuple[Level, ...]
    num_gpus: int
    max_memory_bytes: float | None = None  # a user's cap per GPU (--max-memory)
    headroom_frac: float = DEFAULT_HEADROOM_FRAC  # kept free per GPU (system/memory_budget.py)

    def __post_init__(self) -> None:
        check_budget(self.max_memory_bytes, self.headroom_frac)
        if self.num_gpus < 1:
            raise DistscopeError(f"gpus={self.num_gpus} must be >= 1")
        if not self.levels:
            raise DistscopeError(f"cluster {self.name}: needs at least one topology level")
        for lv in self.levels[:-1]:
            if lv.size < 1:
                raise DistscopeError(f"cluster {self.name}: inner level {lv.name} needs size >= 1")
        node = self.levels[0].size
        if len(self.levels) > 1 and self.num_gpus > node and self.num_gpus % node:
            raise DistscopeError(
                f"gpus={self.num_gpus} is not a multiple of {node} GPUs per node on cluster {self.name}"
            )

    @property
    def memory_capacity_bytes(self) -> float:
        """What a plan's modelled memory per GPU may reach (system/memory_budget.py)."""
        return capacity_bytes(self.device.usable_bytes, self.max_memory_bytes, self.headroom_frac)

    def with_memory(self, max_memory_GiB: float | None, headroom: float | None) -> Cluster:
        return dataclasses.replace(
            self, max_memory_bytes=None if max_memory_GiB is None else max_memory_GiB * 2**30,
            headroom_frac=self.headroom_frac if headroom is None else headroom)

    def with_host_op(self, host_op_us: float) -> Cluster:
        """The cluster whose hosts take `host_op_us` microseconds to issue one eager op (--host-op-us)."""
        if not math.isfinite(host_op_us) or host_op_us <= 0:
            raise DistscopeError(f"--host-op-us={host_op_us} must be a positive number of microseconds")
        return dataclasses.replace(self, device=dataclasses.replace(self.device, host_op_s=host_op_us * 1e-6))

    @property
    def gpus_per_node(self) -> int:
        return self.levels[0].size

    def unit_gpus(self, k: int) -> int:
        """GPUs in one unit of level k (node for k=0); the outermost level holds the whole cluster."""
        if k >= len(self.levels) - 1:
            return max(self.num_gpus, self.levels[0].size)
        n = 1
        for lv in self.levels[: k + 1]:
            n *= lv.size
        return n

    def group_fanout(self, size: int, stride: int) -> tuple[int, ...]:
        """Ranks of a group {base + i*stride, i < size} per level: (per node, nodes per pod, ...).

        The product of the result is `size`. Derivation: one level-k unit holds U_k GPUs, so it holds
        c_k = min(size, max(1, U_k // stride)) of the group's ranks; fan-out p_k = c_k / c_{k-1}.
        """
        out: list[int] = []
        prev = 1
        for k in range(len(self.levels)):
            c = size if k == len(self.levels) - 1 else min(size, max(1, self.unit_gpus(k) // stride))
            c = max(c, prev)
            out.append(c // prev)
            prev = c
        return tuple(out)

    def with_gpus(self, num_gpus: int) -> Cluster:
        return dataclasses.replace(self, num_gpus=num_gpus)

    def with_bandwidths(self, overrides: dict[str, float]) -> Cluster:
        """Override bw_GBps per level name, e.g. {"ib": 50}."""
        names = [lv.name for lv in self.levels]
        for k in overrides:
            if k not in names:
                raise DistscopeError(f"link {k!r} is not a level of cluster {self.name}; levels: {', '.join(names)}")
        levels = tuple(
            dataclasses.replace(lv, bw_GBps=overrides[lv.name]) if lv.name in overrides else lv for lv in self.levels
        )
        return dataclasses.replace(self, levels=levels)
