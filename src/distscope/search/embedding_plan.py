"""Embedding sharding: placing a DLRM's tables on ranks (`place`) and choosing each table's sharding type
(`plan_embeddings`), priced by model/embedding_cost.estimate_dlrm.

Placement (ZionEX, Mudigere et al., ISCA'22, sec. 4: balance memory and load across ranks, and across nodes
for hierarchical sharding; TorchRec's GreedyPerfPartitioner does the same for table-wise shards):
- data-parallel tables go to every rank, row-wise tables over all ranks (rows split as evenly as whole
  rows allow);
- table-row-wise tables, largest first, each to the node where it raises the slowest node's lookup time
  plus the slowest node's communication (its reduce-scatter inside the node and all-to-all across
  nodes) least, its rows split over the node's ranks;
- table-wise and column-wise shards, largest first (longest-processing-time first, Graham 1969), each to
  the rank with memory left where it raises the slowest rank's lookup time plus the slowest rank's send
  time least: the step model adds the two maxima (lookups, then the all-to-all's slowest rank), so both
  are balanced, not their sum. A shard's lookup time is its forward and backward; its send time, its
  share of the output all-to-all.

Search, from several starts (the objective is a sum of maxima over ranks, so a single move from one start
rarely lowers it: the next-worst rank is as bad): every table's first allowed type; every table
table-wise, row-wise and table-row-wise, each as placed (the single-type baselines) and again with any
table too large for one GPU moved to the narrowest column split that fits, else table-row-wise; and on
more than one node HugeCTR's hier_auto plan (search/hugectr_plan.py: hot tables over several nodes), which
skips the coarse pass. From each:
- a coarse pass (COARSE_PASSES): table by table, largest first, each other sharding (column-wise in 2, 4,
  ... shards while a shard keeps >= 32 columns, row-wise, table-row-wise, data-parallel), with every
  table placed afresh, kept when the whole step (estimate_dlrm) gets faster and every rank fits;
- then single-table moves until a pass changes nothing (MAX_PASSES): another type placed on the ranks or
  node that carry the least now (and, when kept, the new mix placed afresh if that is faster), a
  table-row-wise table to another node, a table-wise or column-wise shard to one of the REFINE_RANKS
  least-loaded ranks, and table-row-wise tables on the busiest node trading nodes with the others. A move
  that leaves the step as it is but spreads the load more evenly is taken too: with two ranks at the
  maximum, no single move lowers it.
The best result over the starts is kept. Every move is priced by the full step model, so the answer is
never slower, under distscope's model, than any of its starts, the single-type baselines among them.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from distscope.comm import Collective, collective_s, group_net
from distscope.compress.eb_codec import EmbCompression
from distscope.errors import DistscopeError
from distscope.model import efficiency as eff
from distscope.model.embedding_cost import (
    DlrmEstimate,
    Shard,
    ShardingType,
    TableSharding,
    dense_memory_bytes,
    estimate_dlrm,
    lookup_bytes,
    shard_memory_bytes,
    sharding_counts,
)
from distscope.system.topology import Cluster
from distscope.workload.embedding import DlrmSpec, EmbeddingTable

MIN_CW_COLS = 32  # a column shard narrower than one 32-byte sector of fp32 wastes the row reads
MAX_PASSES = 6
COARSE_PASSES = 2
REFINE_RANKS = 8  # ranks a table-wise shard may move to in the placement refinement

# a table's sharding choice: its type and, for column-wise, the number of column shards
Choice = tuple[ShardingType, int]


@dataclasses.dataclass(frozen=True)
class EmbeddingPlan:
    shardings: tuple[TableSharding, ...]
    estimate: DlrmEstimate
    evaluated: int  # step estimates the search priced
    baselines: dict[str, DlrmEstimate | None]  # every table of one type (None: does not fit)

    def counts(self) -> dict[str, int]:
        return sharding_counts(self.shardings)

    def to_dict(self) -> dict[str, Any]:
        return {"estimate": self.estimate.to_dict(), "sharding_types": self.counts(),
                "tables": [ts.to_dict() for ts in self.shardings], "evaluated": self.evaluated,
                "baselines": {k: None if v is None else v.step_time_s for k, v in self.baselines.items()}}


def _split(total: int, parts: int) -> list[int]:
    q, r = divmod(total, parts)
    return [q + (1 if i < r else 0) for i in range(parts)]


@functools.lru_cache(maxsize=4096)
def spread(t: EmbeddingTable, kind: ShardingType, n: int) -> TableSharding:
    """A data-parallel (whole table on every rank) or row-wise (rows split over all ranks) table; cached,
    so that the step model's per-table arrays are built once per search."""
    if kind is ShardingType.DATA_PARALLEL:
        return TableSharding(t, kind, tuple(Shard(r, t.rows, t.dim) for r in range(n)))
    return TableSharding(t, kind, tuple(Shard(r, rows, t.dim) for r, rows in enumerate(_split(t.rows, n))))


