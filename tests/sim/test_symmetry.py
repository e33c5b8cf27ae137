"""Symmetric simulation (one representative per rank class) equals simulating every rank."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from synth import pipeline_traces

from distscope.sim.api import simulate_traces
from distscope.sim.astra_config import GIB, CollAlgo, DimTopology, NetworkConfig, NetworkDim, SystemConfig
from distscope.sim.network import AstraNetwork, NetworkMode


def _network(inner: int, outer: int, topo: DimTopology) -> tuple[NetworkConfig, SystemConfig]:
    dims = [NetworkDim(topology=DimTopology.RING, npus_count=inner, bandwidth_Bps=100 * GIB, latency_s=1e-6)]
    if outer > 1:
        dims.append(NetworkDim(topology=topo, npus_count=outer, bandwidth_Bps=25 * GIB, latency_s=5e-6))
    ring = (CollAlgo.RING,) * len(dims)
    system = SystemConfig(
        preferred_dataset_splits=2,
        endpoint_delay_s=1e-8,
        all_reduce_impl=ring,
        all_gather_impl=ring,
        reduce_scatter_impl=ring,
        all_to_all_impl=ring,
    )
    return NetworkConfig(dims=tuple(dims)), system


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    tp=st.sampled_from([1, 2, 4]),
    pp=st.integers(1, 3),
    dp=st.integers(1, 3),
    micro=st.integers(1, 3),
    stage_ms=st.lists(st.floats(0.1, 3.0), min_size=3, max_size=3),
    sizes=st.tuples(st.integers(1, 1 << 24), st.integers(1, 1 << 24), st.integers(1, 1 << 26)),
    topo=st.sampled_from(list(DimTopology)),
    mode=st.sampled_from(list(NetworkMode)),
)
def test_symmetric_equals_full(tp, pp, dp, micro, stage_ms, sizes, topo, mode) -> None:  # type: ignore[no-untyped-def]
    traces = pipeline_traces(
        tp=tp,
        pp=pp,
        dp=dp,
        micro=micro,
        fwd_s=[x * 1e-3 for x in stage_ms],
        tp_bytes=sizes[0],
        pp_bytes=sizes[1],
        dp_bytes=sizes[2],
    )
    net, system = _network(tp, pp * dp, topo)
    model = AstraNetwork(net, system, mode)
    full = simulate_traces(traces, model, mode=mode, symmetric=False)
    sym = simulate_traces(traces, model, mode=mode, symmetric=True)
    assert sym.simulated_ranks <= full.simulated_ranks
    assert abs(sym.step_time_s - full.step_time_s) <= 1e-12 * full.step_time_s
    for a, b in zip(sym.ranks, full.ranks, strict=True):
        assert abs(a.finish_s - b.finish_s) <= 1e-12 * full.step_time_s
        assert abs(a.exposed_comm_s - b.exposed_comm_s) <= 1e-9 * full.step_time_s


def test_symmetry_folds_identical_stages() -> None:
    traces = pipeline_traces(
        tp=4, pp=2, dp=2, micro=2, fwd_s=[1e-3, 1e-3], tp_bytes=1 << 20, pp_bytes=1 << 20, dp_bytes=1 << 24
    )
    net, system = _network(4, 4, DimTopology.SWITCH)
    result = simulate_traces(traces, AstraNetwork(net, system, NetworkMode.UNAWARE))
    # Stage 0 and stage 1 differ (first/last), TP and DP peers within a stage are equivalent.
    assert result.simulated_ranks == 2
    assert len(result.ranks) == 16
