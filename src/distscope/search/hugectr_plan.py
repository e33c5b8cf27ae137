"""HugeCTR's hierarchical sharding planner (`--sharding_plan hier_auto`), as NVIDIA's MLPerf DLRM-DCNv2
submissions run it across nodes (mlcommons training_results_v3.0 to v4.0, NVIDIA/benchmarks/dlrm_dcnv2,
sharding/planner.py and generate_plan.py): re-implemented from that description, so that a published run
is priced under the sharding it trained with rather than under distscope's own planner.

The buckets are nodes; every GPU of a node holds the node's tables. A table whose weights and optimizer
state (HugeCTR's planner: 8 bytes per element under Adagrad) are under the DP threshold is data-parallel.
The others start as one shard each. Each iteration places the shards, hottest first (hotness: ids per
sample, the pooling), each on the cheapest bucket so far that does not hold that table yet and has memory
left (memory: the bucket's share of each table, rows / shards, against memory_cap_for_embedding per GPU
times the node's GPUs, less the data-parallel tables). A bucket's cost is the hotness it serves (a table
in s shards counts p / s per shard) plus mem_comm_bw_ratio / mem_comm_work_ratio per shard. After each
complete placement the hottest table that can still be split doubles its shards (at most one per bucket);
a shard that fits no bucket is split instead, and the search stops when it cannot be. Of the plans found
(the first one: every table on every node), the one with the lowest maximum bucket cost wins, the
earliest on a tie.

A table on s nodes has its rows split evenly over the s x L ranks of those nodes: table-row-wise in
distscope's terms (model/embedding_cost.py prices its reduction inside each node and its all-to-all
across nodes, which is HugeCTR's hierarchical model-parallel embedding).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from distscope.errors import DistscopeError
from distscope.model.embedding_cost import ShardingType, TableSharding, shard_memory_bytes
from distscope.model.hybrid_embedding import sharding_fields
from distscope.search.embedding_plan import node_rows, spread
from distscope.system.topology import Cluster
from distscope.workload.embedding import DlrmSpec

PREFIX = "hugectr:hier_auto"
MAX_SEARCH_ITER = 20  # planner.py's default


@dataclasses.dataclass(frozen=True)
class HierAutoConfig:
    """train.py's planner arguments, with its defaults."""

    mem_comm_bw_ratio: float = 3.35e12 / 450e9  # HBM over NIC bandwidth; NVIDIA's multi-node configs: 67
    mem_comm_work_ratio: float = 8 / 2
    memory_cap_for_embedding: float = 60.0  # GB (1e9 bytes) per GPU
    dp_sharding_threshold: float = 0.0  # GB; v3.1 and v4.0 configs: 0.0125

    @classmethod
    def parse(cls, ref: str) -> HierAutoConfig:
        """`hugectr:hier_auto[:key=value...]`, keys as train.py's arguments; one line naming a bad one."""
        values = sharding_fields(ref, PREFIX, [f.name for f in dataclasses.fields(cls)], "hier_auto argument")
        if values.get("mem_comm_work_ratio") == 0:
            raise DistscopeError(f"sharding={ref!r}: mem_comm_work_ratio=0 must be positive")
        return cls(**values)


def _bucket_costs(buckets: list[list[int]], hot: np.ndarray, splits: np.ndarray, per_shard: float,
                  row_gb: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(cost, memory GB) of each bucket (module docstring)."""
    cost = np.array([float(np.sum(hot[b] / splits[b])) + per_shard * len(b) for b in buckets])
    mem = np.array([float(np.sum(row_gb[b] / splits[b])) for b in buckets])
    return cost, mem


class _Shards:
    """The shards to place, hottest first, in planner.py's order (numpy's default argsort, reversed: its
    order among equally hot shards decides which tables share a node, so it is kept)."""

    def __init__(self, hot: np.ndarray, mp: np.ndarray, buckets: int) -> None:
        self.hot, self.buckets = hot, buckets
        self.splits = np.zeros(len(hot))
        self.splits[mp] = 1
        self.ids, self.per = mp, hot[mp]
        self._sort()

    def _sort(self) -> None:
        order = np.argsort(self.per)[::-1]
        self.ids, self.per = self.ids[order], self.per[order]

    def split(self, t: int) -> bool:
        """Double table t's shards; False when it already has one per bucket."""
        if self.splits[t] * 2 > self.buckets:
            return False
        keep = self.ids != t
        self.splits[t] *= 2
        k = int(self.splits[t])
        self.ids = np.concatenate((self.ids[keep], np.full(k, t)))
        self.per = np.concatenate((self.per[keep], np.full(k, self.hot[t] / k)))
        self._sort()
        return True


