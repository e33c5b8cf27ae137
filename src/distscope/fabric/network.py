"""The simulator's network on a fabric: a cluster preset's level model whose scale-out bandwidth each
process group gets is the share its SPMD step achieves on the fabric (fabric/collective.py).

A collective over `members` runs in every sibling group at once (all DP groups reduce together), so its
scale-out flows are the siblings' union, routed by the chosen policy (ECMP with a seed, spraying,
adaptive) and shared max-min fairly on the links. The step's factor T_hose / T_fabric (<= 1: the share
of its NICs' bandwidth the busiest flow gets) scales the outer level's bandwidth, and the level model
prices the collective as `--cluster` does (comm.collective_s: NCCL's algorithm choice). A group inside
one scale-up domain has no scale-out flows and keeps the cluster's price. Point-to-point messages
(pipeline sends) are priced as a two-member ring of their pair's siblings.
The factor is computed once per traffic shape (collective class, group size, stride); each one is kept
with its hottest links, so a run can say which traffic class suffered and where (`verdicts`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Hashable, Sequence

from distscope.comm.collective import Collective
from distscope.errors import DistscopeError
from distscope.fabric.build import resolve
from distscope.fabric.collective import PATTERN_BYTES, pattern, siblings, step_verdict, tiling_shape
from distscope.fabric.dcqcn import CongestionControl, congestion_controls
from distscope.fabric.routing import Router, Routing, policies
from distscope.fabric.spec import Fabric
from distscope.sim.cluster_network import ClusterNetwork
from distscope.system.topology import Cluster
from distscope.trace.graph import CollKind

MAX_ROUTES = 1_000_000  # routed sub-flows for one traffic shape (~55k/s on one core: benchmarks/fabric_routing.py)


@dataclasses.dataclass(frozen=True, kw_only=True)
class FabricChoice:
    """Which fabric, and how its switches route: what `--fabric`, `--routing`, `--seed` and `--qps` say."""

    fabric: Fabric
    routing: Routing = Routing.ECMP
    seed: int = 0
    qps: int = 1  # queue pairs per connection: sub-flows ECMP hashes apart
    cc: CongestionControl = CongestionControl.NONE


def fabric_choice(text: str, routing: str, seed: int, cluster: str, gpus: int | None, cc: str = "none") -> FabricChoice:
    """--fabric (a YAML file, or 'preset': the cluster's rail-optimized Clos), --routing, --seed and --cc, checked."""
    pols = policies(routing)
    ccs = congestion_controls(cc)
    if len(pols) != 1 or len(ccs) != 1 or seed < 0:
        raise DistscopeError(f"--routing {routing!r} --cc {cc!r} --seed {seed}: give one policy, one congestion "
                             "control, and a seed >= 0")
    f, _ = resolve(None if text == "preset" else text, cluster, gpus)
    return FabricChoice(fabric=f, routing=pols[0], seed=seed, cc=ccs[0])


@dataclasses.dataclass(frozen=True, kw_only=True)
class TrafficVerdict:
    """One traffic shape's step on the fabric: which process group asked first, its share, its hot links."""

    group: str
    collective: str
    group_size: int
    flows: int
    factor: float
    hot: tuple[tuple[str, float], ...]


def verdict_line(v: TrafficVerdict) -> str:
    """One traffic shape's loss on the fabric, for people."""
    hot = ", ".join(f"{name} {u:.0%}" for name, u in v.hot) or "-"
    return (f"{v.group or 'p2p'} {v.collective} over {v.group_size} ranks ({v.flows} flows per step): "
            f"{v.factor:.2f} of NIC bandwidth; hottest links {hot}")


def scaled_cluster(cluster: Cluster, fabric: Fabric, share: float, gpu: int = 0) -> Cluster:
    """The cluster with its outer level's bandwidth at `share` of the fabric's NIC rate (of GPU `gpu`)."""
    if len(cluster.levels) < 2:
        return cluster
    outer = cluster.levels[-1]
    bw = fabric.nic_Bps(gpu) / 1e9 * share
    return dataclasses.replace(cluster, levels=(*cluster.levels[:-1], dataclasses.replace(outer, bw_GBps=bw)))


def _shape_key(members: tuple[int, ...], world: int) -> tuple[int, ...]:
    """Groups of one shape (size, stride) that tile the ranks have the same siblings: one key for all."""
    return tiling_shape(members, world) or tuple(sorted(members))


class FabricNetwork:
    """A NetworkModel (sim/network.py) over a cluster preset and a fabric (module docstring)."""

    def __init__(self, cluster: Cluster, choice: FabricChoice) -> None:
        self.cluster = cluster
        self.choice = choice
        self._router = Router(choice.fabric)
        self._base = ClusterNetwork(cluster)
        self._factor: dict[tuple[bool, tuple[int, ...], float], float] = {}
        self._nets: dict[float, ClusterNetwork] = {}  # the fabric's NIC rate sets the outer level, shared or not
        self.verdicts: list[TrafficVerdict] = []

    @property
    def num_npus(self) -> int:
        return self._base.num_npus

    def _share(self, all_to_all: bool, members: tuple[int, ...], group: str, what: str, nbytes: float) -> float:
        f = self.choice.fabric
        # under DCQCN the share depends on the flows' size (its transients): one run per power of two of
        # a step's per-flow bytes (a ring step's D/n, an all-to-all pair's D/n)
        dcqcn = self.choice.cc is CongestionControl.DCQCN
        bucket = 2.0 ** round(math.log2(max(nbytes / len(members), 1.0))) if dcqcn else 0.0
        key = (all_to_all, _shape_key(members, f.gpus), bucket)
        share = self._factor.get(key)
        if share is None:
            upper = f.gpus * (len(members) if all_to_all else 1) * self.choice.qps
            if upper > MAX_ROUTES:
                raise DistscopeError(f"--fabric: group {group or '?'} ({len(members)} ranks of {f.gpus}"
                                     f"{', all-to-all' if all_to_all else ''}) needs up to {upper:,} routes per step; "
                                     f"the limit is {MAX_ROUTES:,}: simulate it on the --cluster level model")
            coll = Collective.ALL_TO_ALL if all_to_all else Collective.ALL_REDUCE
            pairs = pattern(f, siblings(members, f.gpus), coll)
            v = step_verdict(f, self._router, pairs, self.choice.routing, qps=self.choice.qps, seed=self.choice.seed,
                             cc=self.choice.cc, flow_bytes=bucket or PATTERN_BYTES)
            share = self._factor[key] = round(v.factor, 4)  # rounded: one priced cluster per distinct share
            if pairs:
                self.verdicts.append(TrafficVerdict(group=group, collective=what, group_size=len(members),
                                                    flows=len(pairs), factor=v.factor, hot=v.hot[:3]))
        return share

    def _net(self, share: float) -> ClusterNetwork:
        net = self._nets.get(share)
        if net is None:
            net = self._nets[share] = ClusterNetwork(scaled_cluster(self.cluster, self.choice.fabric, share))
        return net

    def collective_s(self, kind: CollKind, size_bytes: int, members: tuple[int, ...], pg_name: str = "") -> float:
        share = self._share(kind is CollKind.ALL_TO_ALL, members, pg_name, kind.value.lower(), size_bytes)
        return self._net(share).collective_s(kind, size_bytes, members, pg_name)

    def p2p_s(self, src: int, dst: int, size_bytes: int, pg_name: str = "") -> float:
        share = self._share(False, (min(src, dst), max(src, dst)), pg_name, "send/recv", 2 * size_bytes)
        return self._net(share).p2p_s(src, dst, size_bytes, pg_name)

    def resources(self, members: Sequence[int]) -> tuple[Hashable, ...]:
        return self._base.resources(members)

    def worst(self) -> list[TrafficVerdict]:
        """The traffic shapes that lost bandwidth on the fabric, worst first."""
        return sorted((v for v in self.verdicts if v.factor < 0.999), key=lambda v: v.factor)
