"""Compile a TraceSet into what the engine runs: per simulated rank, flat lists of node kinds, durations,
children and match ids; collectives matched across their process group, sends matched to receives by
(src, dst, tag); optionally only one representative rank per symmetry class (symmetry.py).

All trace errors surface here, before simulation, as one line naming rank, node and field.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from functools import cached_property

from distscope.errors import DistscopeError
from distscope.sim.network import NetworkModel
from distscope.sim.symmetry import refine_classes
from distscope.trace.graph import CollKind, Node, NodeKind
from distscope.trace.traceset import TraceSet

COMPUTE, COLL, SEND, RECV, PASS = 0, 1, 2, 3, 4
_KIND_CODE = {
    NodeKind.METADATA: PASS,
    NodeKind.COMP: COMPUTE,
    NodeKind.MEM_LOAD: COMPUTE,
    NodeKind.MEM_STORE: COMPUTE,
    NodeKind.COMM_COLL: COLL,
    NodeKind.COMM_SEND: SEND,
    NodeKind.COMM_RECV: RECV,
}


def _kind_codes(nodes: tuple[Node, ...]) -> list[int]:
    """Engine codes per node (identity tests: Enum.__hash__ is a Python call, too slow per node)."""
    coll, send, recv, meta = NodeKind.COMM_COLL, NodeKind.COMM_SEND, NodeKind.COMM_RECV, NodeKind.METADATA
    out = []
    for n in nodes:
        k = n.kind
        out.append(
            COLL if k is coll else SEND if k is send else RECV if k is recv else PASS if k is meta else COMPUTE
        )
    return out


COMM_TID = 1  # timeline thread of the communication streams


def lane_tid(lane: int) -> int:
    """Timeline thread of compute lane `lane`: 0 for the first, then 2, 3, ... (1 is communication)."""
    return 0 if lane == 0 else lane + 1


def _lanes(nodes: tuple[Node, ...]) -> tuple[list[int], int]:
    """Lane index per node (0 = the first lane seen, "" included) and the number of lanes."""
    ids: dict[str, int] = {}
    out = [ids.setdefault(n.lane, len(ids)) for n in nodes]
    return out, max(1, len(ids))


@dataclass(frozen=True, kw_only=True)
class Device:
    """What prices COMP/MEM nodes without a duration: peak FLOP/s and local memory bandwidth."""

    peak_flops: float = 0.0
    mem_bw_Bps: float = 0.0


@dataclass
class RankProgram:
    """One simulated rank, as flat per-node lists (index = position in the trace)."""

    rank: int
    nodes: tuple[Node, ...]
    kind: list[int]
    dur_s: list[float]
    children: list[list[int]]
    indeg: list[int]
    stream: list[int]  # collective stream id (one per process-group name), -1 otherwise
    inst: list[int]  # collective instance id, -1 otherwise
    peer: list[tuple[int, int] | None]  # RECV: (simulated rank index, node index) of its send
    resources: list[tuple[Hashable, ...]]
    lane: list[int] = field(default_factory=list)  # compute lane index per node (see Node.lane)
    num_lanes: int = 1

    @cached_property
    def names(self) -> list[str]:
        return [n.name for n in self.nodes]

    @cached_property
    def ids(self) -> list[int]:
        return [n.id for n in self.nodes]


@dataclass
class Program:
    ranks: list[RankProgram]
    class_of: list[int]  # real rank -> index into `ranks` (its representative)
    inst_participants: list[int] = field(default_factory=list)
    inst_members: list[tuple[int, ...]] = field(default_factory=list)
    inst_label: list[str] = field(default_factory=list)

    @property
    def num_ranks(self) -> int:
        return len(self.class_of)


def _where(rank: int, node: Node) -> str:
    return f"rank {rank}, node {node.id} ({node.name!r})"


def _kname(node: Node) -> str | None:
    return node.comm_kind.value if node.comm_kind else None


def _check_acyclic(rp: RankProgram) -> None:
    """Kahn's algorithm on a compiled rank (ranks folded into it by symmetry have its very graph)."""
    indeg = list(rp.indeg)
    children = rp.children
    stack = [i for i, k in enumerate(indeg) if k == 0]
    seen = 0
    while stack:
        i = stack.pop()
        seen += 1
        for c in children[i]:
            indeg[c] -= 1
            if indeg[c] == 0:
                stack.append(c)
    if seen != len(indeg):
        i = next(i for i, k in enumerate(indeg) if k > 0)
        raise DistscopeError(
            f"rank {rp.rank}, node {rp.ids[i]} ({rp.names[i]!r}): dependency cycle through data_deps/ctrl_deps"
        )


