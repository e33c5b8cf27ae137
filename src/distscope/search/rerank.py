"""Re-rank the planner's best candidates with the discrete-event simulator.

The estimator prices each plan in closed form; the simulator replays the generated step (one trace per
equivalence class of ranks) on the same cluster. In `shared` network mode, concurrent transfers on a
level share its bandwidth, which the closed form does not model, so the simulator can reorder plans
whose estimates are within a few percent. Simulated time is the ranking key; the estimate is kept
alongside.
"""

from __future__ import annotations

import dataclasses

from distscope.report.progress import Progress
from distscope.search.planner import Candidate
from distscope.sim.api import simulate_traces
from distscope.sim.cluster_network import ClusterNetwork
from distscope.sim.network import NetworkMode
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
                        mode: NetworkMode = NetworkMode.SHARED,
                        progress: Progress | None = None) -> list[Simulated]:
    """Simulate each candidate (symmetric traces) and return them ordered by simulated step time;
    `progress(simulated, candidates)` after each."""
    net = ClusterNetwork(cluster)
    out = []
    for c in candidates:
        r = simulate_traces(build_traces(step_spec(spec, shape, cluster, c.plan), symmetric=True), net, mode=mode)
        out.append(Simulated(candidate=c, estimated_step_s=c.step_time_s, simulated_step_s=r.step_time_s,
                             sim_wall_s=r.wall_s))
        if progress is not None:
            progress(len(out), len(candidates))
    return sorted(out, key=lambda s: s.simulated_step_s)
