"""Exhaustive plan search: enumerate the space (space.py), prune, estimate, rank, re-partition.

Per layout (tp, pp, vp, cp, ep, dp) x sequence parallel x sharding, micro-batches are tried in
increasing order; for each:
1. estimate with no recompute: if it fits, that is the fastest recompute choice (recompute only adds
   time), done;
2. analytic bound: if weights + gradients + optimizer state + workspace alone exceed HBM, no
   recompute and no larger micro-batch can fit: stop this sharding;
3. full recompute of every layer (the least memory): if even that does not fit, stop (memory grows
   with the micro-batch);
4. otherwise bisect the fewest block-recomputed layers per chunk that fit, and try selective
   recompute (unfused attention only; with flash attention it equals none) and, for torchtitan,
   its per-op selective checkpointing.
Branch and bound: with stage times t_i >= their compute c_i and t_max >= t_avg, the pipeline
m·t_max + (Σt − t_max)/vp >= (m + (pp − 1)/vp) · c_avg, c_avg = (Σ_layers (fwd + bwd) + LM head) / pp
(no recompute, no communication). A (layout, sequence parallel, micro-batch) whose bound is not below
the slowest kept step time cannot enter the kept set and is skipped (compression cannot beat the
bound either: it removes communication, not compute); layouts are visited in increasing order of
the bound so good plans are found early. The best candidates are then re-partitioned with the exact
min-max DP (partition.py) over the estimator's per-layer times and re-estimated. All of this prices
interleaved 1F1B's pipeline by its closed form and folds a pipeline's per-micro-batch ZeRO streams into
its passes (estimate's `screen`, from 11% short to 6.6% over where ranks differ, and 25% short to 20%
over for folded streams; walking its graph for every plan made the GPT-3 175B search take 244 s instead
of 3.5 s), so which candidates are kept rests on it; every kept one is then estimated in full and ranked
again (_in_full). benchmarks/screen_check.py counts the plans this misses and checks the bound.
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
import time
from collections.abc import Callable
from typing import Generic, TypeVar

from distscope.model.estimate import estimate
from distscope.model.layer import head_cost, layer_cost
from distscope.model.result import Estimate
from distscope.model.stages import chunk_sizes
from distscope.plan import AttentionImpl, Framework, Placement, Plan, Recompute, Schedule
from distscope.search.partition import layer_costs, min_max_partition, part_costs
from distscope.search.space import (
    Layout,
    SearchSpace,
    Sharding,
    base_plan,
    layouts,
    micro_batches,
    sharding_of,
    shardings_for,
)
from distscope.software.presets import SoftwareProfile
from distscope.system.topology import Cluster
from distscope.workload.spec import ModelSpec
from distscope.workload.training import TrainingShape

Progress = Callable[[int, int], None]  # (layouts done, layouts total)
T = TypeVar("T")


@dataclasses.dataclass(frozen=True, kw_only=True)
class PartitionGain:
    """Optimal split vs the default (uniform / Megatron-balanced) split of one plan."""

    default_sizes: tuple[int, ...]
    optimal_sizes: tuple[int, ...]
    default_bottleneck_s: float  # slowest chunk, one micro-batch
    optimal_bottleneck_s: float
    default_step_s: float
    optimal_step_s: float
    feasible: bool = True  # the optimal split fits in memory

    @property
    def step_gain_pct(self) -> float:
        return 100.0 * (self.default_step_s - self.optimal_step_s) / self.default_step_s

    @property
    def applied(self) -> bool:
        """The plan runs the optimal split: it fits and is faster than the default."""
        return self.feasible and self.optimal_step_s < self.default_step_s


@dataclasses.dataclass(frozen=True, slots=True)
class Candidate:
    plan: Plan
    estimate: Estimate
    # the planner's re-split of this plan's layers (default split vs the exact min-max one): when
    # `partition.applied`, `plan` carries the optimal split; None when it was not checked
    partition: PartitionGain | None = None

    @property
    def step_time_s(self) -> float:
        return self.estimate.step_time_s


@dataclasses.dataclass(frozen=True, kw_only=True)
class SearchResult:
    top: tuple[Candidate, ...]  # best first
    # the kept best candidates (>= top), each estimated in full, for compression and checks
    pool: tuple[Candidate, ...]
    # the kept candidates with the lowest comm_free_time (screened estimates: they seed the compression search)
    comm_pool: tuple[Candidate, ...]
    evaluated: int
    feasible: int
    layouts: int
    search_s: float
    processes: int = 1  # the layout loop's processes (search/parallel.py; `evaluated` counts their work)

    @property
    def best(self) -> Candidate | None:
        return self.top[0] if self.top else None

    @property
    def partition(self) -> PartitionGain | None:
        """The split record of the estimator's #1 (a re-ranked #1 has its own: `Candidate.partition`)."""
        return self.top[0].partition if self.top else None