def _compute_s(node: Node, device: Device) -> float:
    if node.duration_s > 0 or (node.kind is NodeKind.COMP and not (node.num_ops and device.peak_flops)):
        return node.duration_s
    if node.kind is NodeKind.COMP:
        return node.num_ops / device.peak_flops
    return node.tensor_size_bytes / device.mem_bw_Bps if device.mem_bw_Bps > 0 else node.duration_s


def compile_program(
    traces: TraceSet,
    network: NetworkModel,
    *,
    device: Device | None = None,
    symmetric: bool = True,
    single_comm_stream: bool = False,
    with_resources: bool = True,
) -> Program:
    """Validate and match a TraceSet; with `symmetric`, keep one representative per rank class.

    Collectives run on one stream per process-group name (NCCL: one stream per communicator), or, with
    `single_comm_stream`, all on one stream per rank in ready order, the way ASTRA-sim's system layer
    queues every collective of an NPU behind the previous ones on the same dimension queues.
    `with_resources` records which (rank, level) resources each transfer uses (needed by shared mode).
    """
    device = device or Device()
    n_ranks = traces.num_ranks
    if n_ranks > network.num_npus:
        raise DistscopeError(f"traces have {n_ranks} ranks but the network has only {network.num_npus} NPUs")
    # Per rank: collectives grouped by (pg_name, members), sends/recvs keyed by (src, dst, tag).
    coll_lists: dict[int, dict[tuple[str, tuple[int, ...]], list[int]]] = {}
    sends: dict[tuple[int, int, int], list[tuple[int, int]]] = {}
    recvs: dict[tuple[int, int, int], list[tuple[int, int]]] = {}
    traced = sorted(traces.graphs)
    for rank in traced:
        graph = traces.graphs[rank]
        groups: dict[tuple[str, tuple[int, ...]], list[int]] = {}
        members_of: dict[str, tuple[str, tuple[int, ...]]] = {}
        for i, node in enumerate(graph.nodes):
            if node.kind is NodeKind.COMM_COLL:
                gkey = members_of.get(node.pg_name)
                if gkey is None:
                    gkey = members_of[node.pg_name] = (node.pg_name, traces.members(node.pg_name, rank))
                groups.setdefault(gkey, []).append(i)
            elif node.kind in (NodeKind.COMM_SEND, NodeKind.COMM_RECV):
                is_send = node.kind is NodeKind.COMM_SEND
                peer = node.comm_dst if is_send else node.comm_src
                fld = "comm_dst" if is_send else "comm_src"
                if peer is None or not 0 <= peer < n_ranks or peer == rank:
                    raise DistscopeError(
                        f"{_where(rank, node)}: field {fld}={peer} is not another rank (0..{n_ranks - 1})"
                    )
                key = (rank, peer, node.comm_tag) if is_send else (peer, rank, node.comm_tag)
                (sends if is_send else recvs).setdefault(key, []).append((rank, i))
        coll_lists[rank] = groups
    _check_collectives(traces, coll_lists)
    send_of = _match_p2p(traces, sends, recvs)

    # Per-node collective durations and local signatures (for symmetry classes).
    coll_dur: dict[tuple[int, int], float] = {}
    for rank in traced:
        for (pg, members), idxs in coll_lists[rank].items():
            for i in idxs:
                node = traces.graphs[rank].nodes[i]
                assert node.comm_kind is not None
                try:
                    coll_dur[rank, i] = network.collective_s(node.comm_kind, node.comm_size_bytes, members, pg)
                except DistscopeError as exc:
                    raise DistscopeError(f"{_where(rank, node)}: field comm_type: {exc}") from exc

    def p2p_cost(rank: int, i: int) -> float:
        node = traces.graphs[rank].nodes[i]
        src, dst = (rank, node.comm_dst) if node.kind is NodeKind.COMM_SEND else (node.comm_src, rank)
        assert src is not None and dst is not None
        return network.p2p_s(src, dst, node.tensor_size_bytes or node.comm_size_bytes, node.pg_name)

    if traces.class_of is not None:
        cls = list(traces.class_of)
    elif symmetric and n_ranks > 1:
        cls = refine_classes(traces, [coll_lists[r] for r in range(n_ranks)], coll_dur, p2p_cost)
    else:
        cls = list(range(n_ranks))
    reps: dict[int, int] = {}
    for rank, c in enumerate(cls):
        reps.setdefault(c, c if traces.class_of is not None else rank)
    rep_ranks = sorted(reps.values())
    sim_index = {r: k for k, r in enumerate(rep_ranks)}
    class_of = [sim_index[reps[cls[r]]] for r in range(n_ranks)]

    program = Program(ranks=[], class_of=class_of)
    inst_ids: dict[frozenset[tuple[int, int]], int] = {}
    stream_ids: dict[str, int] = {}
    group_ids: dict[tuple[str, tuple[int, ...]], int] = {}
    member_lists: list[list[list[int]]] = []
    group_res: list[tuple[Hashable, ...]] = []
    inst_of: dict[tuple[int, int], int] = {}
    for rank in rep_ranks:
        graph = traces.graphs[rank]
        index = {n.id: i for i, n in enumerate(graph.nodes)}
        m = len(graph.nodes)
        lanes, num_lanes = _lanes(graph.nodes)
        rp = RankProgram(
            rank=rank,
            nodes=graph.nodes,
            kind=_kind_codes(graph.nodes),
            dur_s=[0.0] * m,
            children=[[] for _ in range(m)],
            indeg=[len(n.data_deps) + len(n.ctrl_deps) for n in graph.nodes],
            stream=[-1] * m,
            inst=[-1] * m,
            peer=[None] * m,
            resources=[()] * m,
            lane=lanes,
            num_lanes=num_lanes,
        )
        children = rp.children
        for i, node in enumerate(graph.nodes):
            for d in node.data_deps:
                children[index[d]].append(i)
            for d in node.ctrl_deps:
                children[index[d]].append(i)
            code = rp.kind[i]
            if code == COMPUTE:
                rp.dur_s[i] = _compute_s(node, device)
            elif code in (SEND, RECV):
                rp.dur_s[i] = p2p_cost(rank, i)
                peer = node.comm_dst if code == SEND else node.comm_src
                assert peer is not None
                if with_resources:
                    rp.resources[i] = network.resources((rank, peer))
                if code == RECV:
                    s_rank, s_idx = send_of[rank, i]
                    rp.peer[i] = (class_of[s_rank], s_idx)
        for gkey, idxs in coll_lists[rank].items():
            pg, members = gkey
            sid = 0 if single_comm_stream else stream_ids.setdefault(pg, len(stream_ids))
            gid = group_ids.get(gkey)
            if gid is None:
                gid = group_ids[gkey] = len(group_ids)
                member_lists.append([_member_list(coll_lists, gkey, s, rank, cls) for s in members])
                group_res.append(network.resources(members) if with_resources else ())
            lists = member_lists[gid]
            own = class_of[rank]
            one_class = all(class_of[x] == own for x in members) and all(lst is idxs for lst in lists)
            for k, i in enumerate(idxs):
                inst = inst_of.get((gid, k))
                if inst is None:
                    if one_class:  # every member runs this very graph: one participant
                        parts = frozenset(((own, i),))
                    else:
                        parts = frozenset((class_of[s], lst[k]) for s, lst in zip(members, lists, strict=True))
                    inst = inst_ids.get(parts)
                    if inst is None:
                        inst = inst_ids[parts] = len(program.inst_participants)
                        program.inst_participants.append(len(parts))
                        program.inst_members.append(members)
                        program.inst_label.append(pg)
                    inst_of[gid, k] = inst
                rp.stream[i] = sid
                rp.inst[i] = inst
                rp.dur_s[i] = coll_dur[rank, i]
                rp.resources[i] = group_res[gid]
        _check_acyclic(rp)
        program.ranks.append(rp)
    return program


