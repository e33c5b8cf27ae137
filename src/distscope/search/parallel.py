"""The plan search's layout loop over several processes, with the serial search's result.

The serial loop (planner._Search) visits layouts in order of their compute bound and skips a (layout,
sequence parallel, micro-batch) whose bound is not below the slowest kept step time (its threshold). Here:
1. this process searches the first PRELUDE layouts (the most promising);
2. the rest, in order, are cut into blocks that worker processes search (`workers` at a time), each skipping
   by the threshold of everything before it that is replayed so far (and its own), and recording every
   candidate it keeps (planner.Added: its recipe, bound and keys);
3. the blocks' records are replayed in the serial order (layout, sequence parallel, sharding, micro-batch),
   block after block: one whose bound is not below the replayed threshold is one the serial loop skipped,
   the rest enter the two kept sets exactly as they did there (ties included);
4. the kept recipes are rebuilt into plans and estimated again (the estimate is deterministic).
A block's starting threshold is the serial loop's at an earlier point, and its own is never below the serial
loop's at the same point (its extra candidates were tried under a bound at or above that threshold), so it
skips only what the serial loop skipped, and the replay finds every candidate the serial loop kept. It
evaluates more plans than the serial loop (`evaluated` counts them) and returns the same top and pool.
Workers come from a fork server preloaded with the planner, as explore's do (explore/local.py).
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool

from distscope.errors import DistscopeError
from distscope.model.estimate import estimate
from distscope.search.planner import Added, Candidate, Progress, _Keeper, _Search
from distscope.search.space import Layout, SearchSpace, base_plan
from distscope.system.topology import Cluster
from distscope.workload.spec import ModelSpec
from distscope.workload.training import TrainingShape

# fewer layouts than this run in this process: a pool's start (~1 s) would cost more than it saves
MIN_LAYOUTS = 256
# layouts this process searches first for a threshold the workers start from
PRELUDE = 16
# blocks per worker: each block starts from the threshold of every block before it (replayed), so more
# blocks skip more; progress moves as blocks finish
BLOCKS_PER_WORKER = 8
PRELOAD = ["distscope.search.planner", "distscope.search.parallel"]


def cpu_count() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


class Replay:
    """The serial loop's two kept sets (by step time and by comm-free time), rebuilt from records given
    block by block in the serial order: a record whose bound is not below the kept step times' threshold
    is one the serial loop skipped."""

    def __init__(self, n: int) -> None:
        self.keeper: _Keeper[Added] = _Keeper(n, lambda r: r.key)
        self.comm: _Keeper[Added] = _Keeper(n, lambda r: r.comm_key)

    def add(self, records: list[Added]) -> None:
        """The records of the next block (or blocks), all of whose layouts follow the ones added so far."""
        for r in sorted(records, key=lambda r: r.order):
            if r.bound < self.keeper.threshold():
                self.keeper.add(r)
                self.comm.add(r)


def _part(spec: ModelSpec, shape: TrainingShape, cluster: Cluster, space: SearchSpace, keep: int, ceiling: float,
          part: list[tuple[int, Layout]]) -> tuple[list[Added], int, int]:
    """A worker's block: its layouts searched under `ceiling`, the threshold of the layouts before them."""
    s = _Search(spec, shape, cluster, space, keep, ceiling=ceiling, record=True)
    for i, lay in part:
        s.layout(lay, i)
    assert s.records is not None
    return s.records, s.evaluated, s.feasible


def _rebuild(s: _Search, lays: list[Layout], r: Added) -> Candidate:
    """The candidate a record describes, estimated again; its key must be the recorded one."""
    plan = dataclasses.replace(base_plan(s.space, lays[r.order[0]], r.sharding, r.sp, r.micro_batch),
                               recompute=r.recompute, recompute_layers=r.recompute_layers)
    c = Candidate(plan, estimate(s.spec, s.shape, s.cluster, plan, software=s.space.software, screen=True))
    if c.step_time_s != r.key:
        raise AssertionError(f"rebuilt plan {plan} estimates {c.step_time_s} s, recorded {r.key} s")
    return c


def _kept(s: _Search, lays: list[Layout], kept: Replay) -> tuple[list[Candidate], list[Candidate]]:
    """The replayed kept sets as candidates (by step time, by comm-free time), each rebuilt once."""
    built: dict[tuple[int, int, int, int], Candidate] = {}
    for r in (*kept.keeper.sorted(), *kept.comm.sorted()):
        if r.order not in built:
            built[r.order] = _rebuild(s, lays, r)
    return [built[r.order] for r in kept.keeper.sorted()], [built[r.order] for r in kept.comm.sorted()]


def search_layouts(s: _Search, lays: list[Layout], workers: int,
                   progress: Progress | None) -> tuple[list[Candidate], list[Candidate], int, int]:
    """(kept by step time, kept by comm-free time, plans evaluated, feasible) of `lays` (in the search's
    order) for the search `s` describes, as its serial loop keeps them (module docstring)."""
    n_keep = s.keeper.n
    kept = Replay(n_keep)
    head = _Search(s.spec, s.shape, s.cluster, s.space, n_keep, record=True)
    for i, lay in enumerate(lays[:PRELUDE]):
        head.layout(lay, i)
    assert head.records is not None
    kept.add(head.records)
    evaluated, feasible, done = head.evaluated, head.feasible, min(PRELUDE, len(lays))
    if progress is not None:
        progress(done, len(lays))
    rest = list(enumerate(lays))[PRELUDE:]
    if not rest:  # the prelude held every layout
        return (*_kept(s, lays, kept), evaluated, feasible)
    size = -(-len(rest) // (workers * BLOCKS_PER_WORKER))
    blocks = [rest[i:i + size] for i in range(0, len(rest), size)]
    ctx = multiprocessing.get_context("forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn")
    if ctx.get_start_method() == "forkserver":
        ctx.set_forkserver_preload(PRELOAD)
    ex = ProcessPoolExecutor(max_workers=min(workers, len(blocks)), mp_context=ctx)
    finished = False
    try:
        pending: dict[Future[tuple[list[Added], int, int]], int] = {}
        results: dict[int, list[Added]] = {}
        submitted = replayed = 0
        while replayed < len(blocks):
            while submitted < len(blocks) and len(pending) < workers:
                # the replayed prefix's threshold: the serial loop's is no higher anywhere after it
                f = ex.submit(_part, s.spec, s.shape, s.cluster, s.space, n_keep, kept.keeper.threshold(),
                              blocks[submitted])
                pending[f] = submitted
                submitted += 1
            ready, _ = wait(pending, return_when=FIRST_COMPLETED)
            for f in ready:
                k = pending.pop(f)
                results[k], ev, fe = f.result()
                evaluated += ev
                feasible += fe
                done += len(blocks[k])
            while replayed in results:
                kept.add(results.pop(replayed))
                replayed += 1
            if progress is not None:
                progress(done, len(lays))
        finished = True
    except BrokenProcessPool as exc:
        raise DistscopeError(f"a plan-search worker process died ({exc}); run again with --workers 1") from None
    finally:
        if not finished:  # an error or an interrupt: the workers go now, not after their block
            for proc in list(getattr(ex, "_processes", {}).values()):
                proc.terminate()
        ex.shutdown(wait=finished, cancel_futures=True)
    return (*_kept(s, lays, kept), evaluated, feasible)
