"""Execution semantics and trace errors on small hand-made graphs."""

from __future__ import annotations

import pytest

from distscope.errors import DistscopeError
from distscope.sim.api import run_traces, simulate_traces
from distscope.sim.astra_config import GIB, CollAlgo, DimTopology, NetworkConfig, NetworkDim, SystemConfig
from distscope.sim.network import AstraNetwork, NetworkMode
from distscope.sim.result import write_timeline
from distscope.trace.graph import CollKind, Node, NodeKind, RankGraph
from distscope.trace.traceset import TraceSet

BW = 10 * GIB
LAT = 1e-6


def _model(n: int, mode: NetworkMode = NetworkMode.UNAWARE) -> AstraNetwork:
    net = NetworkConfig(
        dims=(NetworkDim(topology=DimTopology.FULLY_CONNECTED, npus_count=n, bandwidth_Bps=BW, latency_s=LAT),)
    )
    return AstraNetwork(net, SystemConfig(all_reduce_impl=(CollAlgo.RING,)), mode)


def comp(i: int, dur: float, deps: tuple[int, ...] = ()) -> Node:
    return Node(id=i, name=f"c{i}", kind=NodeKind.COMP, duration_s=dur, data_deps=deps)


def ar(i: int, size: int, deps: tuple[int, ...] = (), pg: str = "") -> Node:
    return Node(
        id=i,
        name=f"ar{i}",
        kind=NodeKind.COMM_COLL,
        comm_kind=CollKind.ALL_REDUCE,
        comm_size_bytes=size,
        data_deps=deps,
        pg_name=pg,
    )


def ts(*graphs: tuple[Node, ...], groups: dict[str, tuple[int, ...]] | None = None) -> TraceSet:
    return TraceSet(graphs={r: RankGraph(rank=r, nodes=g) for r, g in enumerate(graphs)}, process_groups=groups or {})


def test_compute_overlaps_comm_and_collective_waits_for_last_member() -> None:
    size = 1 << 24
    t_ar = 2 * (size / 2) / BW + 2 * LAT  # ring AR over 2: 2 steps of size/2
    r0 = (comp(0, 1e-3), ar(1, size, (0,)), comp(2, 5e-3, (0,)))
    r1 = (comp(0, 2e-3), ar(1, size, (0,)), comp(2, 1e-3, (0,)))
    res = simulate_traces(ts(r0, r1), _model(2))
    # AR starts when rank 1 arrives at 2 ms; rank 0's 5 ms compute overlaps it fully.
    assert res.ranks[0].finish_s == pytest.approx(6e-3)
    assert res.ranks[1].finish_s == pytest.approx(max(2e-3 + t_ar, 3e-3))
    assert res.ranks[0].exposed_comm_s == pytest.approx(0.0, abs=1e-12)
    assert res.ranks[1].exposed_comm_s == pytest.approx(max(0.0, 2e-3 + t_ar - 3e-3) + 0.0, abs=1e-9)
    assert res.ranks[0].compute_s == pytest.approx(6e-3)


def test_p2p_eager_send_and_late_recv() -> None:
    size = 1 << 20
    r0 = (
        comp(0, 1e-3),
        Node(
            id=1,
            name="s",
            kind=NodeKind.COMM_SEND,
            comm_dst=1,
            comm_tag=7,
            tensor_size_bytes=size,
            data_deps=(0,),
        ),
    )
    r1 = (
        comp(0, 3e-3),
        Node(
            id=1,
            name="r",
            kind=NodeKind.COMM_RECV,
            comm_src=0,
            comm_tag=7,
            tensor_size_bytes=size,
            data_deps=(0,),
        ),
        comp(2, 1e-3, (1,)),
    )
    res = simulate_traces(ts(r0, r1), _model(2))
    assert res.ranks[0].finish_s == pytest.approx(1e-3 + LAT + size / BW)
    assert res.ranks[1].finish_s == pytest.approx(4e-3)