def _member_list(
    coll_lists: dict[int, dict[tuple[str, tuple[int, ...]], list[int]]],
    gkey: tuple[str, tuple[int, ...]],
    member: int,
    rank: int,
    cls: list[int],
) -> list[int]:
    """Node indices of `member`'s collectives on group `gkey`. A member without a trace of its own (a
    symmetric trace set: `cls` is then the representative rank of every rank) runs its representative's
    graph: it may sit in a group of its own class, where it mirrors `rank`, or in a group its
    representative is in too (a captured DP group grown by `simulate --dp`)."""
    if member in coll_lists:
        return coll_lists[member][gkey]
    if gkey in coll_lists.get(cls[member], {}):
        return coll_lists[cls[member]][gkey]
    if cls[member] != cls[rank]:
        raise DistscopeError(
            f"symmetric traces: group {gkey[0]!r} mixes rank {rank} with rank {member} of another class "
            f"that has no trace of its own"
        )
    return coll_lists[rank][gkey]


def _check_collectives(traces: TraceSet, coll_lists: dict[int, dict[tuple[str, tuple[int, ...]], list[int]]]) -> None:
    """Every member of a group issues the same sequence of collectives (kind and size) as its leader."""
    for rank, groups in coll_lists.items():
        for (pg, members), idxs in groups.items():
            leader = next(m for m in members if m in coll_lists)
            if leader == rank:
                continue
            theirs = coll_lists[leader].get((pg, members), [])
            mine_nodes = traces.graphs[rank].nodes
            their_nodes = traces.graphs[leader].nodes
            if len(theirs) > len(idxs):
                node = their_nodes[theirs[len(idxs)]]
                raise DistscopeError(
                    f"{_where(leader, node)}: collective #{len(idxs) + 1} on pg_name={pg!r} has no match on "
                    f"rank {rank} (it issues {len(idxs)})"
                )
            for k, i in enumerate(idxs):
                node = mine_nodes[i]
                if k >= len(theirs):
                    raise DistscopeError(
                        f"{_where(rank, node)}: collective #{k + 1} on pg_name={pg!r} has no match on "
                        f"rank {leader} (it issues {len(theirs)})"
                    )
                peer = their_nodes[theirs[k]]
                if peer.comm_kind is not node.comm_kind:
                    raise DistscopeError(
                        f"{_where(rank, node)}: field comm_type={_kname(node)} but rank {leader} "
                        f"node {peer.id} has {_kname(peer)}"
                    )
                if peer.comm_size_bytes != node.comm_size_bytes:
                    raise DistscopeError(
                        f"{_where(rank, node)}: field comm_size={node.comm_size_bytes} but rank {leader} "
                        f"node {peer.id} has {peer.comm_size_bytes}"
                    )
        # A member that never issues on a group the others use is caught from the leader's side:
    for rank, groups in coll_lists.items():
        for (pg, members), idxs in groups.items():
            if members[0] != rank:
                continue
            for other in members[1:]:
                if other in coll_lists and (pg, members) not in coll_lists[other]:
                    node = traces.graphs[rank].nodes[idxs[0]]
                    raise DistscopeError(
                        f"{_where(rank, node)}: collective #1 on pg_name={pg!r} has no match on rank {other} "
                        f"(it issues 0)"
                    )


