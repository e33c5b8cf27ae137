"""A DLRM training step under an embedding sharding (TorchRec's five sharding types), on a cluster.

Per rank, per step of global batch B over N ranks (b = B/N per rank, L GPUs per node, H = N/L nodes),
for a table of R rows, dim d, pooling p (ids per sample), e bytes per pooled element (the model's
output_dtype, else the table's dtype), ids of 8 bytes (int64):

Lookup kernels (FBGEMM's table-batched embedding; memory-bound, priced at the HBM model's streaming
rate, efficiency.elementwise_s). A row read moves ceil(d·e / 32)·32 bytes: global memory is served in
32-byte sectors (CUDA C++ Best Practices Guide, "Coalesced Access to Global Memory"), so rows narrower
than 32 bytes cost a full sector (TorchRec's estimator penalises dims under 32 for the same reason).
- forward, a shard serving n ids into o pooled outputs of width d_s:  n·(8 + row(d_s)) + o·d_s·e;
- backward with the fused optimizer: the output gradients o·d_s·e read, the ids sorted (radix sort: two
  passes of 8-byte keys and 8-byte values, 4·8 bytes per id), each touched row read and written with its
  optimizer state: n·(32 + 2·row(d_s) + 2·state(d_s)). TorchRec's estimator prices the backward at 2x
  the forward (BWD_COMPUTE_MULTIPLIER); this is the traffic behind such a factor.
A shard of r rows of R serves n = B·p·r/R ids (ids uniform over rows: hashed Criteo features; a skewed
table with hot rows makes RW ranks uneven, not modelled).

Where the ids and the pooled embeddings go (TorchRec's input and output distributions):
- table-wise (TW) and column-wise (CW, k shards of d/k, each placed like a TW table): every rank sends
  its b samples' ids (and one 4-byte length per sample) to each shard's rank, which pools all B samples
  and sends each rank its b rows back: an uneven all-to-all of b·d_s·e per peer;
- row-wise (RW): ids bucketized to the rank holding their rows (a rank sends b·p·8 spread over N);
  every rank pools partial sums for all B samples and the partials are reduce-scattered (B·d·e over N);
  the backward all-gathers the gradients (the same cost);
- table-row-wise (TWRW, ZionEX's hierarchical sharding): the rows are split over the L ranks of one
  node; a reduce-scatter inside the node (B·d·e over L), then each local rank sends its B/L samples to
  its peers of the same local rank on the other nodes (an all-to-all over the H nodes). A table split
  over k nodes (HugeCTR's hierarchical model-parallel embedding, whose planner spreads a hot table over
  several nodes) does this on each of them: every rank receives a partial row from each holding node but
  its own (k partials, or k-1), summed on arrival;
- data-parallel (DP): a replica on every rank looks up its own b samples; its gradient, R·d·e, is
  all-reduced with the dense part's, and the optimizer updates the whole table (2·R·(d·e + state)).
The all-to-alls of a step are priced as one uneven all-to-all each way (TorchRec batches the
distributions of one sharding type; here all types share one): the slowest rank's max(sent, received)
bytes as an all-to-all of that size on the group (comm.collective_s, the α-β model of the topology).

The dense part (bottom MLP, interaction, top MLP) is data-parallel: each GEMM of the b samples at the
GEMM model (efficiency.gemm_s), the backward twice the forward's GEMMs (data and weight gradients), plus
the interaction's memory-bound kernels (interaction_passes: HugeCTR's fused dot interaction, or DCNv2's
fused cross-layer element-wise kernels) at the element-wise model; its gradients (the spec's
dense_grad_dtype: fp32 under DDP, fp16 under HugeCTR's mixed precision) are all-reduced and overlap the
backward of the dense part and of the embeddings.

With error-bounded compression (compress/eb_codec.EmbCompression) the pooled rows forward and their
gradients backward cross the all-to-alls divided by the codec's measured ratio on each, and every rank
encodes what it sends and decodes what it receives at the codec's rate (a CPU library's measured rate
unless a GPU codec's is given): term embedding_codec. Row-wise reduce-scatters are not compressed.

Step (TorchRec's TrainPipelineSparseDist: the next batch's input distribution runs under this batch's
dense compute): max over ranks of the lookup forward + the output all-to-all + dense forward and
backward + the gradient all-to-all + max over ranks of the lookup backward + what the input
distribution and the all-reduce do not hide.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import numpy as np

from distscope.comm import Collective, collective_s, group_net
from distscope.compress.eb_codec import EmbCompression
from distscope.dtypes import DType
from distscope.enums import Enum
from distscope.errors import DistscopeError, closest
from distscope.hashing import cached_hash
from distscope.model import efficiency as eff
from distscope.model.hybrid_embedding import HybridEmbedding
from distscope.model.memory import WORKSPACE_BYTES
from distscope.system.topology import Cluster
from distscope.workload.embedding import DlrmSpec, EmbeddingTable, Interaction

ID_BYTES = 8  # int64 ids, TorchRec's KeyedJaggedTensor values
LENGTH_BYTES = 4  # one int32 length per sample and feature
SECTOR_BYTES = 32  # the GPU's global-memory transaction
SORT_BYTES_PER_ID = 32  # radix sort of (id, position) pairs: two passes of 8 + 8 bytes
DENSE_GRAD_BYTES = 4.0  # fp32 parameters and gradients of the dense part in memory (DDP under autocast)
DENSE_STATE_BYTES = 8.0  # the dense part's Adagrad/Adam state per parameter (fp32)


class ShardingType(Enum):
    """TorchRec's names (torchrec.distributed.types.ShardingType values)."""

    TABLE_WISE = "table_wise"
    COLUMN_WISE = "column_wise"
    ROW_WISE = "row_wise"
    TABLE_ROW_WISE = "table_row_wise"
    DATA_PARALLEL = "data_parallel"

    @classmethod
    def parse(cls, value: str, field: str = "sharding") -> ShardingType:
        key = value.strip().lower().replace("-", "_")
        key = {"tw": "table_wise", "cw": "column_wise", "rw": "row_wise", "twrw": "table_row_wise",
               "dp": "data_parallel"}.get(key, key)
        try:
            return cls(key)
        except ValueError:
            raise DistscopeError(f"{field}={value!r} is not a sharding type (table_wise, column_wise, row_wise, "
                                 f"table_row_wise, data_parallel){closest(key, [c.value for c in cls])}") from None


