"""Network models the simulator prices transfers with.

`AstraNetwork` reproduces ASTRA-sim's analytical backend + system layer (see astra_collective.py).
A model answers three questions: how long a collective over `members` takes alone, how long a
point-to-point message takes alone, and which shared resources (rank, level) a transfer occupies
(used by `--network-mode shared`).
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Hashable, Sequence
from functools import lru_cache
from typing import Protocol

from distscope.comm.collective import Collective
from distscope.errors import DistscopeError
from distscope.sim.astra_collective import DimSpan, collective_s, message_s
from distscope.sim.astra_config import NetworkConfig, SystemConfig
from distscope.trace.graph import CollKind

# The collective a network prices a Chakra collective node as (the cluster-preset and the measured-profile
# networks alike): a block reduce-scatter is a reduce-scatter, a barrier a zero-byte all-reduce (gloo's is one).
PRICED_AS: dict[CollKind, Collective] = {
    CollKind.ALL_REDUCE: Collective.ALL_REDUCE,
    CollKind.ALL_GATHER: Collective.ALL_GATHER,
    CollKind.REDUCE_SCATTER: Collective.REDUCE_SCATTER,
    CollKind.REDUCE_SCATTER_BLOCK: Collective.REDUCE_SCATTER,
    CollKind.ALL_TO_ALL: Collective.ALL_TO_ALL,
    CollKind.BROADCAST: Collective.BROADCAST,
    CollKind.REDUCE: Collective.REDUCE,
    CollKind.BARRIER: Collective.ALL_REDUCE,
}


class NetworkMode(enum.Enum):
    """`unaware`: every transfer priced alone (ASTRA-sim congestion-unaware backend).
    `shared`: concurrent transfers on a level share its bandwidth, and messages are store-and-forward
    per hop (as ASTRA-sim's congestion-aware backend moves them through a switch)."""

    UNAWARE = "unaware"
    SHARED = "shared"


class NetworkModel(Protocol):
    @property
    def num_npus(self) -> int: ...

    def collective_s(self, kind: CollKind, size_bytes: int, members: tuple[int, ...], pg_name: str = "") -> float: ...

    def p2p_s(self, src: int, dst: int, size_bytes: int, pg_name: str = "") -> float: ...

    def resources(self, members: Sequence[int]) -> tuple[Hashable, ...]: ...


class AstraNetwork:
    """ASTRA-sim analytical network + system config."""

    def __init__(self, network: NetworkConfig, system: SystemConfig, mode: NetworkMode) -> None:
        self.network = network
        self.system = system
        self.mode = mode
        self._store_and_forward = mode is NetworkMode.SHARED
        self._spans = lru_cache(maxsize=4096)(self._spans_uncached)
        self._coll_cache: dict[tuple[CollKind, int, tuple[int, ...]], float] = {}

    @property
    def num_npus(self) -> int:
        return self.network.num_npus

    def _spans_uncached(self, members: tuple[int, ...]) -> tuple[DimSpan, ...]:
        """The dimensions a group spans. A group that is a regular sub-grid (per dimension an
        evenly spaced set of coordinates, all combinations present) runs one phase per spanned
        dimension; any other group is priced as one ring over its highest spanned dimension."""
        n = self.network.num_npus
        bad = [r for r in members if not 0 <= r < n]
        if bad:
            raise DistscopeError(f"rank {bad[0]} is outside the network's {n} NPUs")
        coords = [self.network.coords(r) for r in members]
        spans = []
        grid = 1
        regular = True
        for d in range(len(self.network.dims)):
            values = sorted({c[d] for c in coords})
            if len(values) <= 1:
                continue
            gaps = {b - a for a, b in itertools.pairwise(values)}
            regular = regular and len(gaps) == 1
            spans.append(DimSpan(dim=d, size=len(values), stride=min(gaps)))
            grid *= len(values)
        if not spans:
            return ()
        if not regular or grid != len(set(members)):
            return (DimSpan(dim=spans[-1].dim, size=len(members), stride=1),)
        return tuple(spans)

    def collective_s(self, kind: CollKind, size_bytes: int, members: tuple[int, ...], pg_name: str = "") -> float:
        del pg_name  # ASTRA-sim prices a group by its shape only
        key = (kind, size_bytes, members)
        t = self._coll_cache.get(key)
        if t is None:
            t = self._coll_cache[key] = collective_s(
                kind,
                size_bytes,
                self._spans(members),
                self.network.dims,
                self.system,
                self._store_and_forward,
            )
        return t

    def p2p_s(self, src: int, dst: int, size_bytes: int, pg_name: str = "") -> float:
        """A message uses the first dimension in which src and dst coordinates differ."""
        a, b = self.network.coords(src), self.network.coords(dst)
        for d, dim in enumerate(self.network.dims):
            if a[d] != b[d]:
                return message_s(
                    dim,
                    size_bytes,
                    dim.hops(b[d] - a[d]),
                    self.system.endpoint_delay_s,
                    self._store_and_forward,
                )
        return 0.0

    def resources(self, members: Sequence[int]) -> tuple[Hashable, ...]:
        spans = self._spans(tuple(sorted(members)))
        return tuple((r, s.dim) for r in members for s in spans)
