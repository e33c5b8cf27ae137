"""Collective kinds and algorithms, with their properties as data.

Message size D follows nccl-tests (doc/PERFORMANCE.md): all_gather counts the output buffer,
reduce_scatter the input buffer, everything else the (per-rank) buffer.
"""

from __future__ import annotations

from distscope.enums import Enum
from distscope.errors import DistscopeError, closest


class Collective(Enum):
    ALL_REDUCE = "all_reduce"
    ALL_GATHER = "all_gather"
    REDUCE_SCATTER = "reduce_scatter"
    ALL_TO_ALL = "all_to_all"
    BROADCAST = "broadcast"
    REDUCE = "reduce"
    SEND_RECV = "send_recv"

    def busbw_factor(self, n: int) -> float:
        """nccl-tests bus-bandwidth factor: busbw = algbw * factor (PERFORMANCE.md).

        all_reduce 2(n-1)/n; all_gather, reduce_scatter, all_to_all (n-1)/n; others 1.
        """
        if n <= 1:
            return 1.0 if self in _UNIT_FACTOR else 0.0
        if self is Collective.ALL_REDUCE:
            return 2.0 * (n - 1) / n
        if self in _UNIT_FACTOR:
            return 1.0
        return (n - 1) / n

    @classmethod
    def parse(cls, value: str, field: str = "op") -> Collective:
        v = value.strip().lower().replace("-", "_")
        aliases = {"allreduce": "all_reduce", "allgather": "all_gather", "reducescatter": "reduce_scatter",
                   "alltoall": "all_to_all", "sendrecv": "send_recv", "p2p": "send_recv"}
        try:
            return cls(aliases.get(v, v))
        except ValueError:
            raise DistscopeError(f"{field}={value!r} is not a collective{closest(v, [c.value for c in cls])}") from None


_UNIT_FACTOR = frozenset({Collective.BROADCAST, Collective.REDUCE, Collective.SEND_RECV})


class Algorithm(Enum):
    RING = "ring"
    TREE = "tree"  # NCCL double binary tree
    RHD = "rhd"  # recursive halving-doubling (Rabenseifner)
    DIRECT = "direct"  # pairwise exchange all-to-all
    NVLS = "nvls"  # NVLink SHARP in-switch reduction
    HIERARCHICAL = "hierarchical"  # per-level composition, e.g. RS(intra) + AR(inter) + AG(intra)
    P2P = "p2p"