def _match_p2p(
    traces: TraceSet,
    sends: dict[tuple[int, int, int], list[tuple[int, int]]],
    recvs: dict[tuple[int, int, int], list[tuple[int, int]]],
) -> dict[tuple[int, int], tuple[int, int]]:
    """The k-th send on (src, dst, tag) matches the k-th receive on it."""
    out = {}
    for key in sorted(set(sends) | set(recvs)):
        s, r = sends.get(key, []), recvs.get(key, [])
        if len(s) != len(r):
            extra = s[len(r)] if len(s) > len(r) else r[len(s)]
            node = traces.graphs[extra[0]].nodes[extra[1]]
            fld = "comm_dst" if node.kind is NodeKind.COMM_SEND else "comm_src"
            what = "send has no matching receive" if node.kind is NodeKind.COMM_SEND else "receive has no matching send"
            raise DistscopeError(
                f"{_where(extra[0], node)}: {what} "
                f"(field {fld}={key[1] if fld == 'comm_dst' else key[0]}, tag {key[2]})"
            )
        for a, b in zip(s, r, strict=True):
            out[b] = a
    return out


__all__ = [
    "COLL",
    "COMPUTE",
    "PASS",
    "RECV",
    "SEND",
    "CollKind",
    "Device",
    "Program",
    "RankProgram",
    "compile_program",
]
