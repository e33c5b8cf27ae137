"""HugeCTR's hybrid embedding (`HybridSparseEmbedding`, `HybridEmbeddingType::Distributed` over
`IB_NVLink_Hier`), as NVIDIA's multi-node MLPerf DLRM submissions of v1.0 to v2.1 train with it: each
category (a row of any table) is either frequent or infrequent, by its count in the first
`num_iterations_statistics` batches.

- Frequent categories (F of them) are replicated on every GPU, data-parallel: looked up locally, their
  gradients (F·d in the pooled dtype) all-reduced together with the dense part's (`grouped_all_reduce`),
  and every GPU updates all F rows.
- Infrequent categories (the rest of the rows) are spread over all GPUs, model-parallel; only their
  lookups cross GPUs: I per global batch on average, each a d-wide row sent from the GPU that owns the
  category to the GPU whose sample needs it, and its gradient back (an all-to-all each way; every GPU
  owns an equal share of the infrequent categories).

A category is frequent when its count over the statistics batches reaches HugeCTR's threshold
(`ModelInitializationFunctors::calculate_threshold`, HugeCTR hybrid_embedding/model.cu) for IB_NVLink(_Hier):

    count ≥ iterations · nodes · (a2a_bw / ar_bw) · efficiency_bandwidth_ratio · nodes / (nodes − 1)

so F and I are properties of the data at that threshold, and no config or log publishes either. The
configs' `max_num_infrequent_samples` ("mean num of infrequent plus 10-sigma guardband", e.g. 16640+1290
on 14 DGX A100 nodes) is a buffer: 16640 is the per-GPU lookup count 640 x 26, 1290 ten times its square
root. `frequent_bound` gives the most categories that can clear the threshold (the statistics window's
frequent lookups divided by the threshold), no more than a buffer the caller names; validate/dlrm_rows.py
prices the published runs at both ends, F = 0 and that bound.

model/embedding_cost.py prices it per rank (N ranks, b = B/N samples, P = ids per sample over all tables,
T tables, d the dim, e the pooled dtype's bytes, q = I / (B·P) the infrequent share of lookups):
- lookups forward: b·P·(1 − q) frequent ids into b·T pooled rows, and I/N infrequent ids served;
  backward: the same ids' gradient traffic (embedding_cost.lookup_bytes);
- all-to-all: I/N rows of d·e bytes each way, as HugeCTR's hierarchical one: (L − 1)/L of them to the
  node's other GPUs over NVLink, then (H − 1)/H across the H nodes, one exchange per local rank (L GPUs per
  node); no id exchange (every GPU computes the indices of the whole batch, `use_train_precompute_indices`);
- all-reduce: F·d·e with the dense gradients; optimizer: the F rows updated on every rank;
- memory: F rows plus (R − F)/N of the infrequent rows, R the rows of all tables.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from distscope.errors import DistscopeError, closest
from distscope.workload.embedding import DlrmSpec

PREFIX = "hugectr:hybrid"


def sharding_fields(ref: str, prefix: str, fields: list[str], what: str) -> dict[str, float]:
    """The non-negative numbers of a `PREFIX[:key=value...]` sharding (HugeCTR's hybrid embedding here,
    its hier_auto plan in search/hugectr_plan.py); one line naming a wrong prefix, key or value."""
    if not ref.startswith(prefix):
        raise DistscopeError(f"sharding={ref!r} is not {prefix}[:key=value...] (keys: {', '.join(fields)})")
    values: dict[str, float] = {}
    for item in filter(None, ref.removeprefix(prefix).split(":")):
        key, _, value = item.partition("=")
        if key not in fields:
            raise DistscopeError(f"sharding={ref!r}: {key!r} is not a {what} ({', '.join(fields)}){closest(key, fields)}")
        try:
            values[key] = float(value)
        except ValueError:
            raise DistscopeError(f"sharding={ref!r}: {key}={value!r} is not a number") from None
        if not values[key] >= 0:
            raise DistscopeError(f"sharding={ref!r}: {key}={value} must be non-negative")
    return values


@dataclasses.dataclass(frozen=True)
class HybridEmbedding:
    """F frequent categories and I infrequent lookups per global batch (module docstring)."""

    frequent: int
    infrequent: float

    @classmethod
    def parse(cls, ref: str) -> HybridEmbedding:
        """`hugectr:hybrid:frequent=F:infrequent=I`; one line naming a missing or bad field."""
        fields = [f.name for f in dataclasses.fields(cls)]
        values = sharding_fields(ref, PREFIX, fields, "hybrid embedding field")
        missing = [f for f in fields if f not in values]
        if missing:
            raise DistscopeError(f"sharding={ref!r}: give {missing[0]}= (the hybrid embedding needs "
                                 f"{' and '.join(fields)})")
        return cls(frequent=int(values["frequent"]), infrequent=values["infrequent"])

    def check(self, spec: DlrmSpec, global_batch: int) -> None:
        rows = sum(t.rows for t in spec.tables)
        if self.frequent > rows:
            raise DistscopeError(f"sharding frequent={self.frequent} is more categories than the tables have ({rows:,})")
        lookups = global_batch * sum(t.pooling for t in spec.tables)
        if self.infrequent > lookups:
            raise DistscopeError(f"sharding infrequent={self.infrequent:g} is more than the {lookups:,.0f} lookups "
                                 f"of a global batch of {global_batch}")
        dims = {t.dim for t in spec.tables}
        if len(dims) != 1:
            raise DistscopeError(f"sharding={PREFIX}: HugeCTR's hybrid embedding has one embedding_vec_size; the "
                                 f"tables have dims {sorted(dims)}")

    def to_dict(self) -> dict[str, Any]:
        return {"sharding": PREFIX, "frequent": self.frequent, "infrequent": self.infrequent}


def threshold(iterations: int, nodes: int, a2a_bw: float, ar_bw: float, efficiency_ratio: float) -> float:
    """HugeCTR's count threshold for a frequent category over `iterations` statistics batches on `nodes`
    nodes (IB_NVLink and IB_NVLink_Hier; model.cu calculate_threshold, quoted in the module docstring)."""
    if nodes < 2:
        raise DistscopeError(f"nodes={nodes}: the IB threshold is for two or more nodes")
    return iterations * nodes * a2a_bw / ar_bw * efficiency_ratio * nodes / (nodes - 1)


def frequent_bound(global_batch: int, lookups_per_sample: float, infrequent: float, count_threshold: float,
                   iterations: int, max_frequent_batches: float) -> int:
    """The most categories that can be frequent: the frequent lookups of the statistics window over the
    threshold count each needs, no more than the frequent buffer (`max_num_frequent_categories` batches)."""
    frequent_lookups = iterations * (global_batch * lookups_per_sample - infrequent)
    return int(min(frequent_lookups / count_threshold, max_frequent_batches * global_batch))

