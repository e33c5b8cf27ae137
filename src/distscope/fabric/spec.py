"""A fabric: GPUs, switches and the directed links between them, each with its bandwidth and latency.

GPUs are nodes 0..gpus-1 in rank order; switches follow. A link is one direction of a cable (a YAML
entry `{a, b, GBps}` is two links). Every link belongs to a plane: `UP` for the scale-up domain (NVLink
switches: GPUs in one domain talk only through it, as NCCL does) or `OUT` for the scale-out network (NICs,
leaves, spines): GPUs of different domains talk only through it. GPUs never forward traffic.

Validation names the element: a link with non-positive bandwidth, an endpoint that is not a node, a GPU
without a scale-out link where there is more than one domain, a GPU unreachable from another domain.
"""

from __future__ import annotations

import dataclasses
import enum
import functools

import numpy as np

from distscope.errors import DistscopeError, closest


class Plane(enum.Enum):
    UP = "scale-up"
    OUT = "scale-out"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Link:
    src: int
    dst: int
    bw_Bps: float
    latency_s: float
    plane: Plane
    cost: int = 1  # routing cost of the hop: shortest paths minimise its sum (routing.py)


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class Fabric:
    """gpus: GPU count; domain: GPUs per scale-up domain (consecutive ranks; 1 = none); names: every node
    (GPUs first); links: directed links."""

    name: str
    gpus: int
    domain: int
    names: tuple[str, ...]
    links: tuple[Link, ...]

    def __post_init__(self) -> None:
        if self.gpus < 1:
            raise DistscopeError(f"fabric {self.name}: gpus={self.gpus} (need >= 1)")
        if self.domain < 1 or self.gpus % self.domain:
            raise DistscopeError(f"fabric {self.name}: scale_up size={self.domain} does not divide gpus={self.gpus}")
        if len(set(self.names)) != len(self.names):
            dup = next(n for n in self.names if self.names.count(n) > 1)
            raise DistscopeError(f"fabric {self.name}: node {dup!r} is declared twice")
        n = len(self.names)
        for ln in self.links:
            if not (0 <= ln.src < n and 0 <= ln.dst < n):
                raise DistscopeError(f"fabric {self.name}: link {ln.src}->{ln.dst} names a node outside 0..{n - 1}")
            if not ln.bw_Bps > 0:
                raise DistscopeError(f"fabric {self.name}: link {self.link_name(ln)}: bandwidth {ln.bw_Bps / 1e9:g} GB/s "
                                     "(need > 0)")
            if ln.latency_s < 0:
                raise DistscopeError(f"fabric {self.name}: link {self.link_name(ln)}: latency {ln.latency_s} s (need >= 0)")
            if ln.src == ln.dst:
                raise DistscopeError(f"fabric {self.name}: link {self.link_name(ln)} is a loop on one node")
        self._check_connected()

    # --- derived (computed on first use; cached_property writes the instance dict, which a frozen
    # dataclass allows) ---
    @functools.cached_property
    def src(self) -> np.ndarray:
        return np.array([ln.src for ln in self.links], dtype=np.int64)

    @functools.cached_property
    def dst(self) -> np.ndarray:
        return np.array([ln.dst for ln in self.links], dtype=np.int64)

    @functools.cached_property
    def cap_Bps(self) -> np.ndarray:
        return np.array([ln.bw_Bps for ln in self.links], dtype=float)

    @functools.cached_property
    def _out(self) -> dict[tuple[int, Plane], list[int]]:
        table: dict[tuple[int, Plane], list[int]] = {}
        for k, ln in enumerate(self.links):
            table.setdefault((ln.src, ln.plane), []).append(k)
        return table

    @property
    def domains(self) -> int:
        return self.gpus // self.domain

    def domain_of(self, gpu: int) -> int:
        return gpu // self.domain

    def link_name(self, ln: Link) -> str:
        return f"{self.names[ln.src]}->{self.names[ln.dst]}"

    def out_links(self, node: int, plane: Plane) -> list[int]:
        """Link indices leaving `node` in `plane`."""
        return self._out.get((node, plane), [])

    def nic_Bps(self, gpu: int) -> float:
        """A GPU's scale-out injection bandwidth: the sum of its scale-out links (every NIC port, every plane)."""
        return float(sum(self.links[k].bw_Bps for k in self.out_links(gpu, Plane.OUT)))

    def _check_connected(self) -> None:
        """Every GPU reaches every other domain through the scale-out network (checked from GPU 0's side,
        with GPUs not forwarding), and every GPU of a multi-GPU domain has a scale-up link."""
        if self.domain > 1:
            for g in range(self.gpus):
                if not self.out_links(g, Plane.UP):
                    raise DistscopeError(f"fabric {self.name}: {self.names[g]} has no scale-up link "
                                         f"(its domain holds {self.domain} GPUs)")
        if self.domains == 1:
            return
        fwd = _reach(self, 0, reverse=False)
        back = _reach(self, 0, reverse=True)
        for g in range(self.gpus):
            if self.domain_of(g) == 0:
                continue
            if g not in fwd or g not in back:
                raise DistscopeError(f"fabric {self.name}: {self.names[g]} is disconnected from {self.names[0]} "
                                     "on the scale-out network")


def _reach(f: Fabric, start: int, *, reverse: bool) -> set[int]:
    """Nodes reachable from `start` (or reaching it) over scale-out links, GPUs other than `start` not forwarding."""
    adj: dict[int, list[int]] = {}
    for ln in f.links:
        if ln.plane is Plane.OUT:
            a, b = (ln.dst, ln.src) if reverse else (ln.src, ln.dst)
            adj.setdefault(a, []).append(b)
    seen = {start}
    frontier = [start]
    while frontier:
        nxt = []
        for u in frontier:
            if u != start and u < f.gpus:
                continue  # a GPU ends a path
            for v in adj.get(u, ()):
                if v not in seen:
                    seen.add(v)
                    nxt.append(v)
        frontier = nxt
    return seen


def node_index(names: dict[str, int], name: object, where: str) -> int:
    """The node id of `name` in a YAML link entry, or one line naming it with the closest names."""
    key = str(name)
    if key not in names:
        raise DistscopeError(f"{where}: endpoint {key!r} is not a GPU or switch{closest(key, names)}")
    return names[key]
