"""Collective timing with ASTRA-sim's system-layer semantics on a multi-dimensional analytical network.

Read from ASTRA-sim (astra-sim/system/collective/Ring.cc, AllToAll.cc, PacketBundle.cc, MemBus.cc,
Sys::generate_collective) and checked against data/validation/astra_sim/astra_sim_reference.csv:

* A collective of `size` bytes is split into `preferred-dataset-splits` chunks (Sys::determine_chunk_size).
* Each chunk walks a list of phases, one per dimension. With `localBWAware`, all-reduce is
  reduce-scatter over dims 0..k-1, all-reduce on dim k, all-gather back over k-1..0; reduce-scatter runs
  dims upward, all-gather downward, all-to-all runs every dim upward on the full chunk.
* Every dimension is a FIFO queue that runs at most `active-chunks-per-dimension` chunk-phases at once;
  all chunks enter their first phase's queue at t=0, so chunks pipeline across dimensions.
* A ring phase over n NPUs (Ring.cc): all-reduce 2(n-1) steps of data/n; reduce-scatter n-1 steps of
  data/n; all-gather n-1 steps of the per-rank data; all-to-all n(n-1)/2 steps of data/n (messages are
  forwarded around the ring).
* One step = one message to the ring neighbour: hops*latency + bytes/bandwidth + endpoint-delay
  (MemBus::send_from_NPU_to_MA charges `communication_delay` = endpoint-delay per packet bundle). In
  store-and-forward mode (ASTRA-sim's congestion-aware backend) every hop pays latency + bytes/bandwidth.
* Reduction steps (reduce-scatter, and the first half of all-reduce) also pay PacketBundle::call's
  mem_write + 2*mem_read of the message at `local-mem-bw`.
* halvingDoubling (HalvingDoubling.cc): log2(n) steps with halving data at doubling distance;
  direct: the n-1 messages of a step go out at once (unaware: priced once). These two are not covered by
  the reference CSV.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from distscope.errors import DistscopeError
from distscope.sim.astra_config import (
    CollAlgo,
    CollOptimization,
    DimTopology,
    InterDimScheduling,
    IntraDimScheduling,
    NetworkDim,
    SystemConfig,
)
from distscope.sim.themis import chunk_orders
from distscope.trace.graph import CollKind


class PhaseOp:
    """Per-dimension phase operations (plain ints: used as tuple members in memo keys)."""

    ALL_REDUCE = 0
    REDUCE_SCATTER = 1
    ALL_GATHER = 2
    ALL_TO_ALL = 3


@dataclass(frozen=True, kw_only=True)
class DimSpan:
    """A collective's extent on one network dimension: `size` NPUs, `stride` coordinates apart."""

    dim: int
    size: int
    stride: int = 1


def message_s(dim: NetworkDim, nbytes: float, hops: int, endpoint_delay_s: float, store_and_forward: bool) -> float:
    """One message: hops*latency + bytes/bw + endpoint delay (store-and-forward: every hop serialises)."""
    wire = nbytes / dim.bandwidth_Bps
    if store_and_forward:
        return hops * (dim.latency_s + wire) + endpoint_delay_s
    return hops * dim.latency_s + wire + endpoint_delay_s


def _neighbour_hops(dim: NetworkDim, stride: int) -> int:
    return dim.hops(stride) if dim.topology is DimTopology.RING else dim.hops(1)