def step_time(c: Candidate) -> float:
    return c.step_time_s


def simplest_first(c: Candidate) -> tuple[float, ...]:
    """Rank by step time; exact ties (e.g. cp and dp swapped with the same tokens per GPU) go to the
    plan with fewer moving parts: smaller cp, ep, vp, pp, tp, lower ZeRO stage, no recompute."""
    p = c.plan
    return (c.step_time_s, p.cp, p.ep, p.vp, p.pp, p.tp, p.zero_stage, p.recompute_layers)


def comm_free_time(c: Candidate) -> float:
    """Step time with the exposed DP and TP communication removed: what compressing them could reach
    at best (it ranks the candidates worth trying compression on)."""
    bd = c.estimate.breakdown_s
    return c.step_time_s - bd.get("dp", 0.0) - bd.get("tp", 0.0)


class _Keeper(Generic[T]):
    """The n items with the smallest key (a bounded max-heap); ties keep the first added."""

    def __init__(self, n: int, key: Callable[[T], float]) -> None:
        self.n, self.key = n, key
        self.heap: list[tuple[float, int, T]] = []
        self.count = itertools.count()

    def add(self, c: T) -> None:
        item = (-self.key(c), next(self.count), c)
        if len(self.heap) < self.n:
            heapq.heappush(self.heap, item)
        elif item[0] > self.heap[0][0]:
            heapq.heapreplace(self.heap, item)

    def threshold(self) -> float:
        """A key a new candidate must beat to be kept (inf until full)."""
        return -self.heap[0][0] if len(self.heap) >= self.n else float("inf")

    def sorted(self) -> list[T]:
        return [c for _, _, c in sorted(self.heap, key=lambda x: (-x[0], x[1]))]


@dataclasses.dataclass(frozen=True, slots=True)
class Added:
    """A candidate the search kept, as the recipe that rebuilds it: layout index (in the search's order),
    sequence parallel, sharding, micro-batch and the recompute choice, with the bound it was tried under
    and its two keys (search/parallel.py replays these in the serial search's order)."""

    order: tuple[int, int, int, int]  # (layout, sequence-parallel, sharding, micro-batch) indices: the serial order
    bound: float
    key: float  # step_time
    comm_key: float  # comm_free_time
    sp: bool
    sharding: tuple[int, bool]
    micro_batch: int
    recompute: Recompute
    recompute_layers: int


