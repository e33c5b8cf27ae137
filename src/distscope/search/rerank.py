"""Re-rank the planner's best candidates with the discrete-event simulator.

The estimator prices each plan in closed form; the simulator replays the generated step (one trace per
equivalence class of ranks) on the same cluster. In `shared` network mode, concurrent transfers on a
level share its bandwidth, which the closed form does not model, so the simulator can reorder plans
whose estimates are within a few percent. Simulated time is the ranking key; the estimate is kept
alongside. A schedule without a flush (PipeDream-2BW) is simulated in steady state: the mean step between runs of
two and four steps strung together (trace/from_plan.steady_step_s; the fill and drain of a run are not a
step's).

Progress: each simulation run (one per candidate, two for 2BW) is worth RUN_UNITS units, shared among
its phases by PHASE_SHARE; the trace build advances per pipeline stage and the simulation per batch of
events, so the bar moves inside a candidate, and `status(candidate index, phase)` says what runs.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
from collections.abc import Callable

from distscope.fabric.network import FabricChoice, FabricNetwork, TrafficVerdict
from distscope.report.progress import Progress
from distscope.search.planner import Candidate
from distscope.sim.api import simulate_traces
from distscope.sim.cluster_network import ClusterNetwork
from distscope.sim.network import NetworkMode, NetworkModel
from distscope.sim.result import SimResult
from distscope.software.presets import SoftwareProfile
from distscope.system.topology import Cluster
from distscope.trace.builder import build_traces, traced_ranks
from distscope.trace.from_plan import STEADY_RUNS, steady_step_s, step_spec
from distscope.workload.spec import ModelSpec
from distscope.workload.training import TrainingShape


class Phase(enum.Enum):
    """What a re-ranking run is doing (its value is the progress bar's wording)."""

    BUILD = "building traces"
    MATCH = "matching collectives"
    SIMULATE = "simulating"


Status = Callable[[int, Phase], None]  # (index of the candidate in the list given, phase)

RUN_UNITS = 100  # the bar counts runs in hundredths
# Share of one run's CPU time per phase: DeepSeek-V3 on 256 H100s (1F1B, pp=32, 128 micro-batches),
# measured on the 2-core CI machine after the fluid-network fix: build 0.85 s, match 0.4 s, simulate +
# summarize 0.8 s. Only the bar's pace (and ETA) depends on it.
PHASE_SHARE = {Phase.BUILD: 0.4, Phase.MATCH: 0.2, Phase.SIMULATE: 0.4}


@dataclasses.dataclass(frozen=True, slots=True)
class Simulated:
    candidate: Candidate
    estimated_step_s: float
    simulated_step_s: float
    sim_wall_s: float
    fabric: tuple[TrafficVerdict, ...] = ()  # with a fabric: the traffic shapes below full NIC bandwidth


def simulate_candidates(spec: ModelSpec, shape: TrainingShape, cluster: Cluster, candidates: list[Candidate],
                        mode: NetworkMode = NetworkMode.SHARED, progress: Progress | None = None,
                        software: SoftwareProfile | None = None, status: Status | None = None,
                        fabric: FabricChoice | None = None) -> list[Simulated]:
    """Simulate each candidate (symmetric traces) and return them ordered by simulated step time;
    `progress(done, total)` in work units (module docstring) as each phase advances; `status(i, phase)`
    as candidate i enters a phase. With `fabric`, the scale-out is priced on it (fabric/network.py)."""
    runs_of = [(1,) if c.plan.traits.flush else STEADY_RUNS for c in candidates]
    meter = _Meter(progress, RUN_UNITS * sum(len(r) for r in runs_of))
    out = []
    for i, c in enumerate(candidates):
        net: ClusterNetwork | FabricNetwork = ClusterNetwork(cluster) if fabric is None else FabricNetwork(cluster, fabric)
        results = []
        for k in runs_of[i]:
            say: Callable[[Phase], None] = (lambda _: None) if status is None else functools.partial(status, i)
            results.append(_run(spec, shape, cluster, c, k, net, mode, software, meter, say))
        sim_s = (results[0].step_time_s if len(results) == 1
                 else steady_step_s(results[0].step_time_s, results[1].step_time_s))
        out.append(Simulated(candidate=c, estimated_step_s=c.step_time_s, simulated_step_s=sim_s,
                             sim_wall_s=sum(r.wall_s for r in results),
                             fabric=tuple(net.worst()) if isinstance(net, FabricNetwork) else ()))
    return sorted(out, key=lambda s: s.simulated_step_s)


class _Meter:
    """Progress in units: whole runs done plus the running one's share (module docstring)."""

    def __init__(self, progress: Progress | None, total: int) -> None:
        self.progress, self.total, self.done = progress, total, 0
        self.build_u, self.match_u = (round(RUN_UNITS * PHASE_SHARE[p]) for p in (Phase.BUILD, Phase.MATCH))
        self.sim_u = RUN_UNITS - self.build_u - self.match_u

    def at(self, units: float) -> None:
        if self.progress is not None:
            self.progress(min(self.done + round(units), self.total), self.total)

    def run_done(self) -> None:
        self.done += RUN_UNITS
        self.at(0)


def _run(spec: ModelSpec, shape: TrainingShape, cluster: Cluster, c: Candidate, steps: int, net: NetworkModel,
         mode: NetworkMode, software: SoftwareProfile | None, meter: _Meter, say: Callable[[Phase], None]) -> SimResult:
    """One simulation of `steps` consecutive steps of `c`'s plan, reporting its phases."""
    say(Phase.BUILD)
    step = step_spec(spec, shape, cluster, c.plan, steps=steps, software=software)
    stages, built = traced_ranks(step, True), 0

    def on_rank() -> None:
        nonlocal built
        built += 1
        meter.at(meter.build_u * built / stages)

    traces = build_traces(step, symmetric=True, on_rank=on_rank)
    say(Phase.MATCH)
    started = False

    def on_events(events: int, of: int) -> None:
        nonlocal started
        if not started:  # the first report comes once the program is compiled
            started = True
            say(Phase.SIMULATE)
        meter.at(meter.build_u + meter.match_u + meter.sim_u * events / max(of, 1))

    result = simulate_traces(traces, net, mode=mode, progress=on_events)
    meter.run_done()
    return result
