"""Trace generation structure: pipeline schedules, collectives, symmetric mode."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distscope.sim.api import simulate_traces
from distscope.sim.astra_config import GIB, CollAlgo, DimTopology, NetworkConfig, NetworkDim, SystemConfig
from distscope.sim.network import AstraNetwork, NetworkMode
from distscope.trace.builder import CommOp, Group, LayerCost, StepSpec, build_traces
from distscope.trace.chakra_io import read_symmetric, read_traces, write_symmetric, write_traces
from distscope.trace.graph import CollKind, NodeKind
from distscope.trace.schedule import Schedule, stage_order

RING = (CollAlgo.RING,) * 2
SYSTEM = SystemConfig(all_reduce_impl=RING, all_gather_impl=RING, reduce_scatter_impl=RING, all_to_all_impl=RING)


def _net(bw_GBps: float = 1e6, lat_s: float = 0.0, inner: int = 8, outer: int = 256) -> AstraNetwork:
    dims = (
        NetworkDim(topology=DimTopology.SWITCH, npus_count=inner, bandwidth_Bps=bw_GBps * GIB, latency_s=lat_s),
        NetworkDim(topology=DimTopology.SWITCH, npus_count=outer, bandwidth_Bps=bw_GBps * GIB / 8, latency_s=lat_s),
    )
    return AstraNetwork(NetworkConfig(dims=dims), SYSTEM, NetworkMode.UNAWARE)


def _layer(f: float, b: float, tp_bytes: int = 0, grad_bytes: int = 0) -> LayerCost:
    tp = (CommOp(group=Group.TP, kind=CollKind.ALL_REDUCE, size_bytes=tp_bytes),) if tp_bytes else ()
    grad = (CommOp(group=Group.DP, kind=CollKind.ALL_REDUCE, size_bytes=grad_bytes),) if grad_bytes else ()
    return LayerCost(name="layer", fwd_s=f, bwd_s=b, fwd_comm=tp, bwd_comm=tp, grad_comm=grad)


def _spec(pp: int, micro: int, schedule: Schedule, vp: int = 1, **kw: object) -> StepSpec:
    layers = tuple((_layer(1e-3, 2e-3), _layer(1e-3, 2e-3)) for _ in range(pp * vp))
    return StepSpec(pp=pp, vp=vp, micro_batches=micro, schedule=schedule, stages=layers, pp_bytes=1, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("pp,micro", [(1, 3), (2, 4), (4, 8), (8, 8)])
def test_1f1b_matches_closed_form(pp: int, micro: int) -> None:
    # With free communication, 1F1B takes (M + P - 1) (f + b) (Narayanan et al. 2021, eq. 1 bubble).
    res = simulate_traces(build_traces(_spec(pp, micro, Schedule.ONE_F_ONE_B)), _net())
    assert res.step_time_s == pytest.approx((micro + pp - 1) * 6e-3, rel=1e-6)


@pytest.mark.parametrize("pp,vp,micro", [(2, 2, 4), (4, 2, 8), (4, 4, 8)])
def test_interleaved_matches_closed_form(pp: int, vp: int, micro: int) -> None:
    # Per chunk f + b = 6 ms / ... ; bubble shrinks by vp: (M v + P - 1) (f_c + b_c).
    res = simulate_traces(build_traces(_spec(pp, micro, Schedule.INTERLEAVED, vp=vp)), _net())
    assert res.step_time_s == pytest.approx((micro * vp + pp - 1) * 6e-3, rel=1e-6)


def test_schedule_orders_are_complete() -> None:
    for sched, vp in ((Schedule.GPIPE, 1), (Schedule.ONE_F_ONE_B, 1), (Schedule.INTERLEAVED, 3)):
        for s in range(4):
            order = stage_order(sched, stage=s, stages=4, micro_batches=8, chunks=vp)
            assert sorted((x.forward, x.micro, x.chunk) for x in order) == sorted(
                (f, m, c) for f in (True, False) for m in range(8) for c in range(vp)
            )


def test_dp_overlap_hides_gradient_sync() -> None:
    layers = tuple((_layer(1e-3, 2e-3, grad_bytes=1 << 26),) * 4 for _ in range(1))
    net = _net(bw_GBps=100.0)
    kw = dict(dp=8, micro_batches=2, stages=layers, optimizer_s=0.0)
    on = simulate_traces(build_traces(StepSpec(dp_overlap=True, **kw)), net)  # type: ignore[arg-type]
    off = simulate_traces(build_traces(StepSpec(dp_overlap=False, **kw)), net)  # type: ignore[arg-type]
    assert on.step_time_s < off.step_time_s
    assert on.ranks[0].exposed_comm_s < off.ranks[0].exposed_comm_s


def test_groups_and_nodes() -> None:
    spec = StepSpec(
        tp=2,
        dp=4,
        ep=2,
        pp=2,
        micro_batches=2,
        stages=((_layer(1, 1, tp_bytes=8, grad_bytes=8),),) * 2,
        pp_bytes=16,
    )
    traces = build_traces(spec)
    assert traces.num_ranks == 16
    g = traces.graphs[spec.rank(1, 0, 3, 1)]
    kinds = {n.kind for n in g.nodes}
    assert kinds == {NodeKind.COMP, NodeKind.COMM_COLL, NodeKind.COMM_RECV, NodeKind.COMM_SEND}
    tp_pg = next(n.pg_name for n in g.nodes if n.pg_name.startswith("tp"))
    assert traces.process_groups[tp_pg] == (spec.rank(0, 0, 3, 1), spec.rank(1, 0, 3, 1))
    assert spec.group(Group.EP, spec.rank(0, 0, 3, 0))[1] == (spec.rank(0, 0, 2, 0), spec.rank(0, 0, 3, 0))


def test_write_read_full_and_symmetric(tmp_path) -> None:  # type: ignore[no-untyped-def]
    spec = StepSpec(
        tp=2,
        dp=2,
        pp=2,
        micro_batches=2,
        stages=((_layer(1e-3, 2e-3, 1 << 20, 1 << 22),),) * 2,
        pp_bytes=1 << 20,
    )
    net = _net(bw_GBps=50.0, lat_s=1e-6)
    full = build_traces(spec)
    write_traces(tmp_path / "full" / "step", full)
    sym = build_traces(spec, symmetric=True)
    write_symmetric(tmp_path / "sym", sym)
    assert len(list((tmp_path / "sym").glob("*.et"))) == 2
    a = simulate_traces(read_traces(tmp_path / "full" / "step"), net, symmetric=False)
    b = simulate_traces(read_symmetric(tmp_path / "sym"), net)
    assert b.simulated_ranks == 2
    assert a.step_time_s == pytest.approx(b.step_time_s, rel=1e-12)
    assert [r.finish_s for r in a.ranks] == pytest.approx([r.finish_s for r in b.ranks], rel=1e-12)


@settings(max_examples=20, deadline=None)
@given(
    tp=st.sampled_from([1, 2, 4]),
    dp=st.sampled_from([1, 2, 4]),
    pp=st.integers(1, 4),
    vp=st.integers(1, 2),
    mult=st.integers(1, 2),
    f_ms=st.lists(st.floats(0.05, 2.0), min_size=8, max_size=8),
    overlap=st.booleans(),
    mode=st.sampled_from(list(NetworkMode)),
)
def test_symmetric_generation_equals_full(tp, dp, pp, vp, mult, f_ms, overlap, mode) -> None:  # type: ignore[no-untyped-def]
    sched = Schedule.INTERLEAVED if vp > 1 else Schedule.ONE_F_ONE_B
    stages = tuple(
        (_layer(f_ms[v] * 1e-3, 2 * f_ms[v] * 1e-3, tp_bytes=1 << 20, grad_bytes=1 << 24),) for v in range(pp * vp)
    )
    spec = StepSpec(
        tp=tp,
        dp=dp,
        pp=pp,
        vp=vp,
        micro_batches=pp * mult,
        schedule=sched,
        stages=stages,
        pp_bytes=1 << 22,
        dp_overlap=overlap,
        optimizer_s=1e-4,
    )
    net = AstraNetwork(_net(bw_GBps=50.0, lat_s=2e-6).network, SYSTEM, mode)
    full = simulate_traces(build_traces(spec), net, mode=mode, symmetric=False)
    sym = simulate_traces(build_traces(spec, symmetric=True), net, mode=mode)
    assert sym.simulated_ranks == pp
    assert sym.step_time_s == pytest.approx(full.step_time_s, rel=1e-9)