class _Search:
    """One pass of the layout loop. `ceiling`: a step time no kept candidate can reach (a bound from another
    part of the search, search/parallel.py); `record`: also keep every added candidate's recipe (Added)."""

    def __init__(self, spec: ModelSpec, shape: TrainingShape, cluster: Cluster, space: SearchSpace, keep: int,
                 ceiling: float = float("inf"), record: bool = False) -> None:
        self.spec, self.shape, self.cluster, self.space = spec, shape, cluster, space
        self.keeper: _Keeper[Candidate] = _Keeper(keep, step_time)
        self.comm_keeper: _Keeper[Candidate] = _Keeper(keep, comm_free_time)
        self.evaluated = 0
        self.feasible = 0
        self.ceiling = ceiling
        self.records: list[Added] | None = [] if record else None

    def add(self, c: Candidate, order: tuple[int, int, int, int], bound: float) -> None:
        self.keeper.add(c)
        self.comm_keeper.add(c)
        if self.records is not None:
            p = c.plan
            self.records.append(Added(order=order, bound=bound, key=step_time(c), comm_key=comm_free_time(c),
                                      sp=p.sequence_parallel, sharding=sharding_of(p), micro_batch=p.micro_batch,
                                      recompute=p.recompute, recompute_layers=p.recompute_layers))

    def threshold(self) -> float:
        return min(self.ceiling, self.keeper.threshold())

    def compute_bound(self, lay: Layout, sp: bool, mb: int) -> float:
        """Step-time lower bound of every plan with this layout, SP and micro-batch (module docstring)."""
        spec, sp_ = self.spec, sp and lay.tp > 1
        args = (mb, self.shape.seq_len, lay.tp, lay.cp, sp_, self.space.attention, Recompute.NONE,
                self.space.precision, self.cluster.device)
        dense = layer_cost(spec, False, *args)
        n_moe = spec.moe_layers
        t = (spec.layers - n_moe) * (dense.fwd_s + dense.bwd_s)
        if n_moe:
            moe = layer_cost(spec, True, *args)
            t += n_moe * (moe.fwd_s + moe.bwd_s)
        head = head_cost(spec, mb, self.shape.seq_len, lay.tp, lay.cp, self.space.precision, self.cluster.device)
        m = self.shape.global_batch // (lay.dp * mb)
        if lay.schedule in (Schedule.ONE_F_ONE_B, Schedule.INTERLEAVED):
            return (m + (lay.pp - 1) / lay.vp) * (t + head.fwd_s + head.bwd_s) / lay.pp
        # zero-bubble, DualPipe, 2BW: at least the steady state, m passes of the average rank
        return m * (t + head.fwd_s + head.bwd_s) / lay.pp

    def est(self, plan: Plan) -> Estimate:
        self.evaluated += 1
        e = estimate(self.spec, self.shape, self.cluster, plan, software=self.space.software, screen=True)
        if e.feasible:
            self.feasible += 1
        return e

    def fit_recompute(self, plan: Plan, none_est: Estimate) -> Candidate | None:
        """Fastest feasible recompute choice for a plan whose no-recompute estimate does not fit;
        None when nothing fits (see module docstring, steps 2-4)."""
        mem = none_est.memory
        static = mem.weights_bytes + mem.grads_bytes + mem.optimizer_bytes + mem.workspace_bytes
        if static > none_est.capacity_bytes:
            return None
        full = dataclasses.replace(plan, recompute=Recompute.FULL)
        e_full = self.est(full)
        if not e_full.feasible:
            return None
        best = Candidate(full, e_full)
        chunk = max(plan.stage_layers) if plan.stage_layers else self.spec.layers // (plan.pp * plan.vp)
        if self.space.block_recompute and chunk > 1:
            lo, hi = 1, chunk  # hi = chunk means every layer (the plan `full`)
            while lo < hi:
                mid = (lo + hi) // 2
                p = dataclasses.replace(full, recompute_layers=mid)
                e = self.est(p)
                if e.feasible:
                    hi = mid
                    if e.step_time_s < best.step_time_s:
                        best = Candidate(p, e)
                else:
                    lo = mid + 1
        tries = []
        if plan.attention is AttentionImpl.UNFUSED and self.space.selective_recompute:
            tries.append(Recompute.SELECTIVE)
        if self.space.framework is Framework.TORCHTITAN and self.spec.special_layers is None:
            tries.append(Recompute.SELECTIVE_OP)  # torchtitan's per-op selective checkpointing (model/op_sac.py)
        for rc in tries:
            sel = dataclasses.replace(plan, recompute=rc)
            e = self.est(sel)
            if e.feasible and e.step_time_s < best.step_time_s:
                best = Candidate(sel, e)
        return best

    def layout(self, lay: Layout, index: int = 0) -> None:
        """Every plan of layout `lay` (the search's `index`-th) worth keeping."""
        mbs = micro_batches(self.space, self.shape, lay)
        sps = [sp for sp in self.space.sequence_parallel  # DSA's absorbed MLA needs SP with tp > 1 (model/refusal.py)
               if (not sp and self.spec.sparse_attention is None)
               or (sp and self.shape.seq_len % (lay.tp * lay.cp) == 0)] if lay.tp > 1 else [False]
        for si, sp in enumerate(dict.fromkeys(sps)):
            bounds = {mb: self.compute_bound(lay, sp, mb) for mb in mbs}
            fits_plain: set[int] = set()  # micro-batches at which the distributed optimizer fits without recompute
            allowed = shardings_for(self.space, lay)
            order = [s for s in (Sharding.DIST_OPT, Sharding.DDP, Sharding.ZERO3, Sharding.ZERO2) if s in allowed]
            for hi, sharding in enumerate(order):
                for mi, mb in enumerate(mbs):
                    at = (index, si, hi, mi)
                    if sharding == Sharding.ZERO2 and mb in fits_plain:
                        continue  # same time as the distributed optimizer, which already fits
                    if bounds[mb] >= self.threshold():
                        continue  # cannot enter the kept set (branch and bound)
                    plan = base_plan(self.space, lay, sharding, sp, mb)
                    if plan.zero_stage == 3 and plan.reshard_after_forward and lay.pp > 1 and mb in fits_plain:
                        # a pipeline re-gathering its weights every micro-batch is never faster than the
                        # distributed optimizer gathering them once (0 of 18,767 such pairs in four
                        # searches); it only saves memory, and that fits already
                        continue
                    e = self.est(plan)
                    if e.feasible:
                        self.add(Candidate(plan, e), at, bounds[mb])
                        if sharding == Sharding.DIST_OPT:
                            fits_plain.add(mb)
                        continue
                    c = self.fit_recompute(plan, e)
                    if c is None:
                        break
                    self.add(c, at, bounds[mb])


