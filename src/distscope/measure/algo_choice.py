"""Choosing the collective implementation per op and message size from measurements (MCR-DL, Anthony et
al. 2023: pick the backend per operation and size), and a torch.distributed dispatcher that applies the
choice. On this machine the only torch.distributed backend is gloo (no MPI, NCCL or UCC in the CPU
build), so the candidates are algorithms composed from gloo's primitives; with more backends the same
table holds (op, implementation) pairs across them.

Candidates (every one returns the same result, up to floating-point summation order; a test checks it):
- all_reduce:      `gloo` dist.all_reduce; `rs+ag` reduce_scatter_tensor then all_gather_into_tensor
                   (Rabenseifner's decomposition); `ag+sum` all_gather_into_tensor of the whole buffer and a
                   local sum (one round: latency-bound sizes); `reduce+bcast` reduce to rank 0 then broadcast.
- all_gather:      `gloo` all_gather_into_tensor; `a2a` all_to_all_single of n copies of the input.
- reduce_scatter:  `gloo` reduce_scatter_tensor; `ar+slice` all_reduce then this rank's slice; `a2a+sum`
                   all_to_all_single then a local sum of the n received chunks.

`measure_table` times every candidate at every size on the ranks it runs on (each (size, candidate)
`iters` times, interleaved so interference spreads over all of them; the median of the ranks' maximum),
and `ChoiceTable.best` answers, at the nearest measured size (log scale), the fastest candidate there when it
beats the best single candidate (least total time over the sizes) by SWITCH_MARGIN, else that one.
`Dispatcher` has all_reduce / all_gather_into_tensor / reduce_scatter_tensor with torch.distributed's
signatures and runs the table's choice for each call's size; `ddp_hook` plugs it into DDP.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist

from distscope.comm.collective import Collective
from distscope.errors import DistscopeError

Impl = Callable[[torch.Tensor, torch.Tensor], None]  # (output, input) -> writes output
SWITCH_MARGIN = 0.10  # leave the best single candidate at a size only for a 10% faster one there


def _all_reduce_gloo(out: torch.Tensor, x: torch.Tensor) -> None:
    out.copy_(x)
    dist.all_reduce(out)


def _all_reduce_rs_ag(out: torch.Tensor, x: torch.Tensor) -> None:
    n = dist.get_world_size()
    part = torch.empty(x.numel() // n, dtype=x.dtype)
    dist.reduce_scatter_tensor(part, x)
    dist.all_gather_into_tensor(out, part)


def _all_reduce_ag_sum(out: torch.Tensor, x: torch.Tensor) -> None:
    n = dist.get_world_size()
    everything = torch.empty(n * x.numel(), dtype=x.dtype)
    dist.all_gather_into_tensor(everything, x)
    torch.sum(everything.view(n, -1), dim=0, out=out)


def _all_reduce_reduce_bcast(out: torch.Tensor, x: torch.Tensor) -> None:
    out.copy_(x)
    dist.reduce(out, 0)
    dist.broadcast(out, 0)


def _all_gather_gloo(out: torch.Tensor, x: torch.Tensor) -> None:
    dist.all_gather_into_tensor(out, x)


def _all_gather_a2a(out: torch.Tensor, x: torch.Tensor) -> None:
    n = dist.get_world_size()
    dist.all_to_all_single(out, x.repeat(n))


def _reduce_scatter_gloo(out: torch.Tensor, x: torch.Tensor) -> None:
    dist.reduce_scatter_tensor(out, x)


def _reduce_scatter_ar_slice(out: torch.Tensor, x: torch.Tensor) -> None:
    y = x.clone()
    dist.all_reduce(y)
    k = out.numel()
    out.copy_(y[dist.get_rank() * k:(dist.get_rank() + 1) * k])


def _reduce_scatter_a2a_sum(out: torch.Tensor, x: torch.Tensor) -> None:
    n = dist.get_world_size()
    got = torch.empty_like(x)
    dist.all_to_all_single(got, x)
    torch.sum(got.view(n, -1), dim=0, out=out)


CANDIDATES: dict[Collective, dict[str, Impl]] = {
    Collective.ALL_REDUCE: {"gloo": _all_reduce_gloo, "rs+ag": _all_reduce_rs_ag, "ag+sum": _all_reduce_ag_sum,
                            "reduce+bcast": _all_reduce_reduce_bcast},
    Collective.ALL_GATHER: {"gloo": _all_gather_gloo, "a2a": _all_gather_a2a},
    Collective.REDUCE_SCATTER: {"gloo": _reduce_scatter_gloo, "ar+slice": _reduce_scatter_ar_slice,
                                "a2a+sum": _reduce_scatter_a2a_sum},
}


def buffers(op: Collective, numel: int, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(output, input) for `op` on `numel` elements of the nccl-tests size (a multiple of n)."""
    x_len = numel // n if op is Collective.ALL_GATHER else numel
    out_len = numel // n if op is Collective.REDUCE_SCATTER else numel
    return torch.empty(out_len), torch.randn(x_len)