@dataclasses.dataclass(frozen=True, slots=True)
class Shard:
    rank: int
    rows: int
    cols: int


@cached_hash  # hashed by the step model's per-table cache on every price
@dataclasses.dataclass(frozen=True)
class TableSharding:
    table: EmbeddingTable
    kind: ShardingType
    shards: tuple[Shard, ...]

    @functools.cached_property
    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(ranks, rows, cols) of the shards, for the vectorized step model."""
        return (np.array([s.rank for s in self.shards], dtype=np.int64),
                np.array([s.rows for s in self.shards], dtype=np.float64),
                np.array([s.cols for s in self.shards], dtype=np.float64))

    def to_dict(self) -> dict[str, Any]:
        return {"table": self.table.name, "sharding": self.kind.value,
                "shards": [{"rank": s.rank, "rows": s.rows, "cols": s.cols} for s in self.shards]}


@dataclasses.dataclass(frozen=True)
class DlrmEstimate:
    step_time_s: float
    breakdown_s: dict[str, float]  # sums to step_time_s
    samples_per_s: float
    rank_lookup_s: tuple[float, ...]  # forward + backward lookup time per rank
    rank_sent_bytes: tuple[float, ...]  # pooled-embedding bytes each rank sends per direction (all-to-alls, node RS)
    rank_memory_bytes: tuple[float, ...]
    capacity_bytes: float

    @property
    def feasible(self) -> bool:
        return max(self.rank_memory_bytes) <= self.capacity_bytes

    def to_dict(self) -> dict[str, Any]:
        return {"step_time_s": self.step_time_s, "breakdown_s": dict(self.breakdown_s),
                "samples_per_s": self.samples_per_s, "rank_lookup_s": list(self.rank_lookup_s),
                "rank_sent_bytes": list(self.rank_sent_bytes), "rank_memory_bytes": list(self.rank_memory_bytes),
                "capacity_bytes": self.capacity_bytes, "feasible": self.feasible}


def dense_memory_bytes(spec: DlrmSpec) -> float:
    """Per rank besides the tables: the dense part's fp32 weights, gradients and optimizer state, and the
    framework's workspace."""
    return spec.dense_params * (2 * DENSE_GRAD_BYTES + DENSE_STATE_BYTES) + WORKSPACE_BYTES