def stage_chunks(stage_totals: tuple[int, ...], vp: int) -> tuple[int, ...] | None:
    """Chunk sizes (Megatron order: chunk c on stage c mod pp) that give each stage its total, spread
    as evenly as possible over its vp chunks; None when a stage has fewer than vp layers."""
    pp = len(stage_totals)
    if min(stage_totals) < vp:
        return None
    return tuple(stage_totals[c % pp] // vp + (1 if c // pp < stage_totals[c % pp] % vp else 0) for c in range(pp * vp))


def exact(spec: ModelSpec, shape: TrainingShape, cluster: Cluster, c: Candidate,
          software: SoftwareProfile | None = None, quant_GBps: float | None = None) -> Candidate:
    """`c` with its estimate redone in full where the search screened it (estimate's `screen`)."""
    if not c.estimate.screened:
        return c
    return dataclasses.replace(c, estimate=estimate(spec, shape, cluster, c.plan, quant_GBps=quant_GBps,
                                                    software=software))


def _in_full(spec: ModelSpec, shape: TrainingShape, cluster: Cluster, cands: list[Candidate],
             software: SoftwareProfile | None) -> list[Candidate]:
    """The kept candidates, each estimated in full, fastest first. No margin decides which to skip: the
    closed form lies up to 6.6% above the full estimate where stages or chunks are uneven, folded ZeRO
    streams up to 19.5% (eight searches, benchmarks/screen_check.py), and a margin of 1e-3 once left a
    better 405B plan unreported. Estimating all of them costs ~0.2 s of a search (x1.07 on GPT-3 175B)."""
    return sorted((exact(spec, shape, cluster, c, software) for c in cands), key=simplest_first)


def repartition(spec: ModelSpec, shape: TrainingShape, cluster: Cluster, c: Candidate,
                software: SoftwareProfile | None = None, screen: bool = False) -> tuple[Candidate, PartitionGain] | None:
    """Re-split a pipelined candidate's layers with the exact min-max DP over the estimator's per-layer
    times (per stage: with interleaving, stage i's layers are spread over its vp chunks); returns the
    re-estimated candidate (faster or not, carrying the gain record when the record says `applied`)
    and the gain record. None if no split applies."""
    plan, est = c.plan, c.estimate
    lt = est.layer_times
    if plan.pp == 1 or lt is None or plan.traits.placement is not Placement.LOOP:
        return None
    pp, vp = plan.pp, plan.vp
    dense_first = spec.moe.dense_layers if spec.moe is not None else spec.layers
    costs = layer_costs(spec.layers, dense_first, lt.dense_s, lt.moe_s)
    default = chunk_sizes(spec.layers, pp, vp, plan.stage_layers)
    default_stage = tuple(sum(default[i::pp]) for i in range(pp))
    caps: list[int] | None = None
    e: Estimate | None = None
    new = plan
    for _ in range(2):
        opt = min_max_partition(costs, pp, first_extra=lt.first_s, last_extra=lt.last_s, max_items=caps)
        sizes = stage_chunks(opt.sizes, vp)
        if sizes is None:
            return None
        new = dataclasses.replace(plan, stage_layers=() if len(set(sizes)) == 1 else sizes)
        e = estimate(spec, shape, cluster, new, software=software, screen=screen)
        if e.feasible or opt.sizes[0] <= default_stage[0]:
            break
        # the first stage holds the most in-flight activations: keep its layer count, re-balance the rest
        caps = [default_stage[0]] + [spec.layers] * (pp - 1)
    assert e is not None
    final = chunk_sizes(spec.layers, pp, vp, new.stage_layers)
    gain = PartitionGain(
        default_sizes=default, optimal_sizes=final,
        default_bottleneck_s=max(part_costs(costs, default_stage, lt.first_s, lt.last_s)),
        optimal_bottleneck_s=max(part_costs(costs, tuple(sum(final[i::pp]) for i in range(pp)), lt.first_s, lt.last_s)),
        default_step_s=est.step_time_s, optimal_step_s=e.step_time_s, feasible=e.feasible,
    )
    return Candidate(new, e, gain if gain.applied else None), gain


def search(spec: ModelSpec, shape: TrainingShape, cluster: Cluster, space: SearchSpace | None = None, *,
           top_k: int = 10, keep: int = 64, repartition_top: int = 32, progress: Progress | None = None,
           workers: int = 1) -> SearchResult:
    """Every plan of `space` for this model, shape and cluster, ranked by predicted step time. `workers` > 1
    spreads a large search over that many processes (search/parallel.py), with the same result."""
    space = space or SearchSpace()
    t0 = time.perf_counter()
    s = _Search(spec, shape, cluster, space, max(keep, top_k, repartition_top))
    lays = list(layouts(space, spec, shape, cluster))
    lays.sort(key=lambda lay: s.compute_bound(lay, True, 1))  # promising layouts first: tighter bounds sooner
    from distscope.search import parallel

    processes = workers if workers > 1 and len(lays) >= parallel.MIN_LAYOUTS else 1
    if processes > 1:
        ranked, comm, s.evaluated, s.feasible = parallel.search_layouts(s, lays, workers, progress)
    else:
        for i, lay in enumerate(lays):
            s.layout(lay, i)
            if progress is not None:
                progress(i + 1, len(lays))
        ranked, comm = s.keeper.sorted(), s.comm_keeper.sorted()
    # --- optimal pipeline partitioning of the best candidates ---
    out: list[Candidate] = []
    for i, c in enumerate(ranked):
        if i < repartition_top:
            r = repartition(spec, shape, cluster, c, space.software, screen=True)
            if r is not None:
                s.evaluated += 1
                new, gain = r
                if new.estimate.feasible:
                    s.feasible += 1
                # every checked candidate keeps its record (the report explains whichever plan ends up #1)
                c = new if gain.applied else dataclasses.replace(c, partition=gain)
        out.append(c)
    out = _in_full(spec, shape, cluster, out, space.software)
    return SearchResult(top=tuple(out[:top_k]), pool=tuple(out), comm_pool=tuple(comm),
                        evaluated=s.evaluated, feasible=s.feasible, layouts=len(lays), search_s=time.perf_counter() - t0,
                        processes=processes)


def partition_gain(spec: ModelSpec, shape: TrainingShape, cluster: Cluster, c: Candidate,
                   software: SoftwareProfile | None = None) -> PartitionGain | None:
    """`c`'s split record: the planner's, or checked now for a candidate the search did not re-split
    (None when no split applies: pp = 1, or a schedule whose placement is not a loop)."""
    if c.partition is not None:
        return c.partition
    r = repartition(spec, shape, cluster, c, software)
    return r[1] if r is not None else None


def merge(results: list[SearchResult], top_k: int) -> SearchResult:
    """One result from searches of disjoint spaces (e.g. one per precision): the candidates ranked together."""
    pool = sorted((c for r in results for c in r.pool), key=simplest_first)
    top = sorted((c for r in results for c in r.top), key=simplest_first)[:top_k]
    comm = sorted((c for r in results for c in r.comm_pool), key=comm_free_time)
    return SearchResult(top=tuple(top), pool=tuple(pool), comm_pool=tuple(comm),
                        evaluated=sum(r.evaluated for r in results), feasible=sum(r.feasible for r in results),
                        layouts=sum(r.layouts for r in results), search_s=sum(r.search_s for r in results),
                        processes=max((r.processes for r in results), default=1))