def hier_auto_buckets(hot: np.ndarray, row_gb: np.ndarray, buckets: int, cap_gb: float, per_shard: float,
                      dp: np.ndarray) -> list[list[int]]:
    """The tables (indices) each bucket holds, data-parallel ones in every bucket (module docstring)."""
    n_tables = len(hot)
    everywhere = [list(range(n_tables)) for _ in range(buckets)]
    all_split = np.full(n_tables, buckets, dtype=float)
    cost, mem = _bucket_costs(everywhere, hot, all_split, per_shard, row_gb)
    if mem.max() > cap_gb:
        raise DistscopeError(f"hier_auto: the tables need {mem.max():.1f} GB per node even spread over all {buckets} "
                             f"nodes, over memory_cap_for_embedding x GPUs per node = {cap_gb:.1f} GB")
    candidates: list[tuple[float, list[list[int]]]] = [(float(cost.max()), everywhere)]
    cap = cap_gb - float(row_gb[dp].sum())
    if cap < 0:
        raise DistscopeError(f"hier_auto: the data-parallel tables need {row_gb[dp].sum():.1f} GB per node, over "
                             f"{cap_gb:.1f} GB: lower dp_sharding_threshold")
    shards = _Shards(hot, np.setdiff1d(np.arange(n_tables), np.flatnonzero(dp)), buckets)
    for _ in range(MAX_SEARCH_ITER):
        placed: list[list[int]] = [[] for _ in range(buckets)]
        load = np.zeros(buckets)
        oom = None
        for t in shards.ids.tolist():
            for b in np.argsort(load).tolist():
                if t in placed[b]:
                    continue
                placed[b].append(t)
                c, m = _bucket_costs(placed, hot, shards.splits, per_shard, row_gb)
                if m.max() <= cap:
                    load = c
                    break
                placed[b].pop()
            else:
                oom = t
                break
        if oom is None:
            candidates.append((float(load.max()), placed))
            for t in shards.ids.tolist():  # the hottest shard whose table can still split
                if shards.split(t):
                    break
        elif not shards.split(oom):
            break
    best = min(candidates, key=lambda c: c[0])[1]  # min keeps the earliest of equal costs
    return [sorted(set(b) | {int(t) for t in np.flatnonzero(dp)}) for b in best]


def plan_hier_auto(spec: DlrmSpec, cluster: Cluster, config: HierAutoConfig) -> tuple[TableSharding, ...]:
    """Every table's sharding under HugeCTR's hier_auto plan on `cluster` (module docstring)."""
    n, local = cluster.num_gpus, min(cluster.gpus_per_node, cluster.num_gpus)
    hosts = n // local
    if hosts < 2:
        raise DistscopeError(f"sharding=hugectr:hier_auto needs more than one node (--gpus {n} is {hosts}): HugeCTR "
                             "refuses it too")
    hot = np.array([t.pooling for t in spec.tables], dtype=float)
    row_gb = np.array([shard_memory_bytes(spec, t.rows, t.dim) / 1e9 for t in spec.tables])
    dp = row_gb < config.dp_sharding_threshold
    per_shard = config.mem_comm_bw_ratio / config.mem_comm_work_ratio
    buckets = hier_auto_buckets(hot, row_gb, hosts, config.memory_cap_for_embedding * local, per_shard, dp)
    return tuple(spread(t, ShardingType.DATA_PARALLEL, n) if dp[i]
                 else node_rows(t, tuple(h for h, held in enumerate(buckets) if i in held), local)
                 for i, t in enumerate(spec.tables))