def phase_s(
    op: int,
    algo: CollAlgo,
    dim: NetworkDim,
    span: DimSpan,
    data_bytes: float,
    system: SystemConfig,
    store_and_forward: bool,
) -> float:
    """Time of one chunk-phase on one dimension. `data_bytes` is the chunk as this phase receives it
    (the full buffer for AR/RS/A2A, the per-rank shard for AG)."""
    n = span.size
    if n <= 1:
        return 0.0
    e = system.endpoint_delay_s
    mem = system.local_mem_bw_Bps

    def reduce_s(nbytes: float) -> float:
        return 3.0 * nbytes / mem if mem > 0 else 0.0

    if algo is CollAlgo.HALVING_DOUBLING:
        steps = max(1, math.ceil(math.log2(n)))
        total = 0.0
        for k in range(steps):
            hops = dim.hops(span.stride * (1 << k)) if dim.topology is DimTopology.RING else dim.hops(1)
            if op == PhaseOp.ALL_GATHER:
                nbytes = data_bytes * (1 << k)
                total += message_s(dim, nbytes, hops, e, store_and_forward)
            elif op == PhaseOp.ALL_TO_ALL:
                total += message_s(dim, data_bytes / 2, hops, e, store_and_forward)
            else:
                nbytes = data_bytes / (2 << k)
                total += message_s(dim, nbytes, hops, e, store_and_forward) + reduce_s(nbytes)
        if op == PhaseOp.ALL_REDUCE:  # + the all-gather back up
            for k in reversed(range(steps)):
                hops = dim.hops(span.stride * (1 << k)) if dim.topology is DimTopology.RING else dim.hops(1)
                total += message_s(dim, data_bytes / (2 << k), hops, e, store_and_forward)
        return total

    if algo is CollAlgo.DIRECT:
        # The n-1 messages of a round leave together; a ring dimension pays its farthest peer's hops.
        hops = max(dim.hops(span.stride * d) for d in range(1, n)) if dim.topology is DimTopology.RING else dim.hops(1)
        if op == PhaseOp.ALL_GATHER:
            return message_s(dim, data_bytes, hops, e, store_and_forward)
        msg = data_bytes / n
        one = message_s(dim, msg, hops, e, store_and_forward)
        if op == PhaseOp.ALL_TO_ALL:
            return one
        if op == PhaseOp.REDUCE_SCATTER:
            return one + (n - 1) * reduce_s(msg)
        return 2 * one + (n - 1) * reduce_s(msg)

    hops = _neighbour_hops(dim, span.stride)
    if op == PhaseOp.ALL_GATHER:
        return (n - 1) * message_s(dim, data_bytes, hops, e, store_and_forward)
    msg = data_bytes / n
    step = message_s(dim, msg, hops, e, store_and_forward)
    if op == PhaseOp.ALL_TO_ALL:
        return (n * (n - 1) // 2) * step
    reduce_steps = (n - 1) * (step + reduce_s(msg))
    if op == PhaseOp.REDUCE_SCATTER:
        return reduce_steps
    return reduce_steps + (n - 1) * step


_IMPL = {
    CollKind.ALL_REDUCE: "all_reduce_impl",
    CollKind.REDUCE_SCATTER: "reduce_scatter_impl",
    CollKind.REDUCE_SCATTER_BLOCK: "reduce_scatter_impl",
    CollKind.ALL_GATHER: "all_gather_impl",
    CollKind.ALL_TO_ALL: "all_to_all_impl",
    CollKind.BARRIER: "all_reduce_impl",
}
SUPPORTED = frozenset(_IMPL)


def phases(
    kind: CollKind, spans: tuple[DimSpan, ...], chunk_bytes: float, opt: CollOptimization,
    order: Sequence[int] | None = None,
) -> list[tuple[int, int, float]]:
    """(dimension index into `spans`, PhaseOp, data bytes entering the phase) for one chunk. `order`:
    the chunk's dimensions under Themis (indices into `spans`): reduce-scatter along it and, for an
    all-reduce, all-gather back in reverse; all-gather along it."""
    k = len(spans)
    out: list[tuple[int, int, float]] = []
    data = chunk_bytes

    def walk(seq: Iterable[int], op: int, data: float) -> float:
        for i in seq:
            out.append((i, op, data))
            data = data / spans[i].size if op == PhaseOp.REDUCE_SCATTER else data * spans[i].size
        return data

    if kind in (CollKind.ALL_REDUCE, CollKind.BARRIER):
        if order is not None:
            walk(reversed(order), PhaseOp.ALL_GATHER, walk(order, PhaseOp.REDUCE_SCATTER, data))
            return out
        if opt is CollOptimization.BASELINE or k == 1:
            return [(i, PhaseOp.ALL_REDUCE, data) for i in range(k)]
        data = walk(range(k - 1), PhaseOp.REDUCE_SCATTER, data)
        out.append((k - 1, PhaseOp.ALL_REDUCE, data))
        walk(reversed(range(k - 1)), PhaseOp.ALL_GATHER, data)
        return out
    if kind in (CollKind.REDUCE_SCATTER, CollKind.REDUCE_SCATTER_BLOCK):
        walk(range(k) if order is None else order, PhaseOp.REDUCE_SCATTER, data)
        return out
    if kind is CollKind.ALL_GATHER:
        walk(reversed(range(k)) if order is None else order, PhaseOp.ALL_GATHER, data)
        return out
    if kind is CollKind.ALL_TO_ALL:
        return [(i, PhaseOp.ALL_TO_ALL, data) for i in range(k)]
    raise DistscopeError(f"comm_type={kind.value} is not modelled by the ASTRA-sim system layer")


# One chunk-phase: (queue key, duration, SCF size or None). The size is max(bytes in, bytes out) of the
# phase, what Sys::insert_stream compares; None for the phases it always queues FIFO (all-reduce and
# all-to-all phases).
ChunkPhase = tuple[int, float, float | None]


def pipeline_s(chunk_phases: list[list[ChunkPhase]], capacity: int, scf: bool = False) -> float:
    """Finish time of chunks whose phases queue per dimension (at most `capacity` running each).

    `chunk_phases[c]` is chunk c's list of phases. Chunks enter their first queue at t=0 in chunk order;
    a finished phase moves its chunk to the next phase's queue, then the freed queue starts its next
    waiting chunk. A queue is FIFO, or with `scf` (Themis' smallest chunk first, Sys::insert_stream) a
    chunk goes before the first waiting one at least its size, and to the back when one phase is left
    after this one.
    """
    waiting: dict[int, list[tuple[int, int]]] = {}
    running: dict[int, int] = {}
    events: list[tuple[float, int, int, int]] = []  # (finish time, seq, chunk, phase index)
    seq = 0
    finish = 0.0

    def insert(c: int, p: int) -> int:
        key, _, size = chunk_phases[c][p]
        q = waiting.setdefault(key, [])
        i = len(q)
        if scf and size is not None and len(chunk_phases[c]) - p - 1 != 1:
            i = 0
            while i < len(q) and (chunk_phases[q[i][0]][q[i][1]][2] or 0.0) < size:
                i += 1
        q.insert(i, (c, p))
        return key

    def start_ready(key: int, now: float) -> None:
        nonlocal seq
        q = waiting.get(key)
        while q and running.get(key, 0) < capacity:
            c, p = q.pop(0)
            running[key] = running.get(key, 0) + 1
            seq += 1
            heapq.heappush(events, (now + chunk_phases[c][p][1], seq, c, p))

    for c, ph in enumerate(chunk_phases):
        if ph:
            start_ready(insert(c, 0), 0.0)
    while events:
        now, _, c, p = heapq.heappop(events)
        finish = max(finish, now)
        key = chunk_phases[c][p][0]
        running[key] -= 1
        nxt = insert(c, p + 1) if p + 1 < len(chunk_phases[c]) else None
        start_ready(key, now)
        if nxt is not None:
            start_ready(nxt, now)
    return finish


def _themis_phases(kind: CollKind, spans: tuple[DimSpan, ...], dims: tuple[NetworkDim, ...], size_bytes: int,
                   system: SystemConfig) -> list[list[tuple[int, int, float]]]:
    """Per chunk, its phases (`phases`) in Themis' dimension order (themis.chunk_orders), with
    Sys::generate_collective's chunking (size // splits, at least one byte per NPU)."""
    gather = kind is CollKind.ALL_GATHER
    splits = system.preferred_dataset_splits
    chunk = size_bytes // splits
    total_npus = math.prod(d.npus_count for d in dims)
    if not gather and total_npus > chunk:
        chunk = total_npus
        size_bytes = splits * chunk
    chunks = [min(chunk, size_bytes - i) for i in range(0, size_bytes, chunk)]
    by_dim = {s.dim: i for i, s in enumerate(spans)}
    sizes = [spans[by_dim[d]].size if d in by_dim else 1 for d in range(len(dims))]
    orders = chunk_orders(sizes, [d.bandwidth_Bps for d in dims], chunks, chunk, gather=gather)
    return [phases(kind, spans, float(nbytes), system.collective_optimization,
                   order=[by_dim[d] for d in order if d in by_dim])
            for nbytes, order in zip(chunks, orders, strict=True)]


def _scf_size(op: int, data: float, n: int) -> float | None:
    """max(bytes in, bytes out) of a phase, None for the ones queued FIFO (Sys::insert_stream)."""
    if op == PhaseOp.ALL_GATHER:
        return data * n
    if op == PhaseOp.REDUCE_SCATTER:
        return data
    return None


@lru_cache(maxsize=65536)
def collective_s(
    kind: CollKind,
    size_bytes: int,
    spans: tuple[DimSpan, ...],
    dims: tuple[NetworkDim, ...],
    system: SystemConfig,
    store_and_forward: bool,
) -> float:
    """Time of one collective on the dimensions `spans` (indices into `dims`), alone on the network."""
    spans = tuple(s for s in spans if s.size > 1)
    if not spans:
        return 0.0
    impl = getattr(system, _IMPL[kind]) if kind in _IMPL else None
    if impl is None:
        raise DistscopeError(f"comm_type={kind.value} is not modelled by the ASTRA-sim system layer")
    splits = system.preferred_dataset_splits
    if system.inter_dimension_scheduling is InterDimScheduling.THEMIS and kind is not CollKind.ALL_TO_ALL:
        per_chunk = _themis_phases(kind, spans, dims, size_bytes, system)
    else:
        one = phases(kind, spans, size_bytes / splits, system.collective_optimization)
        per_chunk = [one] * splits
    priced: dict[tuple[int, int, float], ChunkPhase] = {}
    chunk_phases = []
    for ph in per_chunk:
        row = []
        for i, op, data in ph:
            if (i, op, data) not in priced:
                span = spans[i]
                algo = impl[span.dim] if span.dim < len(impl) else impl[-1]
                t = phase_s(op, algo, dims[span.dim], span, data, system, store_and_forward)
                priced[i, op, data] = (span.dim, t, _scf_size(op, data, span.size))
            row.append(priced[i, op, data])
        chunk_phases.append(row)
    scf = system.intra_dimension_scheduling is IntraDimScheduling.SCF
    return pipeline_s(chunk_phases, system.active_chunks_per_dimension, scf)
