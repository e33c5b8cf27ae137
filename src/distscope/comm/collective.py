"""Collective kinds and algorithms, with their properties as data.

`Collective` is the one enum of collective and point-to-point operations, for the cost model and for
everything measured, logged or read from nccl-tests. Its values are the names nccl-tests gives its
binaries (all_reduce_perf -> "all_reduce"), and they are what sweep, profile and call-log files hold.

Message size D follows nccl-tests (doc/PERFORMANCE.md, "Performance reported by NCCL tests"):
all_gather counts the gathered output (sendcount * sizeof(dtype) * n), reduce_scatter the full input
(recvcount * sizeof(dtype) * n), everything else the (per-rank) buffer. algbw = D / t; busbw = algbw *
factor(n): all_reduce 2(n-1)/n; reduce_scatter, all_gather, all_to_all (n-1)/n; broadcast, reduce,
send/recv 1.
"""

from __future__ import annotations

from collections.abc import Callable

from distscope.enums import Enum
from distscope.errors import DistscopeError, closest


class Collective(Enum):
    """A collective or point-to-point operation.

    The cost model (comm/select.py) prices ALL_REDUCE .. SEND_RECV. SEND and RECV are the two halves of
    a SEND_RECV as one rank issues them; they, GATHER, SCATTER and BARRIER are what real jobs also issue
    (measure/c10d_ops.py) and are logged and traced, not priced.
    """

    ALL_REDUCE = "all_reduce"
    ALL_GATHER = "all_gather"
    REDUCE_SCATTER = "reduce_scatter"
    ALL_TO_ALL = "all_to_all"
    BROADCAST = "broadcast"
    REDUCE = "reduce"
    SEND_RECV = "send_recv"
    SEND = "send"
    RECV = "recv"
    GATHER = "gather"
    SCATTER = "scatter"
    BARRIER = "barrier"

    def busbw_factor(self, n: int) -> float:
        """busbw / algbw over n ranks (nccl-tests doc/PERFORMANCE.md, "Summary").

        all_reduce 2(n-1)/n; all_gather, reduce_scatter, all_to_all (n-1)/n; every other op 1 (the model
        does not price send, recv, gather, scatter and barrier; their factor is 1 as for broadcast).
        """
        if n < 1:
            raise DistscopeError(f"nranks={n} must be >= 1")
        f = _BUSBW_FACTOR.get(self)
        return 1.0 if f is None else f(n)

    def bandwidths_GBps(self, size_bytes: float, time_s: float, nranks: int) -> tuple[float, float]:
        """(algbw, busbw) in GB/s (1e9 bytes/s, as nccl-tests prints) for one measured time of size_bytes
        (nccl-tests bytes)."""
        if time_s <= 0:
            raise DistscopeError(f"time_s={time_s} must be > 0")
        algbw = size_bytes / time_s / 1e9
        return algbw, algbw * self.busbw_factor(nranks)

    @classmethod
    def parse(cls, value: str, field: str = "op") -> Collective:
        """The enum for a user string: a value, an nccl-tests binary name (all_reduce_perf) or an alias
        (allreduce, p2p, torch's all_gather_into_tensor, ...)."""
        key = value.strip().lower().removesuffix("_perf").replace("-", "_")
        key = _ALIASES.get(key, key)
        try:
            return cls(key)
        except ValueError:
            raise DistscopeError(f"{field}={value!r} is not a collective{closest(key, [c.value for c in cls])}") from None


_BUSBW_FACTOR: dict[Collective, Callable[[int], float]] = {
    Collective.ALL_REDUCE: lambda n: 2.0 * (n - 1) / n,
    Collective.ALL_GATHER: lambda n: (n - 1) / n,
    Collective.REDUCE_SCATTER: lambda n: (n - 1) / n,
    Collective.ALL_TO_ALL: lambda n: (n - 1) / n,
}
_ALIASES = {
    "allreduce": "all_reduce",
    "allgather": "all_gather",
    "all_gather_into_tensor": "all_gather",
    "reducescatter": "reduce_scatter",
    "reduce_scatter_tensor": "reduce_scatter",
    "alltoall": "all_to_all",
    "all_to_all_single": "all_to_all",
    "sendrecv": "send_recv",
    "p2p": "send_recv",
}


class Algorithm(Enum):
    RING = "ring"
    TREE = "tree"  # NCCL double binary tree
    RHD = "rhd"  # recursive halving-doubling (Rabenseifner)
    DIRECT = "direct"  # pairwise exchange all-to-all
    NVLS = "nvls"  # NVLink SHARP in-switch reduction
    HIERARCHICAL = "hierarchical"  # per-level composition, e.g. RS(intra) + AR(inter) + AG(intra)
    P2P = "p2p"