@functools.lru_cache(maxsize=4096)
def node_rows(t: EmbeddingTable, nodes: tuple[int, ...], local: int) -> TableSharding:
    """A table-row-wise table: its rows split over the `local` ranks of each of `nodes` (cached as
    `spread`)."""
    ranks = [h * local + j for h in nodes for j in range(local)]
    return TableSharding(t, ShardingType.TABLE_ROW_WISE, tuple(Shard(r, rows, t.dim)
                                                               for r, rows in zip(ranks, _split(t.rows, len(ranks)),
                                                                                  strict=True)))


def choices(table: EmbeddingTable, cluster: Cluster, allowed: frozenset[ShardingType]) -> list[Choice]:
    """The sharding choices of one table on this cluster (module docstring)."""
    n, local = cluster.num_gpus, min(cluster.gpus_per_node, cluster.num_gpus)
    out: list[Choice] = []
    if ShardingType.TABLE_WISE in allowed:
        out.append((ShardingType.TABLE_WISE, 1))
    if ShardingType.COLUMN_WISE in allowed:
        k = 2
        while k <= n and table.dim % k == 0 and table.dim // k >= MIN_CW_COLS:
            out.append((ShardingType.COLUMN_WISE, k))
            k *= 2
    if ShardingType.ROW_WISE in allowed and n > 1:
        out.append((ShardingType.ROW_WISE, n))
    if ShardingType.TABLE_ROW_WISE in allowed and local > 1:
        out.append((ShardingType.TABLE_ROW_WISE, local))
    if ShardingType.DATA_PARALLEL in allowed:
        out.append((ShardingType.DATA_PARALLEL, n))
    return out


@functools.lru_cache(maxsize=65536)
def _tw_cost(spec: DlrmSpec, cluster: Cluster, table: EmbeddingTable, cols: int, global_batch: int
             ) -> tuple[float, float]:
    """(lookup, send) seconds a table-wise shard of `cols` columns adds to its rank: its forward and backward
    lookups, and its share of the output all-to-all (sending B·(N-1)/N pooled rows)."""
    n = cluster.num_gpus
    f, g = lookup_bytes(global_batch * table.pooling, global_batch, cols, spec)
    look = eff.elementwise_s(cluster.device, f + g, 2)
    if n == 1:
        return look, 0.0
    sent = (n - 1) * global_batch / n * cols * spec.pooled_dtype.bytes
    return look, collective_s(Collective.ALL_TO_ALL, sent * n / (n - 1), group_net(cluster, n, 1))


@functools.lru_cache(maxsize=65536)
def _twrw_cost(spec: DlrmSpec, cluster: Cluster, table: EmbeddingTable, global_batch: int) -> tuple[float, float]:
    """(lookup per rank, communication of the node) seconds a table-row-wise table adds to its node: 1/L of
    its lookups on each rank, the reduce-scatter inside the node and the all-to-all across nodes."""
    n, local = cluster.num_gpus, min(cluster.gpus_per_node, cluster.num_gpus)
    hosts, e = n // local, spec.pooled_dtype.bytes
    f, g = lookup_bytes(global_batch * table.pooling / local, global_batch, table.dim, spec)
    look = eff.elementwise_s(cluster.device, f + g, 2)
    comm = collective_s(Collective.REDUCE_SCATTER, global_batch * table.dim * e, group_net(cluster, local, 1))
    if hosts > 1:
        sent = global_batch / local * table.dim * e * (hosts - 1) / hosts
        comm += collective_s(Collective.ALL_TO_ALL, sent * hosts / (hosts - 1), group_net(cluster, hosts, local))
    return look, comm


def _pick(look: np.ndarray, comm: np.ndarray, dl: float, dc: float, room: np.ndarray) -> int:
    """The target (rank or node) where adding (dl, dc) leaves the smallest max lookup + max communication
    (the step model adds the two maxima); ties to the least-loaded, then the lowest index."""
    score = np.maximum(look.max(), look + dl) + np.maximum(comm.max(), comm + dc)
    score = np.where(room, score, np.inf)
    return int(np.lexsort((np.arange(len(look)), look + comm, score))[0])