@dataclasses.dataclass(frozen=True)
class ChoiceTable:
    """Measured seconds per (op, size in nccl-tests bytes, candidate), and the choice they imply."""

    world: int
    seconds: dict[str, dict[int, dict[str, float]]]  # op value -> size -> candidate -> median s

    def default(self, op: Collective) -> str:
        """The best single candidate: the least time summed over the measured sizes."""
        rows = self._rows(op)
        names = next(iter(rows.values()))
        return min(names, key=lambda c: sum(r[c] for r in rows.values()))

    def best(self, op: Collective, size_bytes: float) -> str:
        """The candidate for a call: at the nearest measured size (log scale), the fastest one if it beats the
        best single candidate by SWITCH_MARGIN, else the best single one (a measured table is noisy: a
        switch on a 3% difference is as likely to lose as to win)."""
        rows = self._rows(op)
        size = min(rows, key=lambda s: abs(math.log(max(size_bytes, 1.0)) - math.log(s)))
        row, base = rows[size], self.default(op)
        fastest = min(row, key=lambda c: row[c])
        return fastest if row[fastest] < row[base] * (1 - SWITCH_MARGIN) else base

    def _rows(self, op: Collective) -> dict[int, dict[str, float]]:
        rows = self.seconds.get(op.value)
        if not rows:
            raise DistscopeError(f"op={op.value}: not in the choice table (measured: {', '.join(self.seconds)})")
        return rows

    def to_dict(self) -> dict[str, Any]:
        return {"world": self.world, "seconds": {op: {str(s): dict(c) for s, c in rows.items()}
                                                 for op, rows in self.seconds.items()}}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ChoiceTable:
        return cls(world=int(d["world"]), seconds={op: {int(s): dict(c) for s, c in rows.items()}
                                                    for op, rows in d["seconds"].items()})


def _timed(impl: Impl, out: torch.Tensor, x: torch.Tensor) -> float:
    """The slowest rank's seconds for one call (a collective ends when all ranks do)."""
    t0 = time.perf_counter()
    impl(out, x)
    t = torch.tensor([time.perf_counter() - t0])
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t)


def measure_table(sizes: list[int], *, iters: int = 7, warmup: int = 2,
                  ops: tuple[Collective, ...] = tuple(CANDIDATES)) -> ChoiceTable:
    """Run on every rank (an initialized gloo group): the median over `iters` of every candidate's
    slowest-rank time at each size (float32; sizes rounded to whole multiples of n elements)."""
    n = dist.get_world_size()
    cases = []
    for op in ops:
        for size in sizes:
            numel = max(n, size // 4 // n * n)
            out, x = buffers(op, numel, n)
            for name, impl in CANDIDATES[op].items():
                cases.append((op, size, name, impl, out, x))
    for _ in range(warmup):
        for _, _, _, impl, out, x in cases:
            impl(out, x)
    samples: dict[tuple[str, int, str], list[float]] = {}
    for _ in range(iters):  # interleaved: a burst of interference spreads over every case
        for op, size, name, impl, out, x in cases:
            samples.setdefault((op.value, size, name), []).append(_timed(impl, out, x))
    seconds: dict[str, dict[int, dict[str, float]]] = {}
    for (op_v, size, name), ts in samples.items():
        seconds.setdefault(op_v, {}).setdefault(size, {})[name] = statistics.median(ts)
    return ChoiceTable(world=n, seconds=seconds)


class Dispatcher:
    """torch.distributed's all_reduce / all_gather_into_tensor / reduce_scatter_tensor, each call run by the
    candidate the table chooses for its size (float32 tensors, the default group)."""

    def __init__(self, table: ChoiceTable, fixed: str | None = None) -> None:
        self.table, self.fixed = table, fixed  # fixed: one candidate for every call (the baselines)
        self.calls: dict[str, int] = {}

    def _run(self, op: Collective, out: torch.Tensor, x: torch.Tensor, size_bytes: float) -> None:
        name = self.fixed if self.fixed is not None else self.table.best(op, size_bytes)
        if op is Collective.ALL_REDUCE and x.numel() % dist.get_world_size():
            name = "gloo"  # the decompositions split the buffer evenly over the ranks
        self.calls[f"{op.value}:{name}"] = self.calls.get(f"{op.value}:{name}", 0) + 1
        CANDIDATES[op][name](out, x)

    def all_reduce(self, t: torch.Tensor) -> None:
        out = torch.empty_like(t)
        self._run(Collective.ALL_REDUCE, out, t, t.numel() * t.element_size())
        t.copy_(out)

    def all_gather_into_tensor(self, out: torch.Tensor, t: torch.Tensor) -> None:
        self._run(Collective.ALL_GATHER, out, t, out.numel() * out.element_size())

    def reduce_scatter_tensor(self, out: torch.Tensor, t: torch.Tensor) -> None:
        self._run(Collective.REDUCE_SCATTER, out, t, t.numel() * t.element_size())


def ddp_hook(dispatcher: Dispatcher) -> Callable[[Any, Any], torch.futures.Future[torch.Tensor]]:
    """A DDP communication hook that all-reduces each gradient bucket through the dispatcher (averaged)."""

    def hook(_state, bucket):  # no annotations: DDP rejects a bucket annotation it cannot resolve
        t = bucket.buffer()
        n = len(t) - len(t) % dist.get_world_size()
        if n:
            head = t[:n].contiguous()
            dispatcher.all_reduce(head)
            t[:n] = head
        if n < len(t):
            dist.all_reduce(t[n:])  # a tail that does not split evenly over the ranks
        t /= dist.get_world_size()
        fut: torch.futures.Future[torch.Tensor] = torch.futures.Future()
        fut.set_result(t)
        return fut

    return hook


def table_worker(rank: int, world: int, sizes: list[int], iters: int) -> dict[str, Any]:
    """compress/launch.run_gloo's worker for `distscope measure algorithms`: the table as a dict."""
    return measure_table(sizes, iters=iters).to_dict()
