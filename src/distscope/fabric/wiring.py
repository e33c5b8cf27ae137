"""A generated fabric under construction: its node names and scale-out cables (build.py's Clos, direct.py's
torus and dragonfly)."""

from __future__ import annotations

from distscope.fabric.spec import Fabric, Link, Plane


class Wiring:
    """Node names and cables: GPUs, then the scale-up switches, then what node() adds."""

    def __init__(self, gpus: int, up_names: list[str], up_links: list[Link], port_Bps: float, latency_s: float) -> None:
        self.names = [f"gpu{g}" for g in range(gpus)] + up_names
        self.links = list(up_links)
        self.port_Bps, self.latency_s = port_Bps, latency_s

    def node(self, label: str) -> int:
        self.names.append(label)
        return len(self.names) - 1

    def cable(self, a: int, b: int, bw_Bps: float | None = None, cost: int = 1) -> None:
        """A scale-out cable: a directed link each way, at `bw_Bps` (default: the port rate), each hop
        counting `cost` in the routing metric."""
        bw = self.port_Bps if bw_Bps is None else bw_Bps
        self.links.extend((Link(src=a, dst=b, bw_Bps=bw, latency_s=self.latency_s, plane=Plane.OUT, cost=cost),
                           Link(src=b, dst=a, bw_Bps=bw, latency_s=self.latency_s, plane=Plane.OUT, cost=cost)))

    def fabric(self, name: str, gpus: int, domain: int) -> Fabric:
        return Fabric(name=name, gpus=gpus, domain=domain, names=tuple(self.names), links=tuple(self.links))
