"""Re-rank the planner's best candidates with the discrete-event simulator.

The estimator prices each plan in closed form; the simulator replays the generated step (one trace per
equivalence class of ranks) on the same cluster. In `shared` network mode, concurrent transfers on a
level share its bandwidth, which the closed form does not model, so the simulator can reorder plans
whose estimates are within a few percent. Simulated time is the ranking key; the estimate is kept
alongside. A schedule without a flush (PipeDream-2BW) is simulated in steady state: three steps
strung together less two (the fill and drain of a run are not a step's).
"""

from __future__ import annotations

import dataclasses

from distscope.report.progress import Progress
from distscope.search.planner import Candidate
from distscope.sim.api import simulate_traces
from distscope.sim.cluster_network import ClusterNetwork
from distscope.sim.network import NetworkMode
from distscope.software.presets import SoftwareProfile
from distscope.system.topology import Cluster
from distscope.trace.builder import build_traces
from distscope.trace.from_plan import step_spec
from distscope.workload.spec import ModelSpec
from distscope.workload.training import TrainingShape


@dataclasses.dataclass(frozen=True, slots=True)
class Simulated:
    candidate: Candidate
    estimated_step_s: float
    simulated_step_s: float
    sim_wall_s: float


def simulate_candidates(spec: ModelSpec, shape: TrainingShape, cluster: Cluster, candidates: list[Candidate],
                        mode: NetworkMode = NetworkMode.SHARED, progress: Progress | None = None,
                        software: SoftwareProfile | None = None) -> list[Simulated]:
    """Simulate each candidate (symmetric traces) and return them ordered by simulated step time;
    `progress(simulated, candidates)` after each."""
    net = ClusterNetwork(cluster)
    out = []
    for c in candidates:
        steps = (1,) if c.plan.traits.flush else (2, 3)
        runs = [simulate_traces(build_traces(step_spec(spec, shape, cluster, c.plan, steps=k, software=software), symmetric=True), net,
                                mode=mode) for k in steps]
        sim_s = runs[0].step_time_s if len(runs) == 1 else runs[1].step_time_s - runs[0].step_time_s
        out.append(Simulated(candidate=c, estimated_step_s=c.step_time_s, simulated_step_s=sim_s,
                             sim_wall_s=sum(r.wall_s for r in runs)))
        if progress is not None:
            progress(len(out), len(candidates))
    return sorted(out, key=lambda s: s.simulated_step_s)
