"""Time real torch.distributed collectives over a sweep of message sizes (run on every rank).

Per (op, dtype, size): `warmup` untimed calls, a barrier, then `iters` timed calls back to back, as
nccl-tests does. Each call is timed on every rank from its issue until its Work completes (plus
`torch.cuda.synchronize()` on GPU); an iteration's time is the mean over ranks of those times (nccl-tests
also averages over ranks), gathered with one all-reduce after the timed loop. Reported: min/median/max
over iterations. (A barrier before every call was tried and rejected: on an oversubscribed CPU host the
barrier's release skew, milliseconds, swamped the op itself.) Iterations are interleaved across sizes
(iteration i of every size, then iteration i+1, ...) so that a burst of interference from other
processes spreads over all sizes instead of biasing one; when the buffers of all sizes together would
exceed `INTERLEAVE_LIMIT_BYTES`, sizes run one after another instead.

What runs for each op (S = reported nccl-tests bytes, n = ranks, e = element size):
- all_reduce:     dist.all_reduce on S/e elements.
- all_gather:     dist.all_gather_into_tensor, output S/e elements, input S/(n e).
- reduce_scatter: dist.reduce_scatter_tensor, input S/e elements, output S/(n e).
- all_to_all:     dist.all_to_all_single, S/e elements in and out.
- broadcast:      dist.broadcast from rank 0, S/e elements.
- send_recv:      every rank isend()s S bytes to rank+1 and irecv()s S bytes from rank-1 (nccl-tests
                  sendrecv_perf's ring pattern), both waited for.
Sizes are rounded down to whole elements (and to multiples of n elements where the op splits the buffer).
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Callable, Iterator

import torch
import torch.distributed as dist

from distscope.comm.collective import Collective
from distscope.errors import DistscopeError, closest
from distscope.measure.result import CollectiveResult

INTERLEAVE_LIMIT_BYTES = 1 << 30

SWEEP_OPS = (
    Collective.ALL_REDUCE,
    Collective.ALL_GATHER,
    Collective.REDUCE_SCATTER,
    Collective.ALL_TO_ALL,
    Collective.BROADCAST,
    Collective.SEND_RECV,
)


def parse_dtype(name: str) -> torch.dtype:
    dt = getattr(torch, name, None)
    if not isinstance(dt, torch.dtype):
        choices = ["float32", "float16", "bfloat16", "float64", "int32", "int64", "int8"]
        raise DistscopeError(f"dtype={name!r} is not a torch dtype{closest(name, choices)}")
    return dt


@dataclasses.dataclass(frozen=True, kw_only=True)
class SweepConfig:
    ops: tuple[Collective, ...] = SWEEP_OPS
    dtypes: tuple[str, ...] = ("float32",)
    min_bytes: int = 1024
    max_bytes: int = 1 << 22
    step_factor: int = 4
    step_bytes: int = 0  # > 0: linear steps of this many bytes (nccl-tests -i) instead of the factor
    warmup: int = 3
    iters: int = 10
    level: str = "default"

    def __post_init__(self) -> None:
        bad = [o for o in self.ops if o not in SWEEP_OPS]
        if bad:
            raise DistscopeError(
                f"ops={[o.value for o in bad]} cannot be swept; choose from {[o.value for o in SWEEP_OPS]}"
            )
        for d in self.dtypes:
            parse_dtype(d)
        if not 0 < self.min_bytes <= self.max_bytes:
            raise DistscopeError(
                f"min_bytes={self.min_bytes}, max_bytes={self.max_bytes}: need 0 < min <= max"
            )
        if self.step_bytes < 0:
            raise DistscopeError(f"step_bytes={self.step_bytes} must be >= 0")
        if self.step_factor < 2:
            raise DistscopeError(f"steps={self.step_factor} (size multiplier) must be >= 2")
        if self.iters < 1 or self.warmup < 0:
            raise DistscopeError(f"iters={self.iters} must be >= 1 and warmup={self.warmup} >= 0")

    def sizes(self) -> Iterator[int]:
        s = self.min_bytes
        while s <= self.max_bytes:
            yield s
            s = s + self.step_bytes if self.step_bytes else s * self.step_factor


def _elements(op: Collective, size_bytes: int, elem: int, n: int) -> int:
    count = max(1, size_bytes // elem)
    if op in (Collective.ALL_GATHER, Collective.REDUCE_SCATTER, Collective.ALL_TO_ALL):
        count = max(n, count - count % n)
    return count


def _make_call(
    op: Collective, count: int, dtype: torch.dtype, device: torch.device, group: dist.ProcessGroup
) -> Callable[[], None]:
    n, rank = dist.get_world_size(group), dist.get_rank(group)
    full = torch.ones(count, dtype=dtype, device=device)
    part = torch.ones(count // n, dtype=dtype, device=device)
    out = torch.empty_like(full)
    if op is Collective.ALL_REDUCE:
        return lambda: dist.all_reduce(full, group=group)
    if op is Collective.ALL_GATHER:
        return lambda: dist.all_gather_into_tensor(full, part, group=group)
    if op is Collective.REDUCE_SCATTER:
        return lambda: dist.reduce_scatter_tensor(part, full, group=group)
    if op is Collective.ALL_TO_ALL:
        return lambda: dist.all_to_all_single(out, full, group=group)
    if op is Collective.BROADCAST:
        return lambda: dist.broadcast(full, group_src=0, group=group)
    peer_to = dist.get_global_rank(group, (rank + 1) % n)
    peer_from = dist.get_global_rank(group, (rank - 1) % n)

    def send_recv() -> None:
        for w in (dist.isend(full, peer_to, group=group), dist.irecv(out, peer_from, group=group)):
            if w is not None:
                w.wait()

    return send_recv


def run_sweep(
    cfg: SweepConfig,
    *,
    group: dist.ProcessGroup | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[CollectiveResult]:
    """Collective call on every rank of `group`; returns identical results on every rank.
    `progress(points measured, points)` after each batch of sizes."""
    group = group or dist.distributed_c10d._get_default_group()
    n = dist.get_world_size(group)
    backend = dist.get_backend(group)
    device = torch.device("cuda", torch.cuda.current_device()) if backend == "nccl" else torch.device("cpu")
    device_name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    results: list[CollectiveResult] = []
    ops = [op for op in cfg.ops if not (op is Collective.SEND_RECV and n < 2)]
    total = len(ops) * len(cfg.dtypes) * len(list(cfg.sizes()))
    for op in ops:
        if op is Collective.SEND_RECV and n < 2:
            continue
        for dtype_name in cfg.dtypes:
            dtype = parse_dtype(dtype_name)
            elem = torch.empty((), dtype=dtype).element_size()
            counts = [_elements(op, size, elem, n) for size in cfg.sizes()]
            batches = [counts] if 3 * sum(counts) * elem <= INTERLEAVE_LIMIT_BYTES else [[c] for c in counts]
            for batch in batches:
                calls = [_make_call(op, count, dtype, device, group) for count in batch]
                for call in calls:
                    for _ in range(cfg.warmup):
                        call()
                sync()
                times = torch.empty(len(batch), cfg.iters, dtype=torch.float64)
                dist.barrier(group=group)
                for i in range(cfg.iters):
                    for j, call in enumerate(calls):
                        t0 = time.perf_counter()
                        call()
                        sync()
                        times[j, i] = time.perf_counter() - t0
                agg = times.to(device)
                dist.all_reduce(agg, group=group)
                for count, row in zip(batch, (agg / n).cpu().tolist(), strict=True):
                    results.append(
                        CollectiveResult(
                            op=op,
                            bytes=count * elem,
                            dtype=dtype_name,
                            nranks=n,
                            time_s=statistics.median(row),
                            time_min_s=min(row),
                            time_max_s=max(row),
                            iters=cfg.iters,
                            level=cfg.level,
                            backend=backend,
                            source="distscope measure collectives",
                            device=device_name,
                        )
                    )
                if progress is not None:
                    progress(len(results), total)
    return results
