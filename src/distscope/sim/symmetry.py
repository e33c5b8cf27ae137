"""Rank symmetry: partition ranks into classes that provably run identical timelines.

Colour refinement (1-dimensional Weisfeiler-Leman) on the rank interaction graph:
1. initial colour = the rank's local signature: per node its kind, dependencies (as node indices),
   duration, collective kind/size/priced duration, peer slot and priced p2p duration;
2. repeat: new colour = (colour, colours of the members of each group the rank uses, colours of each
   p2p peer) until the number of colours stops growing.
Ranks of one stable colour have identical graphs, identically priced operations and partners of equal
colours, so by induction over event times their node start/finish times are equal: simulating one
representative per colour and matching its collectives/messages to the representatives of its partners'
colours gives the same per-rank times as simulating every rank.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from distscope.trace.graph import NodeKind
from distscope.trace.traceset import TraceSet


def _recolour(sigs: Sequence[object]) -> list[int]:
    ids: dict[object, int] = {}
    return [ids.setdefault(s, len(ids)) for s in sigs]


def refine_classes(
    traces: TraceSet,
    coll_lists: list[dict[tuple[str, tuple[int, ...]], list[int]]],
    coll_dur: dict[tuple[int, int], float],
    p2p_cost: Callable[[int, int], float],
) -> list[int]:
    """Class id per rank (equal ids = equivalent ranks)."""
    n = traces.num_ranks
    local: list[object] = []
    peers: list[list[int]] = []
    groups: list[list[tuple[int, ...]]] = []
    for rank in range(n):
        graph = traces.graphs[rank]
        index = {node.id: i for i, node in enumerate(graph.nodes)}
        group_slot: dict[tuple[str, tuple[int, ...]], int] = {}
        slot_of_node: dict[int, int] = {}
        for slot, (key, idxs) in enumerate(coll_lists[rank].items()):
            group_slot[key] = slot
            for i in idxs:
                slot_of_node[i] = slot
        peer_slot: dict[int, int] = {}
        sig = []
        for i, node in enumerate(graph.nodes):
            item: tuple[object, ...] = (
                node.kind,
                tuple(index[d] for d in node.data_deps),
                tuple(index[d] for d in node.ctrl_deps),
                node.duration_s,
                node.num_ops,
                node.tensor_size_bytes,
                node.lane,
            )
            if node.kind is NodeKind.COMM_COLL:
                item += (node.comm_kind, node.comm_size_bytes, slot_of_node[i], coll_dur[rank, i])
            elif node.kind in (NodeKind.COMM_SEND, NodeKind.COMM_RECV):
                peer = node.comm_dst if node.kind is NodeKind.COMM_SEND else node.comm_src
                assert peer is not None
                item += (peer_slot.setdefault(peer, len(peer_slot)), node.comm_tag, p2p_cost(rank, i))
            sig.append(item)
        local.append(tuple(sig))
        peers.append(list(peer_slot))
        groups.append([members for (_, members) in group_slot])
    colour = _recolour(local)
    count = len(set(colour))
    distinct = {g for gs in groups for g in gs}
    while True:
        # One sorted colour multiset per distinct group, shared by its members.
        multiset = {g: tuple(sorted(colour[m] for m in g)) for g in distinct}
        sigs = [
            (colour[r], tuple(multiset[g] for g in groups[r]), tuple(colour[p] for p in peers[r])) for r in range(n)
        ]
        new = _recolour(sigs)
        new_count = len(set(new))
        colour = new
        if new_count == count:
            return colour
        count = new_count