def check_batch(global_batch: int, gpus: int) -> None:
    """One line unless the global batch splits evenly over the ranks (b = B/N samples each)."""
    if global_batch < 1 or global_batch % gpus:
        raise DistscopeError(f"--global-batch={global_batch} must be a positive multiple of --gpus={gpus} (samples per "
                             "step, split evenly over the ranks)")


def shard_memory_bytes(spec: DlrmSpec, rows: Any, cols: Any) -> Any:
    """A shard's bytes on its rank: its rows and their optimizer state. Numbers or numpy arrays."""
    return rows * (cols * spec.embedding_dtype.bytes + spec.optimizer.state_bytes(cols))


def sharding_counts(shardings: tuple[TableSharding, ...] | HybridEmbedding) -> dict[str, int]:
    """Tables per sharding type, by TorchRec's name; HugeCTR's hybrid embedding is one over every table."""
    if isinstance(shardings, HybridEmbedding):
        return {"hugectr_hybrid": 1}
    out: dict[str, int] = {}
    for ts in shardings:
        out[ts.kind.value] = out.get(ts.kind.value, 0) + 1
    return out


def row_bytes(cols: Any, dtype: DType) -> Any:
    """Bytes one row read moves: whole 32-byte sectors (module docstring). Numbers or numpy arrays."""
    return np.ceil(cols * dtype.bytes / SECTOR_BYTES) * SECTOR_BYTES


def lookup_bytes(ids: Any, outputs: float, cols: Any, spec: DlrmSpec) -> tuple[Any, Any]:
    """(forward, backward) HBM bytes of one shard serving `ids` lookups into `outputs` pooled rows of
    width `cols` (module docstring); per shard when `ids` or `cols` are numpy arrays."""
    row = row_bytes(cols, spec.embedding_dtype)
    state = spec.optimizer.state_bytes(cols)
    out = outputs * cols * spec.pooled_dtype.bytes
    return ids * (ID_BYTES + row) + out, out + ids * (SORT_BYTES_PER_ID + 2 * row + 2 * state)


def _stream_s(cluster: Cluster, nbytes: np.ndarray) -> np.ndarray:
    """efficiency.elementwise_s of each shard's bytes (one kernel each): vectorized on the analytic HBM
    model, shard by shard on a measured element-wise table."""
    dev = cluster.device
    if dev.kernels is None or dev.kernels.elementwise is None:
        return np.asarray(eff.elementwise_s(dev, nbytes, 1))  # type: ignore[arg-type]  # linear: bytes / (HBM · MEM_ETA) + KERNEL_S
    return np.array([eff.elementwise_s(dev, float(x), 1) for x in np.ravel(nbytes)])


