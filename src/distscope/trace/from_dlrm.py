"""Chakra traces of a recommendation model's training step under an embedding sharding (`trace generate
--model dlrm:...`): one trace per rank, since the ranks hold different tables and look up different rows.

Each rank runs model/embedding_cost.py's step as a chain (its module docstring), with the same bytes
(embedding_cost.dlrm_terms) and the same uniform stand-in for every uneven all-to-all (the slowest rank's
max(sent, received) bytes, DlrmTerms.a2a_bytes), so that every rank's collective has one size:

    lookup forward (this rank's) -> [encode] -> pooled all-to-all (+ the cross-node one of table-row-wise
    tables, + the row-wise and in-node reduce-scatters) -> [decode] -> dense forward -> dense backward ->
    [encode] -> gradient all-to-all (+ cross-node) -> [decode] -> row-wise all-gathers -> lookup backward
    (this rank's) -> optimizer

The next batch's input distribution (the ids' all-to-all) starts with the dense forward, and the
dense gradients' all-reduce (with the data-parallel tables') with the dense backward; the optimizer waits
for both. The slowest rank's lookups set the pace at the collectives, as the estimate's max over ranks
does; `simulate` of these traces and `estimate` of the same flags agree (tests/trace/test_from_dlrm.py).
"""

from __future__ import annotations

import dataclasses

from distscope.compress.eb_codec import EmbCompression
from distscope.model import efficiency as eff
from distscope.model.embedding_cost import (
    DlrmTerms,
    Sharding,
    codec_s,
    dense_grad_bytes,
    dense_s,
    dlrm_terms,
    optimizer_bytes,
)
from distscope.system.topology import Cluster
from distscope.trace.graph import CollKind, Node, NodeKind, RankGraph
from distscope.trace.traceset import TraceSet
from distscope.workload.embedding import DlrmSpec


@dataclasses.dataclass
class _Chain:
    """One rank's nodes, each after the previous one unless told otherwise."""

    nodes: list[Node] = dataclasses.field(default_factory=list)

    def add(self, name: str, deps: tuple[int, ...] | None = None, **kw: object) -> int:
        i = len(self.nodes)
        if deps is None:
            deps = (i - 1,) if i else ()
        self.nodes.append(Node(id=i, name=name, data_deps=deps, **kw))  # type: ignore[arg-type]
        return i

    def comp(self, name: str, seconds: float, deps: tuple[int, ...] | None = None) -> int:
        return self.add(name, deps, kind=NodeKind.COMP, duration_s=float(seconds))

    def coll(self, name: str, kind: CollKind, nbytes: float, pg: str, deps: tuple[int, ...] | None = None) -> int:
        return self.add(name, deps, kind=NodeKind.COMM_COLL, comm_kind=kind, comm_size_bytes=round(nbytes), pg_name=pg)


def _groups(t: DlrmTerms) -> dict[str, tuple[int, ...]]:
    """The world, each node's ranks and each local rank's peers on the other nodes."""
    out = {"world": tuple(range(t.gpus))}
    out |= {f"node{h}": tuple(range(h * t.local, (h + 1) * t.local)) for h in range(t.hosts)}
    out |= {f"local{r}": tuple(range(r, t.gpus, t.local)) for r in range(t.local)}
    return out


@dataclasses.dataclass(frozen=True)
class _Step:
    """What every rank's chain reads (module docstring)."""

    spec: DlrmSpec
    t: DlrmTerms
    d_fwd: float
    d_bwd: float
    opt_s: float
    compression: EmbCompression | None

    def rank_graph(self, r: int) -> RankGraph:
        t, comp = self.t, self.compression
        n, local, hosts = t.gpus, t.local, t.hosts
        ratio = (1.0, 1.0) if comp is None else (comp.ratio_fwd, comp.ratio_bwd)
        codec = 0.0 if comp is None else float(codec_s(t, comp)[r])
        cross = hosts > 1 and bool(t.x_sent.any() or t.x_recv.any())
        c = _Chain()

        def exchange(direction: str, k: int) -> None:
            if comp is not None:
                c.comp(f"encode_{direction}", codec / 2)
            size, pg = (local, f"node{r // local}") if t.node_a2a else (n, "world")
            if size > 1:
                c.coll(f"pooled_a2a_{direction}", CollKind.ALL_TO_ALL,
                       t.a2a_bytes(t.out_sent / ratio[k], t.out_recv / ratio[k], size), pg)
            if cross:
                c.coll(f"cross_node_a2a_{direction}", CollKind.ALL_TO_ALL,
                       t.a2a_bytes(t.x_sent / ratio[k], t.x_recv / ratio[k], hosts), f"local{r % local}")
            if comp is not None:
                c.comp(f"decode_{direction}", codec / 2)

        def row_wise(kind: CollKind, what: str) -> None:
            # an all-gather's size is its per-rank shard (Node), the reduce-scatter's the whole buffer
            if t.rs_bytes and n > 1:
                c.coll(f"row_wise_{what}", kind, t.rs_bytes / (n if kind is CollKind.ALL_GATHER else 1), "world")
            if t.node_rs.any() and local > 1:
                c.coll(f"node_{what}", kind, float(t.node_rs.max()) / (local if kind is CollKind.ALL_GATHER else 1),
                       f"node{r // local}")

        c.comp("lookup_fwd", t.fwd[r])
        exchange("fwd", 0)
        row_wise(CollKind.REDUCE_SCATTER, "rs")
        dense_f = c.comp("dense_fwd", self.d_fwd)
        ids = c.coll("input_dist_a2a", CollKind.ALL_TO_ALL, t.a2a_bytes(t.ids_sent, t.ids_recv, n), "world",
                     deps=(dense_f - 1,)) if n > 1 else None
        dense_b = c.comp("dense_bwd", self.d_bwd, deps=(dense_f,))
        ar = c.coll("allreduce", CollKind.ALL_REDUCE, dense_grad_bytes(self.spec, t), "world",
                    deps=(dense_f,)) if n > 1 else None
        c.comp("dense_bwd_done", 0.0, deps=(dense_b,))  # the gradient exchange follows the backward, not the all-reduce
        exchange("bwd", 1)
        row_wise(CollKind.ALL_GATHER, "ag")
        last = c.comp("lookup_bwd", t.bwd[r])
        c.comp("optimizer", self.opt_s, deps=tuple(x for x in (last, ids, ar) if x is not None))
        return RankGraph(rank=r, nodes=tuple(c.nodes))


def dlrm_traces(spec: DlrmSpec, cluster: Cluster, shardings: Sharding, *, global_batch: int,
                compression: EmbCompression | None = None) -> TraceSet:
    """Every rank's graph of one training step (module docstring)."""
    t = dlrm_terms(spec, cluster, shardings, global_batch=global_batch)
    d_fwd, d_bwd = dense_s(spec, cluster, global_batch // t.gpus)
    step = _Step(spec=spec, t=t, d_fwd=d_fwd, d_bwd=d_bwd, compression=compression,
                 opt_s=eff.elementwise_s(cluster.device, optimizer_bytes(spec, t), 1))
    return TraceSet(graphs={r: step.rank_graph(r) for r in range(t.gpus)}, process_groups=_groups(t))
