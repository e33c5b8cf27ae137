"""Collective kinds, their nccl-tests byte convention and bus-bandwidth factors.

Source for both conventions: NVIDIA nccl-tests, doc/PERFORMANCE.md ("Performance reported by NCCL tests").

- algbw = S / t, with S the "size" column of nccl-tests:
  all_gather: the gathered output (sendcount * sizeof(dtype) * n); reduce_scatter: the full input
  (recvcount * sizeof(dtype) * n); every other op: the buffer each rank passes.
- busbw = algbw * factor(n):
  all_reduce 2(n-1)/n; reduce_scatter, all_gather, all_to_all (n-1)/n; broadcast, reduce,
  send/recv 1.
"""

from __future__ import annotations

import enum

from distscope.comm.collective import Collective
from distscope.errors import DistscopeError, closest


class CollectiveOp(str, enum.Enum):
    """An operation as nccl-tests names it (all_reduce_perf -> ALL_REDUCE)."""

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

    @classmethod
    def parse(cls, value: str, field: str = "op") -> CollectiveOp:
        """The enum for a user string; accepts nccl-tests binary names (all_reduce_perf) and aliases."""
        key = value.strip().lower().removesuffix("_perf").replace("-", "_")
        key = _ALIASES.get(key, key)
        try:
            return cls(key)
        except ValueError:
            raise DistscopeError(
                f"{field}={value!r} is not a collective{closest(key, [o.value for o in cls])}"
            ) from None


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


def busbw_factor(op: CollectiveOp, nranks: int) -> float:
    """busbw / algbw for `op` over `nranks` ranks (nccl-tests doc/PERFORMANCE.md, "Summary").

    The factors live with the cost model (`comm.Collective.busbw_factor`); ops the model does not price
    (send, recv, gather, scatter, barrier) have factor 1."""
    if nranks < 1:
        raise DistscopeError(f"nranks={nranks} must be >= 1")
    try:
        return Collective(op.value).busbw_factor(nranks)
    except ValueError:
        return 1.0


def bandwidths_GBps(op: CollectiveOp, size_bytes: int, time_s: float, nranks: int) -> tuple[float, float]:
    """(algbw, busbw) in GB/s (1e9 bytes/s, as nccl-tests prints) for one measured time."""
    if time_s <= 0:
        raise DistscopeError(f"time_s={time_s} must be > 0")
    algbw = size_bytes / time_s / 1e9
    return algbw, algbw * busbw_factor(op, nranks)