def interaction_passes(spec: DlrmSpec) -> tuple[tuple[float, int], tuple[float, int]]:
    """((bytes, kernels) forward, (bytes, kernels) backward) per sample of the feature interaction's
    memory-bound kernels, outside the dense GEMMs. F = tables + 1 feature vectors of width d (F·d = w),
    dense dtype bytes e.

    - dot (DLRM): one fused kernel each way, HugeCTR's InteractionLayer (`dotBasedInteractFwdKernel` /
      `BwdKernel`, the same kernel as NVIDIA's DeepLearningExamples PyTorch DLRM): forward reads the F
      vectors and writes the top MLP's input, d + F(F-1)/2 + 1 padding; backward reads that gradient and
      the F vectors and writes their gradients: (w + o)·e forward, (o + 2w)·e backward, o the output width.
    - dcn (DCNv2 cross layer x_{l+1} = x0 ⊙ (U V x_l + b) + x_l, Wang et al. 2021), as HugeCTR's
      MultiCrossLayer runs it: per layer forward one fused x0 ⊙ h + x_l (reads h, x0, x_l, writes
      x_{l+1}: 4w·e); per layer backward one fused_mul_fma3 (reads dY, x0, h and dX, writes S0 and dX:
      6w·e), and one final dX + dY (3w·e). The GEMMs (and the last backward GEMM's + dY epilogue) are in
      dense_layers."""
    e = spec.dense_dtype.bytes
    f = len(spec.tables) + 1
    w = f * spec.feature_dim
    if spec.interaction is Interaction.DCN:
        n = spec.dcn_layers
        return (4.0 * w * e * n, n), ((6.0 * n + 3.0) * w * e, n + 1)
    out = spec.feature_dim + f * (f - 1) // 2 + 1
    return ((w + out) * e, 1), ((out + 2 * w) * e, 1)


def dense_s(spec: DlrmSpec, cluster: Cluster, batch: int) -> tuple[float, float]:
    """(forward, backward) seconds of the dense part for `batch` samples on one GPU: its GEMMs (GEMM
    model) and the interaction's memory-bound kernels (interaction_passes, element-wise model)."""
    dev, dt = cluster.device, spec.dense_dtype
    (fb, fk), (bb, bk) = interaction_passes(spec)
    fwd = sum(eff.gemm_s(dev, dt, batch, o, i) for i, o in spec.dense_layers())
    bwd = sum(eff.gemm_s(dev, dt, batch, i, o) + eff.gemm_s(dev, dt, i, o, batch) for i, o in spec.dense_layers())
    return fwd + eff.elementwise_s(dev, batch * fb, fk), bwd + eff.elementwise_s(dev, batch * bb, bk)


def _uneven_a2a_s(cluster: Cluster, sent: np.ndarray, recv: np.ndarray, size: int, stride: int = 1) -> float:
    """An all-to-all whose ranks move different volumes: the slowest rank's max(sent, received) bytes
    priced as a uniform all-to-all whose cross-rank part is that many bytes."""
    if size <= 1:
        return 0.0
    worst = float(max(sent.max(), recv.max()))
    return collective_s(Collective.ALL_TO_ALL, worst * size / (size - 1), group_net(cluster, size, stride))


# rows of a table's per-rank contribution (_table_terms)
FWD, BWD, MEM, IDS_SENT, IDS_RECV, OUT_SENT, OUT_RECV, X_SENT, X_RECV, NODE_RS = range(10)


