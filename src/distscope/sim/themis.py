"""Themis: each chunk of a hierarchical collective visits the dimensions least loaded so far first.

Rashidi et al., "Themis: A Network Bandwidth-Aware Collective Scheduling Policy for Distributed Training
of DL Models", ISCA'22. A reduce-scatter (and the reduce-scatter half of an all-reduce) of a chunk of D
bytes on a dimension of n NPUs and bandwidth B adds D·(n-1)/n / B to that dimension's load, and leaves
D/n for the next; an all-gather of a shard d adds d·(n-1) / B and leaves d·n. The scheduler keeps the
loads of the current collective and gives each new chunk the dimensions in ascending load (all-gather:
descending), so the fast dimensions take the bigger early phases and no dimension idles while another
is the bottleneck. When the least and most loaded dimensions differ by less than what 1/16 of a chunk
would add, the chunk keeps the default order.

This is a port of ASTRA-sim's OfflineGreedy::get_chunk_scheduling (astra-sim/system/scheduling/
OfflineGreedy.cc, the policy its 1.0 config called `offlineGreedy`), down to its integer chunk sizes,
its stable sort of ≤ 16 dimensions and its bookkeeping when it falls back to the default order; the
finish times it leads to are checked against ASTRA-sim's own in tests/sim/test_themis_parity.py.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

MIB = 1 << 20  # the loads are kept in MiB per unit of dimension-0 bandwidth, as OfflineGreedy does
FALLBACK_FRACTION = 16  # diff below recommended_chunk / 16: the default order


@dataclasses.dataclass(kw_only=True)
class _DimLoad:
    dim: int
    load: float = 0.0


def _add(load: _DimLoad, chunk: int, size: int, bw_ratio: float, gather: bool) -> int:
    """Charge one phase of `chunk` bytes on a dimension of `size` NPUs; return the next phase's bytes."""
    if gather:
        load.load += (chunk / MIB) * (size - 1) / bw_ratio
        return chunk * size
    load.load += (chunk / MIB) * ((size - 1) / size) / bw_ratio
    return chunk // size


def chunk_orders(sizes: Sequence[int], bandwidths: Sequence[float], chunks: Sequence[int],
                 recommended_chunk: int, *, gather: bool) -> list[tuple[int, ...]]:
    """The dimension order of each chunk of one collective: `sizes[d]` NPUs and `bandwidths[d]` per
    dimension d (a dimension of size 1 is not involved), `chunks` the chunk sizes in issue order.
    `gather` for an all-gather; reduce-scatter and all-reduce (its reduce-scatter half) otherwise.
    The orders list every dimension, involved or not, as ASTRA-sim's dim_mapper does."""
    ndims = len(sizes)
    ratio = [bw / bandwidths[0] for bw in bandwidths]
    involved = [s > 1 for s in sizes]
    loads = [_DimLoad(dim=d) for d in range(ndims)]
    orders: list[tuple[int, ...]] = []
    for _ in chunks:
        loads.sort(key=lambda x: x.load)  # std::sort on <= 16 elements: insertion sort, stable
        if gather:
            loads.reverse()
        chunk = recommended_chunk
        result: list[int] = []
        fallback = checked = False
        for pos, dl in enumerate(loads):
            if not involved[dl.dim]:
                result.append(dl.dim)
                continue
            if not checked:  # the first involved dimension decides: greedy order or the default one
                checked = True
                if _diff_bytes(loads, pos, sizes, ratio, involved, gather) < recommended_chunk // FALLBACK_FRACTION:
                    fallback = True
                    break
            result.append(dl.dim)
            chunk = _add(dl, chunk, sizes[dl.dim], ratio[dl.dim], gather)
        if fallback:
            loads.sort(key=lambda x: x.dim)
            if gather:
                loads.reverse()
            chunk = recommended_chunk
            # OfflineGreedy charges position d of the (reversed, for a gather) list with dimension d's
            # cost: for a gather that is dimension ndims-1-d's entry. Kept as ASTRA-sim computes it.
            for d in range(ndims):
                if involved[d]:
                    chunk = _add(loads[d], chunk, sizes[d], ratio[d], gather)
            result = list(range(ndims))
        orders.append(tuple(result))
    return orders


def _diff_bytes(loads: list[_DimLoad], pos: int, sizes: Sequence[int], ratio: Sequence[float],
                involved: Sequence[bool], gather: bool) -> int:
    """How many bytes the first involved dimension could take before it reaches the most loaded one
    (OfflineGreedy's diff_size, truncated to an integer as its uint64 is)."""
    first = loads[pos]
    if not gather:
        gap = abs(loads[-1].load - first.load)
        n = sizes[first.dim]
        return int((gap * ratio[first.dim]) / ((n - 1) / n) * MIB)
    last = len(loads) - 1
    while not involved[loads[last].dim]:
        last -= 1
    ref = loads[last]
    gap = abs(ref.load - first.load)
    diff = int((gap * ratio[ref.dim]) / (sizes[ref.dim] - 1) * MIB)
    last -= 1
    while pos <= last:
        if involved[loads[last].dim]:
            diff //= sizes[loads[last].dim]
        last -= 1
    return diff
