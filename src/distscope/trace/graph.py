"""distscope's own per-rank execution graph: the type the simulator runs on.

Chakra ET files are one way in and out (`distscope.trace.chakra_io`); strings and proto integers become
these enums once, at that boundary. A graph is a tuple of frozen `Node`s whose ids are local to the rank
and whose dependencies refer to those ids (Chakra's `data_deps` / `ctrl_deps`).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from distscope.errors import DistscopeError


class NodeKind(enum.Enum):
    """Chakra `NodeType` values that distscope executes (et_def.proto). METADATA nodes (e.g. PyTorch's
    `## process_group:init ##`) carry no work: they finish as soon as their dependencies do, as in
    ASTRA-sim's Workload::issue_metadata, and later nodes may depend on them."""

    METADATA = "METADATA"
    COMP = "COMP"
    COMM_COLL = "COMM_COLL"
    COMM_SEND = "COMM_SEND"
    COMM_RECV = "COMM_RECV"
    MEM_LOAD = "MEM_LOAD"
    MEM_STORE = "MEM_STORE"

    @property
    def is_comm(self) -> bool:
        return self in (NodeKind.COMM_COLL, NodeKind.COMM_SEND, NodeKind.COMM_RECV)


class CollKind(enum.Enum):
    """Chakra `CollectiveCommType` values (et_def.proto)."""

    ALL_REDUCE = "ALL_REDUCE"
    REDUCE = "REDUCE"
    ALL_GATHER = "ALL_GATHER"
    GATHER = "GATHER"
    SCATTER = "SCATTER"
    BROADCAST = "BROADCAST"
    ALL_TO_ALL = "ALL_TO_ALL"
    REDUCE_SCATTER = "REDUCE_SCATTER"
    REDUCE_SCATTER_BLOCK = "REDUCE_SCATTER_BLOCK"
    BARRIER = "BARRIER"


@dataclass(frozen=True, kw_only=True, slots=True)
class Node:
    """One operation of one rank.

    `duration_s` is the measured/estimated run time of a COMP or MEM node (Chakra `duration_micros`);
    `num_ops` (FLOPs) and `tensor_size_bytes` are kept for roofline timing and reporting.
    Communication nodes carry `comm_kind` + `comm_size_bytes` (collectives: for ALL_GATHER the per-rank
    input shard, otherwise the full buffer, as ASTRA-sim reads Chakra), or `comm_src`/`comm_dst`/`comm_tag`
    plus `tensor_size_bytes` (point-to-point).
    `lane` names the execution resource of a COMP/MEM node within its rank: a CPU thread ("tid:<n>") or a
    device stream ("stream:<n>"); nodes on different lanes overlap, nodes on one lane run one at a time.
    "" is the rank's default lane (generated traces).
    """

    id: int
    name: str
    kind: NodeKind
    data_deps: tuple[int, ...] = ()
    ctrl_deps: tuple[int, ...] = ()
    duration_s: float = 0.0
    num_ops: int = 0
    tensor_size_bytes: int = 0
    comm_kind: CollKind | None = None
    comm_size_bytes: int = 0
    comm_src: int | None = None
    comm_dst: int | None = None
    comm_tag: int = 0
    pg_name: str = ""
    is_cpu_op: bool = False
    lane: str = ""
    comm_dtype: str = ""  # element type of a communication node's payload (torch name), when known

    def __post_init__(self) -> None:
        if self.id < 0:
            raise DistscopeError(f"node {self.name!r}: id={self.id} must be >= 0")
        if self.duration_s < 0:
            raise DistscopeError(f"node {self.id} ({self.name!r}): duration_s={self.duration_s} must be >= 0")
        if self.kind is NodeKind.COMM_COLL and self.comm_kind is None:
            raise DistscopeError(f"node {self.id} ({self.name!r}): COMM_COLL needs comm_type")
        if self.comm_size_bytes < 0 or self.tensor_size_bytes < 0:
            raise DistscopeError(f"node {self.id} ({self.name!r}): sizes must be >= 0")

    @property
    def deps(self) -> tuple[int, ...]:
        return self.data_deps + self.ctrl_deps


@dataclass(frozen=True, kw_only=True)
class RankGraph:
    """All nodes of one rank, in file order; node ids are unique within the rank."""

    rank: int
    nodes: tuple[Node, ...]
    metadata: dict[str, object] = field(default_factory=dict, hash=False, compare=False)

    def __post_init__(self) -> None:
        if self.rank < 0:
            raise DistscopeError(f"rank={self.rank} must be >= 0")
        seen: set[int] = set()
        for node in self.nodes:
            if node.id in seen:
                raise DistscopeError(f"rank {self.rank}, node {node.id} ({node.name!r}): duplicate node id")
            seen.add(node.id)
        for node in self.nodes:
            for dep in node.deps:
                if dep not in seen:
                    raise DistscopeError(
                        f"rank {self.rank}, node {node.id} ({node.name!r}): field data_deps/ctrl_deps "
                        f"names node {dep}, which is not in the trace"
                    )
