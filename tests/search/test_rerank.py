"""The planner's top candidates re-ranked by the discrete-event simulator."""

import pytest

from distscope.dtypes import Precision
from distscope.plan import AttentionImpl, Dim
from distscope.search.planner import search
from distscope.search.rerank import simulate_candidates
from distscope.search.space import SearchSpace
from distscope.sim.network import NetworkMode
from distscope.system import get_cluster
from distscope.workload import TrainingShape, get_model


def test_simulated_rerank_agrees_with_estimate_when_unaware_and_orders_by_simulation() -> None:
    spec, shape, c = get_model("llama3-8b"), TrainingShape(seq_len=4096, global_batch=64), get_cluster("dgx-h100", 16)
    space = SearchSpace(precision=Precision.BF16, attention=AttentionImpl.FLASH,
                        overlap=frozenset({Dim.DP, Dim.TP, Dim.PP}))
    res = search(spec, shape, c, space, top_k=4)
    assert len(res.top) >= 2
    unaware = simulate_candidates(spec, shape, c, list(res.top[:3]), mode=NetworkMode.UNAWARE)
    for s in unaware:  # same closed-form costs replayed as a graph: within the simulator's 3% consistency
        assert s.simulated_step_s == pytest.approx(s.estimated_step_s, rel=0.03)
    shared = simulate_candidates(spec, shape, c, list(res.top[:3]), mode=NetworkMode.SHARED)
    times = [s.simulated_step_s for s in shared]
    assert times == sorted(times)
    # sharing a level's bandwidth can only slow transfers down
    by_plan = {id(s.candidate): s.simulated_step_s for s in unaware}
    assert all(s.simulated_step_s >= by_plan[id(s.candidate)] * (1 - 1e-9) for s in shared)
