"""Do the verbs agree on one scenario? The closed-form estimate against the simulation of the plan's
generated trace (symmetric, congestion-unaware), with the estimator's overlap-interference term ρ at 0:
the simulator does not model compute slowed by communication hidden beside it (sim/README.md).

Used by tests/sim/test_plan_space_consistency.py (hypothesis over validate/plan_space.py) and by
benchmarks/consistency.py (1,000 seeded draws).
"""

from __future__ import annotations

import dataclasses

from distscope.model import efficiency as eff
from distscope.model.estimate import estimate
from distscope.scenario import Scenario
from distscope.sim.api import simulate_traces
from distscope.sim.cluster_network import ClusterNetwork
from distscope.trace.builder import build_traces
from distscope.trace.from_plan import STEADY_RUNS, steady_step_s, step_spec
from distscope.trace.volume import rank_volume
from distscope.validate.calibration import calibrated


@dataclasses.dataclass(frozen=True, kw_only=True)
class Agreement:
    estimated_step_s: float
    simulated_step_s: float
    memory_bytes: float
    volume: tuple[dict[str, dict[str, int]], ...]  # per pipeline stage, the trace's bytes per (group, op)

    @property
    def rel_diff(self) -> float:
        """(simulated - estimated) / estimated."""
        return (self.simulated_step_s - self.estimated_step_s) / self.estimated_step_s


def agreement(sc: Scenario) -> Agreement:
    """Both verbs on `sc`. A schedule without a flush (PipeDream-2BW) is compared in steady state, as
    the estimator states it and the planner's re-ranking simulates it (search/rerank.py): the
    simulated step is the mean step between a two-step and a four-step trace (from_plan.steady_step_s;
    the pipeline fills once per run, not per step)."""
    net = ClusterNetwork(sc.cluster)
    with calibrated({**eff.CALIBRATION, "overlap_cost": 0.0}):
        est = estimate(sc.spec, sc.shape, sc.cluster, sc.plan, software=sc.software)
        specs = [step_spec(sc.spec, sc.shape, sc.cluster, sc.plan, steps=k, software=sc.software)
                 for k in ((1,) if sc.plan.traits.flush else (1, *STEADY_RUNS))]
    traces = build_traces(specs[0], symmetric=True)
    if len(specs) == 1:
        sim_s = simulate_traces(traces, net).step_time_s
    else:
        short, long = (simulate_traces(build_traces(s, symmetric=True), net).step_time_s for s in specs[1:])
        sim_s = steady_step_s(short, long)
    step = specs[0]
    volume = tuple(rank_volume(traces, step.rank(0, 0, 0, s)) for s in range(step.pp))
    return Agreement(estimated_step_s=est.step_time_s, simulated_step_s=sim_s,
                     memory_bytes=est.memory.total_bytes, volume=volume)
