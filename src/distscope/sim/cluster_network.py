"""Network model from a distscope cluster preset: collectives priced by the foundation's cost models.

A process group {base + i*stride} is laid onto the cluster's levels with `comm.group_net` and priced
with `comm.collective_s` (NCCL's algorithm choice per size), exactly as `distscope estimate` prices it.
Chakra's comm_size is the per-rank shard for ALL_GATHER and the buffer otherwise; the foundation's
message size D follows nccl-tests (all_gather counts the output), so D = n * comm_size for ALL_GATHER.
Groups whose process-group name starts with "dpz" or "edpz" (ZeRO-3 traffic, trace.builder.Group.DPZ/EDPZ) are
priced without NIC rail aggregation, as the estimator does.
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Sequence

from distscope.comm import Algorithm, Collective, collective_s, collective_time, group_net
from distscope.errors import DistscopeError
from distscope.sim.network import PRICED_AS
from distscope.system.topology import Cluster
from distscope.trace.graph import CollKind


def _stride(members: tuple[int, ...]) -> int:
    """Stride of an evenly spaced group; other groups are priced at their smallest gap."""
    gaps = {b - a for a, b in itertools.pairwise(sorted(members))}
    return min(gaps) if gaps else 1


class ClusterNetwork:
    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self._cache: dict[tuple[CollKind, int, int, int, bool], float] = {}
        self._strides: dict[tuple[int, ...], int] = {}
        self._p2p: dict[tuple[int, int], float] = {}
        self._resources: dict[tuple[int, ...], tuple[Hashable, ...]] = {}  # every p2p node asks for its pair

    @property
    def num_npus(self) -> int:
        return self.cluster.num_gpus

    def collective_s(self, kind: CollKind, size_bytes: int, members: tuple[int, ...], pg_name: str = "") -> float:
        rails = not pg_name.startswith(("dpz", "edpz"))
        n = len(members)
        stride = self._strides.get(members)
        if stride is None:
            stride = self._strides[members] = _stride(members)
        key = (kind, size_bytes, n, stride, rails)
        t = self._cache.get(key)
        if t is None:
            coll = PRICED_AS.get(kind)
            if coll is None:
                raise DistscopeError(f"comm_type={kind.value} has no cost model on a cluster preset")
            g = group_net(self.cluster, n, stride, rails)
            size = 0 if kind is CollKind.BARRIER else size_bytes
            D = size * n if kind is CollKind.ALL_GATHER else size
            t = self._cache[key] = collective_s(coll, float(D), g)
        return t

    def collective_algo_s(
        self, kind: CollKind, size_bytes: int, members: tuple[int, ...], algorithm: Algorithm | None
    ) -> float:
        """Like collective_s, with the algorithm forced (None: NCCL's choice)."""
        if algorithm is None:
            return self.collective_s(kind, size_bytes, members)
        coll = PRICED_AS.get(kind)
        if coll is None:
            raise DistscopeError(f"comm_type={kind.value} has no cost model on a cluster preset")
        n = len(members)
        g = group_net(self.cluster, n, _stride(members), True)
        size = 0 if kind is CollKind.BARRIER else size_bytes
        D = size * n if kind is CollKind.ALL_GATHER else size
        return collective_time(coll, float(D), g, algorithm)[0]

    def p2p_s(self, src: int, dst: int, size_bytes: int, pg_name: str = "") -> float:
        key = (abs(dst - src), size_bytes)
        t = self._p2p.get(key)
        if t is None:
            g = group_net(self.cluster, 2, key[0])
            t = self._p2p[key] = collective_s(Collective.SEND_RECV, float(size_bytes), g)
        return t

    def resources(self, members: Sequence[int]) -> tuple[Hashable, ...]:
        """(rank, level) for every level the group crosses."""
        key = tuple(members)
        out = self._resources.get(key)
        if out is None:
            ms = tuple(sorted(members))
            fan = self.cluster.group_fanout(len(ms), _stride(ms)) if len(ms) > 1 else ()
            out = self._resources[key] = tuple((r, k) for r in ms for k, p in enumerate(fan) if p > 1)
        return out