@functools.lru_cache(maxsize=65536)
def _table_terms(ts: TableSharding, spec: DlrmSpec, cluster: Cluster, global_batch: int
                 ) -> tuple[np.ndarray, float, float, float]:
    """One table's contribution to the step (module docstring): a (10, N) array of per-rank lookup
    seconds (forward, backward), memory, all-to-all bytes sent and received (ids, pooled rows, TWRW's
    cross-node rows) and its node's reduce-scatter bytes; and the row-wise reduce-scatter bytes, the
    data-parallel gradient bytes and the data-parallel optimizer bytes. Cached: a search prices the
    same table's sharding many times while it changes others."""
    n = cluster.num_gpus
    big_b, b = float(global_batch), global_batch / n
    local = min(cluster.gpus_per_node, n)
    hosts = n // local
    e = spec.pooled_dtype.bytes
    m = np.zeros((10, n))
    t = ts.table
    ids_per_sample = t.pooling * ID_BYTES + LENGTH_BYTES
    ranks, rows, cols = ts.arrays
    np.add.at(m[MEM], ranks, shard_memory_bytes(spec, rows, cols))
    rs_bytes = dp_bytes = dp_update = 0.0
    if ts.kind is ShardingType.DATA_PARALLEL:
        f, g = lookup_bytes(b * t.pooling, b, cols, spec)
        dp_bytes = t.rows * t.dim * e
        dp_update = 2.0 * shard_memory_bytes(spec, t.rows, t.dim)
    elif ts.kind in (ShardingType.TABLE_WISE, ShardingType.COLUMN_WISE):
        f, g = lookup_bytes(big_b * t.pooling, big_b, cols, spec)
        for r, c in zip(ranks.tolist(), cols.tolist(), strict=True):
            m[OUT_SENT, r] += (n - 1) * b * c * e
            m[IDS_RECV, r] += (n - 1) * b * ids_per_sample
            m[OUT_RECV] += b * c * e  # every other rank: its b rows of this shard
            m[OUT_RECV, r] -= b * c * e
            m[IDS_SENT] += b * ids_per_sample
            m[IDS_SENT, r] -= b * ids_per_sample
    else:
        f, g = lookup_bytes(big_b * t.pooling * rows / t.rows, big_b, cols, spec)
        if ts.kind is ShardingType.ROW_WISE:
            rs_bytes = big_b * t.dim * e
            m[IDS_SENT] += b * ids_per_sample * (n - 1) / n  # bucketized: (N-1)/N of a rank's ids leave it
            m[IDS_RECV] += b * ids_per_sample * (n - 1) / n
        else:  # table-row-wise over the k nodes that hold its rows
            mine = np.isin(np.arange(n) // local, np.unique(ranks // local))
            k = int(mine.sum()) // local
            m[NODE_RS, mine] += big_b * t.dim * e
            m[X_SENT, mine] += big_b / local * t.dim * e * (hosts - 1) / hosts
            m[X_RECV] += np.where(mine, k - 1, k) * b * t.dim * e  # a partial row from each other holding node
            m[IDS_SENT] += np.where(mine, (k - 1) / k, 1.0) * b * ids_per_sample
            m[IDS_RECV, mine] += ((n - k * local) + (k - 1) * local) * b * ids_per_sample / (k * local)
    np.add.at(m[FWD], ranks, _stream_s(cluster, f))
    np.add.at(m[BWD], ranks, _stream_s(cluster, g))
    m.setflags(write=False)
    return m, rs_bytes, dp_bytes, dp_update


@dataclasses.dataclass(frozen=True)
class DlrmTerms:
    """What a sharding puts on each rank (module docstring): per-rank lookup seconds and all-to-all bytes,
    and the step's reduce-scatter, data-parallel gradient and optimizer bytes; the estimate and the
    generated trace (trace/from_dlrm.py) both read it."""

    gpus: int
    local: int  # GPUs per node (ranks of one node)
    fwd: np.ndarray  # lookup forward seconds per rank
    bwd: np.ndarray
    mem: np.ndarray
    ids_sent: np.ndarray
    ids_recv: np.ndarray
    out_sent: np.ndarray  # pooled rows per direction (the gradients come back the same size)
    out_recv: np.ndarray
    x_sent: np.ndarray  # table-row-wise rows across nodes
    x_recv: np.ndarray
    node_rs: np.ndarray
    rs_bytes: float  # row-wise reduce-scatter over all ranks
    dp_bytes: float  # data-parallel tables' gradients (all-reduced with the dense part's)
    dp_update: float
    # the pooled rows' all-to-all spans each node's ranks, its cross-node part in x_sent / x_recv (HugeCTR's
    # hierarchical all-to-all: NVLink shuffle in the node, then one exchange per local rank across nodes)
    node_a2a: bool = False

    @property
    def hosts(self) -> int:
        return self.gpus // self.local

    @staticmethod
    def a2a_bytes(sent: np.ndarray, recv: np.ndarray, size: int) -> float:
        """An uneven all-to-all as the uniform one it is priced as: the slowest rank's max(sent, received)
        bytes, scaled to a buffer whose cross-rank part is that many bytes."""
        return float(max(sent.max(), recv.max())) * size / (size - 1) if size > 1 else 0.0


# a sharding: one per table, or HugeCTR's hybrid embedding over all of them (model/hybrid_embedding.py)
Sharding = tuple[TableSharding, ...] | HybridEmbedding


def _hybrid_terms(spec: DlrmSpec, cluster: Cluster, h: HybridEmbedding, global_batch: int) -> DlrmTerms:
    """The hybrid embedding's per-rank terms (model/hybrid_embedding.py): the same on every rank."""
    h.check(spec, global_batch)
    n = cluster.num_gpus
    d = spec.tables[0].dim
    lookups = global_batch * sum(t.pooling for t in spec.tables)
    served = h.infrequent / n  # the infrequent ids each rank's categories serve
    f_freq, g_freq = lookup_bytes((lookups - h.infrequent) / n, global_batch / n * len(spec.tables), d, spec)
    f_inf, g_inf = lookup_bytes(served, served, d, spec)
    fwd, bwd = _stream_s(cluster, np.array([f_freq + f_inf, g_freq + g_inf]))
    rows = sum(t.rows for t in spec.tables)
    local = min(cluster.gpus_per_node, n)
    hosts = n // local
    rows_out = served * d * spec.pooled_dtype.bytes  # destinations uniform over the ranks
    zero = np.zeros(n)
    return DlrmTerms(gpus=n, local=local, fwd=np.full(n, fwd), bwd=np.full(n, bwd),
                     mem=np.full(n, shard_memory_bytes(spec, h.frequent + (rows - h.frequent) / n, d)),
                     ids_sent=zero, ids_recv=zero, out_sent=np.full(n, rows_out * (local - 1) / local),
                     out_recv=np.full(n, rows_out * (local - 1) / local), x_sent=np.full(n, rows_out * (hosts - 1) / hosts),
                     x_recv=np.full(n, rows_out * (hosts - 1) / hosts), node_rs=zero, rs_bytes=0.0,
                     dp_bytes=h.frequent * d * spec.pooled_dtype.bytes,
                     dp_update=2.0 * shard_memory_bytes(spec, h.frequent, d), node_a2a=True)


def dlrm_terms(spec: DlrmSpec, cluster: Cluster, shardings: Sharding, *, global_batch: int) -> DlrmTerms:
    """Every table's contribution (_table_terms) summed over the sharding, or the hybrid embedding's."""
    if isinstance(shardings, HybridEmbedding):
        return _hybrid_terms(spec, cluster, shardings, global_batch)
    n = cluster.num_gpus
    total = np.zeros((10, n))
    rs_bytes = dp_bytes = dp_update = 0.0
    for ts in shardings:
        m, rs, dpb, dpu = _table_terms(ts, spec, cluster, global_batch)
        total += m
        rs_bytes += rs
        dp_bytes += dpb
        dp_update += dpu
    return DlrmTerms(gpus=n, local=min(cluster.gpus_per_node, n), fwd=total[FWD], bwd=total[BWD], mem=total[MEM],
                     ids_sent=total[IDS_SENT], ids_recv=total[IDS_RECV], out_sent=total[OUT_SENT],
                     out_recv=total[OUT_RECV], x_sent=total[X_SENT], x_recv=total[X_RECV], node_rs=total[NODE_RS],
                     rs_bytes=rs_bytes, dp_bytes=dp_bytes, dp_update=dp_update)


def optimizer_bytes(spec: DlrmSpec, terms: DlrmTerms) -> float:
    """HBM bytes of the step's optimizer: the dense part's fp32 weights, gradients and state, and the
    data-parallel tables' update."""
    return spec.dense_params * (2 * DENSE_GRAD_BYTES + 2 * DENSE_STATE_BYTES) + terms.dp_update


def estimate_dlrm(spec: DlrmSpec, cluster: Cluster, shardings: Sharding, *,
                  global_batch: int, compression: EmbCompression | None = None) -> DlrmEstimate:
    """Step time, per-rank lookup time and memory of `spec` under `shardings` (module docstring), with the
    pooled-embedding all-to-alls compressed when `compression` is given."""
    n = cluster.num_gpus
    check_batch(global_batch, n)
    b = global_batch / n
    t = dlrm_terms(spec, cluster, shardings, global_batch=global_batch)
    local, hosts = t.local, t.hosts
    fwd, bwd, mem = t.fwd, t.bwd, t.mem
    out_sent, out_recv, x_sent, x_recv, node_rs = t.out_sent, t.out_recv, t.x_sent, t.x_recv, t.node_rs
    dev = cluster.device
    lookup_fwd, lookup_bwd = float(fwd.max()), float(bwd.max())
    def a2a_s(ratio: float) -> float:
        s = _uneven_a2a_s(cluster, out_sent / ratio, out_recv / ratio, local if t.node_a2a else n)
        if hosts > 1 and (x_sent.any() or x_recv.any()):
            s += _uneven_a2a_s(cluster, x_sent / ratio, x_recv / ratio, hosts, local)
        return s

    codec = 0.0
    if compression is None:
        a2a_fwd = a2a_bwd = a2a_s(1.0)  # pooled embeddings forward, their gradients backward
    else:
        a2a_fwd, a2a_bwd = a2a_s(compression.ratio_fwd), a2a_s(compression.ratio_bwd)
        # each rank encodes what it sends and decodes what it receives, forward and backward
        codec = 2.0 * float(np.max(codec_s(t, compression)))
    g_all = group_net(cluster, n, 1)
    rs = collective_s(Collective.REDUCE_SCATTER, t.rs_bytes, g_all) if t.rs_bytes else 0.0
    if node_rs.any():
        rs += collective_s(Collective.REDUCE_SCATTER, float(node_rs.max()), group_net(cluster, local, 1))
    ids_a2a = _uneven_a2a_s(cluster, t.ids_sent, t.ids_recv, n)
    d_fwd, d_bwd = dense_s(spec, cluster, int(b))
    ar = collective_s(Collective.ALL_REDUCE, dense_grad_bytes(spec, t), g_all) if n > 1 else 0.0
    hidden_under = d_bwd + a2a_bwd + rs + lookup_bwd  # the all-reduce starts with the dense backward
    breakdown = {
        "lookup_fwd": lookup_fwd,
        "lookup_bwd": lookup_bwd,
        "embedding_a2a": a2a_fwd + a2a_bwd,
        "embedding_codec": codec,
        "row_wise_rs_ag": 2.0 * rs,
        "input_dist_exposed": max(0.0, ids_a2a - (d_fwd + d_bwd)),
        "dense_fwd": d_fwd,
        "dense_bwd": d_bwd,
        "allreduce_exposed": max(0.0, ar - hidden_under),
        "optimizer": eff.elementwise_s(dev, optimizer_bytes(spec, t), 1),
    }
    step = sum(breakdown.values())
    dense_mem = dense_memory_bytes(spec)
    return DlrmEstimate(step_time_s=step, breakdown_s=breakdown, samples_per_s=global_batch / step,
                        rank_lookup_s=tuple((fwd + bwd).tolist()), rank_sent_bytes=tuple((out_sent + x_sent + node_rs / local).tolist()),
                        rank_memory_bytes=tuple((mem + dense_mem).tolist()),
                        capacity_bytes=cluster.memory_capacity_bytes)


def dense_grad_bytes(spec: DlrmSpec, terms: DlrmTerms) -> float:
    """The step's all-reduce: the dense part's gradients (spec.dense_grad_dtype: fp32 under DDP and
    autocast, fp16 in HugeCTR's mixed precision) and the data-parallel tables'."""
    return spec.dense_params * spec.dense_grad_dtype.bytes + terms.dp_bytes


def codec_s(terms: DlrmTerms, compression: EmbCompression) -> np.ndarray:
    """Per rank, one direction: encoding what it sends and decoding what it receives."""
    return ((terms.out_sent + terms.x_sent) / compression.encode_Bps
            + (terms.out_recv + terms.x_recv) / compression.decode_Bps)