def test_shared_mode_slows_concurrent_transfers() -> None:
    size = 1 << 26
    g = (ar(0, size, pg="a"), ar(1, size, pg="b"))
    traces = ts(g, g, groups={"a": (0, 1), "b": (0, 1)})
    alone = simulate_traces(traces, _model(2), mode=NetworkMode.UNAWARE).step_time_s
    shared = simulate_traces(traces, _model(2, NetworkMode.SHARED), mode=NetworkMode.SHARED).step_time_s
    assert shared > 1.5 * alone * 0.99


def test_timeline_has_process_per_rank(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import json

    r = (comp(0, 1e-3), ar(1, 1 << 20, (0,)))
    outcome = run_traces(ts(r, r), _model(2), symmetric=False)
    path = tmp_path / "tl.json"
    write_timeline(outcome, path)
    ev = json.loads(path.read_text())["traceEvents"]
    assert {e["pid"] for e in ev} == {0, 1}
    assert {e["tid"] for e in ev if e["ph"] == "X"} == {0, 1}


def test_cycle_is_reported() -> None:
    g = (comp(0, 1e-3, (1,)), comp(1, 1e-3, (0,)))
    with pytest.raises(DistscopeError, match=r"rank 0, node \d .*dependency cycle"):
        simulate_traces(ts(g), _model(1))


def test_unmatched_collective_is_reported() -> None:
    with pytest.raises(DistscopeError, match=r"rank 0, node 1 .*collective #2 .*no match on rank 1"):
        simulate_traces(ts((ar(0, 8), ar(1, 8, (0,))), (ar(0, 8),)), _model(2))


def test_mismatched_collective_size_is_reported() -> None:
    with pytest.raises(DistscopeError, match=r"rank 1, node 0 .*field comm_size=16"):
        simulate_traces(ts((ar(0, 8),), (ar(0, 16),)), _model(2))


def test_unmatched_send_is_reported() -> None:
    g0 = (Node(id=0, name="s", kind=NodeKind.COMM_SEND, comm_dst=1, tensor_size_bytes=4),)
    with pytest.raises(DistscopeError, match=r"rank 0, node 0 .*send has no matching receive .*comm_dst=1"):
        simulate_traces(ts(g0, (comp(0, 1e-3),)), _model(2))


def test_deadlock_is_reported_not_hung() -> None:
    # Each rank receives before it sends: a classic p2p deadlock.
    def g(peer: int) -> tuple[Node, ...]:
        return (
            Node(id=0, name="r", kind=NodeKind.COMM_RECV, comm_src=peer, tensor_size_bytes=4),
            Node(id=1, name="s", kind=NodeKind.COMM_SEND, comm_dst=peer, tensor_size_bytes=4, data_deps=(0,)),
        )

    with pytest.raises(DistscopeError, match=r"rank 0, node 0 .*comm_src.*never ran"):
        simulate_traces(ts(g(1), g(0)), _model(2), symmetric=False)


def test_collective_order_deadlock_is_reported() -> None:
    g0 = (ar(0, 8, pg="a"), ar(1, 8, (0,), pg="b"))
    g1 = (ar(0, 8, pg="b"), ar(1, 8, (0,), pg="a"))
    with pytest.raises(DistscopeError, match=r"never started"):
        simulate_traces(ts(g0, g1, groups={"a": (0, 1), "b": (0, 1)}), _model(2), symmetric=False)


def test_dangling_dependency_is_reported() -> None:
    with pytest.raises(DistscopeError, match=r"rank 0, node 0 .*names node 5"):
        RankGraph(rank=0, nodes=(comp(0, 1.0, (5,)),))


def test_unsupported_collective_is_reported() -> None:
    b = Node(id=0, name="bc", kind=NodeKind.COMM_COLL, comm_kind=CollKind.BROADCAST, comm_size_bytes=8)
    with pytest.raises(DistscopeError, match=r"rank 0, node 0 .*comm_type.*BROADCAST"):
        simulate_traces(ts((b,), (b,)), _model(2))


def test_single_comm_stream_serialises_groups() -> None:
    size = 1 << 26
    g = (ar(0, size, pg="a"), ar(1, size, pg="b"))
    traces = ts(g, g, groups={"a": (0, 1), "b": (0, 1)})
    per_group = simulate_traces(traces, _model(2)).step_time_s
    single = simulate_traces(traces, _model(2), single_comm_stream=True).step_time_s
    assert single == pytest.approx(2 * per_group)