def place(spec: DlrmSpec, cluster: Cluster, chosen: Sequence[Choice], *, global_batch: int) -> tuple[TableSharding, ...]:
    """Shards of every table on ranks for the chosen types (module docstring); one line when a table-wise
    or column-wise shard fits on no rank."""
    n, local = cluster.num_gpus, min(cluster.gpus_per_node, cluster.num_gpus)
    hosts = n // local
    cap = cluster.memory_capacity_bytes - dense_memory_bytes(spec)
    look, sent, mem = np.zeros(n), np.zeros(n), np.zeros(n)
    out: list[TableSharding | None] = [None] * len(spec.tables)

    pending: list[tuple[float, float, int, int]] = []  # (lookup s, send s, table index, column-shard index)
    for i, (t, (kind, k)) in enumerate(zip(spec.tables, chosen, strict=True)):
        if kind in (ShardingType.DATA_PARALLEL, ShardingType.ROW_WISE):
            ts = out[i] = spread(t, kind, n)
            ranks, rows, widths = ts.arrays
            np.add.at(mem, ranks, shard_memory_bytes(spec, rows, widths))
        elif kind is not ShardingType.TABLE_ROW_WISE:  # table-row-wise: placed below
            dl, dc = _tw_cost(spec, cluster, t, t.dim // k, global_batch)
            pending += [(dl, dc, i, j) for j in range(k)]
    parts: dict[int, list[Shard]] = {}
    for dl, dc, i, _ in sorted(pending, key=lambda x: (-(x[0] + x[1]), x[2], x[3])):
        t = spec.tables[i]
        cols = t.dim // chosen[i][1]
        need = shard_memory_bytes(spec, t.rows, cols)
        room = mem + need <= cap
        if not room.any():
            raise DistscopeError(f"table {t.name} ({t.rows:,} rows x {cols} columns, {need / 2**30:.1f} GiB with its "
                                 f"optimizer state) fits on no rank of {n} ({cap / 2**30:.1f} GiB each, after the "
                                 "other tables): shard it row-wise or over more GPUs")
        r = _pick(look, sent, dl, dc, room)
        look[r] += dl
        sent[r] += dc
        mem[r] += need
        parts.setdefault(i, []).append(Shard(r, t.rows, cols))
    for i, part in parts.items():
        out[i] = TableSharding(spec.tables[i], chosen[i][0], tuple(part))
    twrw = [(*_twrw_cost(spec, cluster, t, global_batch), i) for i, (t, (kind, _))
            in enumerate(zip(spec.tables, chosen, strict=True)) if kind is ShardingType.TABLE_ROW_WISE]
    node_comm = np.zeros(hosts)
    for dl, dc, i in sorted(twrw, key=lambda x: (-(x[0] + x[1]), x[2])):
        t = spec.tables[i]
        node_look = look.reshape(hosts, local).max(axis=1)
        part = shard_memory_bytes(spec, -(-t.rows // local), t.dim)
        room = (mem + part <= cap).reshape(hosts, local).all(axis=1)
        if not room.any():
            raise DistscopeError(f"table {t.name} split over one node's {local} GPUs needs {part / 2**30:.1f} GiB per "
                                 f"GPU, more than any node has left of {cap / 2**30:.1f} GiB: shard it row-wise")
        node = _pick(node_look, node_comm, dl, dc, room)
        ts = out[i] = node_rows(t, (node,), local)
        ranks, rows, widths = ts.arrays
        look[ranks] += dl
        node_comm[node] += dc
        mem[ranks] += shard_memory_bytes(spec, rows, widths)
    return tuple(x for x in out if x is not None)


def uniform(spec: DlrmSpec, cluster: Cluster, kind: ShardingType) -> list[Choice]:
    """Every table of one sharding type (column-wise: in 2 shards), or table-wise where that type does not
    apply (one GPU has no row-wise; a table too narrow to split has no column-wise)."""
    out: list[Choice] = []
    for t in spec.tables:
        opts = choices(t, cluster, frozenset({kind})) or [(ShardingType.TABLE_WISE, 1)]
        out.append(opts[0])
    return out


def _fits(spec: DlrmSpec, cluster: Cluster, t: EmbeddingTable, choice: Choice) -> bool:
    """Whether one shard of `t` under `choice` fits in 90% of a GPU (the dense part and other tables need
    the rest); row-wise and table-row-wise shards always do here (a start, not a check)."""
    kind, k = choice
    if kind in (ShardingType.ROW_WISE, ShardingType.TABLE_ROW_WISE):
        return True
    cols = t.dim // k if kind in (ShardingType.TABLE_WISE, ShardingType.COLUMN_WISE) else t.dim
    return shard_memory_bytes(spec, t.rows, cols) <= 0.9 * (cluster.memory_capacity_bytes - dense_memory_bytes(spec))


def _fit(spec: DlrmSpec, cluster: Cluster, chosen: list[Choice], opts: list[list[Choice]]) -> list[Choice]:
    """A start whose tables each fit: a table too large for its choice takes the narrowest column split
    that fits, else table-row-wise, else row-wise."""
    out = []
    for t, c, o in zip(spec.tables, chosen, opts, strict=True):
        later = [x for x in o if x[0] is ShardingType.COLUMN_WISE and _fits(spec, cluster, t, x)]
        later += [x for x in o if x[0] in (ShardingType.TABLE_ROW_WISE, ShardingType.ROW_WISE)]
        out.append(c if _fits(spec, cluster, t, c) or not later else later[0])
    return out


def _price(spec: DlrmSpec, cluster: Cluster, shardings: tuple[TableSharding, ...] | None, global_batch: int,
           compression: EmbCompression | None = None) -> tuple[tuple[TableSharding, ...], DlrmEstimate] | None:
    if shardings is None:
        return None
    est = estimate_dlrm(spec, cluster, shardings, global_batch=global_batch, compression=compression)
    return (shardings, est) if est.feasible else None


def _placed(spec: DlrmSpec, cluster: Cluster, chosen: Sequence[Choice], global_batch: int
            ) -> tuple[TableSharding, ...] | None:
    try:
        return place(spec, cluster, chosen, global_batch=global_batch)
    except DistscopeError:
        return None


def plan_embeddings(spec: DlrmSpec, cluster: Cluster, *, global_batch: int,
                    allowed: frozenset[ShardingType] = frozenset(ShardingType),
                    compression: EmbCompression | None = None,
                    progress: Callable[[int], None] | None = None) -> EmbeddingPlan:
    """The fastest sharding found by the local search (module docstring), its all-to-alls compressed when
    `compression` is given; one line when nothing fits."""
    opts = [choices(t, cluster, allowed) for t in spec.tables]
    for t, o in zip(spec.tables, opts, strict=True):
        if not o:
            raise DistscopeError(f"table {t.name}: none of the allowed sharding types "
                                 f"({', '.join(sorted(a.value for a in allowed))}) applies on {cluster.num_gpus} GPUs")
    baselines: dict[str, DlrmEstimate | None] = {}
    starts: list[tuple[TableSharding, ...]] = []
    first = _placed(spec, cluster, _fit(spec, cluster, [o[0] for o in opts], opts), global_batch)
    if first is not None:
        starts.append(first)
    for kind in (ShardingType.TABLE_WISE, ShardingType.ROW_WISE, ShardingType.TABLE_ROW_WISE):
        chosen = uniform(spec, cluster, kind)
        priced = _price(spec, cluster, _placed(spec, cluster, chosen, global_batch), global_batch, compression)
        baselines[kind.value] = None if priced is None else priced[1]
        if priced is not None and all(ts.kind in allowed for ts in priced[0]) and priced[0] not in starts:
            starts.append(priced[0])
        if kind in allowed:
            start = _placed(spec, cluster, _fit(spec, cluster, chosen, opts), global_batch)
            if start is not None and start not in starts:
                starts.append(start)
    hier = [h for h in _hier_auto_starts(spec, cluster) if all(ts.kind in allowed for ts in h)]
    evaluated = len(baselines)
    best: tuple[tuple[TableSharding, ...], DlrmEstimate] | None = None
    for start in starts + hier:  # a max-of-ranks objective has plateaus: one local search from each start
        coarse, n_coarse = (None, 0) if start in hier else _descend(
            spec, cluster, opts, [_choice_of(ts) for ts in start], global_batch, compression, progress)
        found, n_priced = _search(spec, cluster, start if coarse is None else coarse[0], opts, global_batch,
                                  compression, progress)
        evaluated += n_coarse + n_priced
        if found is not None and (best is None or found[1].step_time_s < best[1].step_time_s):
            best = found
    if best is None:
        need = sum(t.bytes(spec.embedding_dtype) for t in spec.tables) / cluster.num_gpus / 2**30
        raise DistscopeError(f"no sharding fits: {spec.name}'s tables need {need:.1f} GiB per GPU spread evenly over "
                             f"{cluster.num_gpus} GPUs of {cluster.memory_capacity_bytes / 2**30:.1f} GiB (with "
                             "optimizer state more): add GPUs or use fp16 tables")
    return EmbeddingPlan(shardings=best[0], estimate=best[1], evaluated=evaluated, baselines=baselines)


def _hier_auto_starts(spec: DlrmSpec, cluster: Cluster) -> list[tuple[TableSharding, ...]]:
    """HugeCTR's hier_auto plan (search/hugectr_plan.py) as a start on more than one node, with the
    arguments of NVIDIA's multi-node MLPerf configs (MEM_COMM_BW_RATIO=67, DP_SHARDING_THRESHOLD=0.0125 GB)
    and the memory a GPU has left for tables. (Its defaults as a second start found nothing better on
    torchrec_compare's 21 cases and cost 17% more planner time.) Its coarse pass is skipped: `place` puts a
    table-row-wise table on one node, and this plan spreads hot tables over several."""
    from distscope.search.hugectr_plan import HierAutoConfig, plan_hier_auto

    if cluster.num_gpus // min(cluster.gpus_per_node, cluster.num_gpus) < 2:
        return []
    cap = (cluster.memory_capacity_bytes - dense_memory_bytes(spec)) / 1e9
    config = HierAutoConfig(mem_comm_bw_ratio=67, dp_sharding_threshold=0.0125, memory_cap_for_embedding=cap)
    try:
        return [plan_hier_auto(spec, cluster, config)]
    except DistscopeError:  # the tables do not fit its way
        return []


def _relative_load(est: DlrmEstimate) -> tuple[np.ndarray, np.ndarray]:
    """Each rank's lookup time and sent bytes, each relative to its maximum over the ranks."""
    look, sent = np.asarray(est.rank_lookup_s), np.asarray(est.rank_sent_bytes)
    return look / max(look.max(), 1e-30), sent / max(sent.max(), 1e-30)


def _scores(est: DlrmEstimate) -> np.ndarray:
    """The two relative loads added per rank: where a shard goes."""
    look, sent = _relative_load(est)
    return look + sent


def _choice_of(ts: TableSharding) -> Choice:
    """The (type, shards) choice `choices` names for this table's sharding."""
    return ts.kind, len(ts.shards)


def _moves(ts: TableSharding, cluster: Cluster, est: DlrmEstimate, opts: list[Choice]) -> list[TableSharding]:
    """One table elsewhere (module docstring): as each other sharding of `opts`, its shards on the ranks
    (or node) that carry the least now; a table-row-wise table on each other node; a table-wise or
    column-wise shard on one of the REFINE_RANKS least-loaded ranks."""
    n, local = cluster.num_gpus, min(cluster.gpus_per_node, cluster.num_gpus)
    t = ts.table
    score = _scores(est)
    free = [int(r) for r in np.argsort(score, kind="stable")]
    out: list[TableSharding] = []
    here = _choice_of(ts)
    for kind, k in opts:
        if (kind, k) == here:
            continue
        if kind in (ShardingType.DATA_PARALLEL, ShardingType.ROW_WISE):
            out.append(spread(t, kind, n))
        elif kind is ShardingType.TABLE_ROW_WISE:
            out.append(node_rows(t, (int(np.argmin(score.reshape(n // local, local).max(axis=1))),), local))
        else:
            out.append(TableSharding(t, kind, tuple(Shard(r, t.rows, t.dim // k) for r in free[:k])))
    if ts.kind is ShardingType.TABLE_ROW_WISE:
        node = ts.shards[0].rank // local
        out += [node_rows(t, (h,), local) for h in range(n // local) if h != node]
    elif ts.kind in (ShardingType.TABLE_WISE, ShardingType.COLUMN_WISE):
        held = {s.rank for s in ts.shards}
        targets = [r for r in free if r not in held][:REFINE_RANKS]
        for j, s in enumerate(ts.shards):
            out += [TableSharding(t, ts.kind, (*ts.shards[:j], Shard(r, s.rows, s.cols), *ts.shards[j + 1:]))
                    for r in targets]
    return out


def _spread_of(est: DlrmEstimate) -> float:
    """How unevenly the ranks carry lookups and sent bytes: the sum of squares of each, relative to its
    maximum. The step is a sum of maxima and stays flat while only one of several equal maxima drops; a
    move that keeps the step and lowers this is taken, so the next move can lower the maximum."""
    look, sent = _relative_load(est)
    return float(np.sum(look**2) + np.sum(sent**2))


def _search(spec: DlrmSpec, cluster: Cluster, start: tuple[TableSharding, ...], opts: list[list[Choice]],
            global_batch: int, compression: EmbCompression | None, progress: Callable[[int], None] | None
            ) -> tuple[tuple[tuple[TableSharding, ...], DlrmEstimate] | None, int]:
    """First-improvement local search from `start`, one table at a time, then pairs of table-row-wise
    tables trading nodes (module docstring)."""
    found = _price(spec, cluster, start, global_batch, compression)
    if found is None:
        return None, 1
    best = found
    evaluated = 1
    spread = _spread_of(best[1])
    n, local = cluster.num_gpus, min(cluster.gpus_per_node, cluster.num_gpus)

    def better(trial: tuple[TableSharding, ...]) -> bool:
        nonlocal best, evaluated, spread
        est = estimate_dlrm(spec, cluster, trial, global_batch=global_batch, compression=compression)
        evaluated += 1
        if progress is not None:
            progress(1)
        if not est.feasible:
            return False
        s, t = est.step_time_s, best[1].step_time_s
        faster = s < t * (1 - 1e-9)
        if not faster and s > t * (1 + 1e-12):
            return False
        even = _spread_of(est)
        if not faster and even >= spread * (1 - 1e-6):
            return False
        best, spread = (trial, est), even
        return True

    def replaced() -> None:
        """The accepted mix of types placed afresh (place's balancing over all tables), if that is faster."""
        fresh = _placed(spec, cluster, [_choice_of(ts) for ts in best[0]], global_batch)
        if fresh is not None:
            better(fresh)

    for _ in range(MAX_PASSES):
        changed = False
        for i in range(len(spec.tables)):
            for ts in _moves(best[0][i], cluster, best[1], opts[i]):
                was = _choice_of(best[0][i])
                if better((*best[0][:i], ts, *best[0][i + 1:])):
                    changed = True
                    if _choice_of(ts) != was:
                        replaced()
        sent = np.asarray(best[1].rank_sent_bytes).reshape(n // local, local).max(axis=1)
        hot = int(np.argmax(sent))
        twrw = [i for i, ts in enumerate(best[0]) if ts.kind is ShardingType.TABLE_ROW_WISE]
        for i in [i for i in twrw if best[0][i].shards[0].rank // local == hot]:  # trade with the busiest node
            for j in twrw:
                a, b = best[0][i], best[0][j]
                na, nb = a.shards[0].rank // local, b.shards[0].rank // local
                if na != nb:
                    trial = list(best[0])
                    trial[i], trial[j] = node_rows(a.table, (nb,), local), node_rows(b.table, (na,), local)
                    changed = better(tuple(trial)) or changed
        if not changed:
            break
    return best, evaluated


def _descend(spec: DlrmSpec, cluster: Cluster, opts: list[list[Choice]], start: list[Choice], global_batch: int,
             compression: EmbCompression | None, progress: Callable[[int], None] | None
             ) -> tuple[tuple[tuple[TableSharding, ...], DlrmEstimate] | None, int]:
    """The coarse search: one table's type at a time, every table placed afresh by `place` for each trial
    (COARSE_PASSES passes, largest tables first)."""
    best = _price(spec, cluster, _placed(spec, cluster, start, global_batch), global_batch, compression)
    evaluated = 1
    if best is None:
        return None, evaluated
    current = list(start)
    order = sorted(range(len(spec.tables)), key=lambda i: -sum(_tw_cost(spec, cluster, spec.tables[i],
                                                                         spec.tables[i].dim, global_batch)))
    for _ in range(COARSE_PASSES):
        changed = False
        for i in order:
            for c in opts[i]:
                if c == current[i]:
                    continue
                trial = [*current[:i], c, *current[i + 1:]]
                priced = _price(spec, cluster, _placed(spec, cluster, trial, global_batch), global_batch, compression)
                evaluated += 1
                if progress is not None:
                    progress(1)
                if priced is not None and priced[1].step_time_s < best[1].step_time_s * (1 - 1e-9):
                    best, current, changed = priced, trial, True
        if not changed:
            break
    return best, evaluated
