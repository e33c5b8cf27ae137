"""Small synthetic training-step traces (TP x PP x DP, GPipe-style) built in memory for tests."""

from __future__ import annotations

from distscope.trace.graph import CollKind, Node, NodeKind, RankGraph
from distscope.trace.traceset import TraceSet


def pipeline_traces(
    *, tp: int, pp: int, dp: int, micro: int, fwd_s: list[float], tp_bytes: int, pp_bytes: int, dp_bytes: int
) -> TraceSet:
    """Rank = t + tp*(d + dp*s): TP innermost, then DP, then pipeline stage s."""
    n = tp * pp * dp
    groups: dict[str, tuple[int, ...]] = {}

    def rank_of(t: int, d: int, s: int) -> int:
        return t + tp * (d + dp * s)

    graphs = {}
    for s in range(pp):
        for d in range(dp):
            for t in range(tp):
                r = rank_of(t, d, s)
                tp_name = f"tp_{d}_{s}"
                dp_name = f"dp_{t}_{s}"
                groups[tp_name] = tuple(rank_of(x, d, s) for x in range(tp))
                groups[dp_name] = tuple(rank_of(t, x, s) for x in range(dp))
                nodes: list[Node] = []

                def add(prev: int | None, nodes: list[Node] = nodes, **kw: object) -> int:
                    nid = len(nodes)
                    deps = () if prev is None else (prev,)
                    nodes.append(Node(id=nid, data_deps=deps, **kw))  # type: ignore[arg-type]
                    return nid

                last: int | None = None
                for phase, sign in (("fwd", 1), ("bwd", -1)):
                    for m in range(micro):
                        tag = m if sign > 0 else 1000 + m
                        prev_stage = s - sign
                        if 0 <= prev_stage < pp:
                            last = add(
                                last,
                                name=f"recv_{phase}{m}",
                                kind=NodeKind.COMM_RECV,
                                comm_src=rank_of(t, d, prev_stage),
                                comm_tag=tag,
                                tensor_size_bytes=pp_bytes,
                            )
                        dur = fwd_s[s] * (1 if sign > 0 else 2)
                        last = add(last, name=f"{phase}{m}", kind=NodeKind.COMP, duration_s=dur, num_ops=1000)
                        if tp > 1:
                            last = add(
                                last,
                                name=f"tp_ar_{phase}{m}",
                                kind=NodeKind.COMM_COLL,
                                comm_kind=CollKind.ALL_REDUCE,
                                comm_size_bytes=tp_bytes,
                                pg_name=tp_name,
                            )
                        next_stage = s + sign
                        if 0 <= next_stage < pp:
                            add(
                                last,
                                name=f"send_{phase}{m}",
                                kind=NodeKind.COMM_SEND,
                                comm_dst=rank_of(t, d, next_stage),
                                comm_tag=tag,
                                tensor_size_bytes=pp_bytes,
                            )
                if dp > 1:
                    add(
                        last,
                        name="dp_ar",
                        kind=NodeKind.COMM_COLL,
                        comm_kind=CollKind.ALL_REDUCE,
                        comm_size_bytes=dp_bytes,
                        pg_name=dp_name,
                    )
                graphs[r] = RankGraph(rank=r, nodes=tuple(nodes))
    assert len(graphs) == n
    return TraceSet(graphs=graphs, process_groups=groups)
