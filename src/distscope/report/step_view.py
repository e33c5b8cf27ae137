"""What a report shows of one simulated step: a pipeline timeline and bytes per parallel group.

The plan's step is built as symmetric Chakra-style traces (trace/builder.py) and simulated (sim/) in
congestion-unaware mode; the result is plain JSON data (so `distscope report` can redraw it from a
saved `--json`): timeline rows for up to MAX_RANKS simulated ranks and the collective/p2p bytes each
process group moves per step on a representative rank.
"""

from __future__ import annotations

from typing import Any

from distscope.plan import Plan
from distscope.sim.engine import SimOutcome
from distscope.sim.program import COMPUTE
from distscope.system.topology import Cluster
from distscope.trace.traceset import TraceSet
from distscope.workload.spec import ModelSpec
from distscope.workload.training import TrainingShape

MAX_RANKS = 16  # simulated ranks drawn (one per pipeline stage class in symmetric traces)
MAX_ROWS = 20000  # timeline bars kept (the largest first); a step of a deep pipeline has many more
MAX_GPUS = 65536  # as plan re-ranking: the simulator's cost grows with the data-parallel group


def comm_bytes_per_group(traces: TraceSet) -> dict[str, float]:
    """Bytes each process group's collectives and sends move per step, on the lowest rank of the set."""
    rank = min(traces.graphs)
    out: dict[str, float] = {}
    for n in traces.graphs[rank].nodes:
        if n.kind.is_comm:
            key = n.pg_name or ("p2p" if n.comm_kind is None else "world")
            out[key] = out.get(key, 0.0) + float(n.comm_size_bytes or n.tensor_size_bytes)
    return out


def step_view(spec: ModelSpec, shape: TrainingShape, cluster: Cluster, plan: Plan) -> dict[str, Any]:
    """{'timeline': [...], 'comm_bytes_per_group': {...}, 'simulated_step_s': s}, or {'skipped': why}."""
    if cluster.num_gpus > MAX_GPUS:
        return {"skipped": f"{cluster.num_gpus:,} GPUs > {MAX_GPUS:,}: no simulated timeline"}
    from distscope.sim.api import run_traces
    from distscope.sim.cluster_network import ClusterNetwork
    from distscope.sim.result import summarize
    from distscope.trace.builder import build_traces
    from distscope.trace.from_plan import step_spec

    traces = build_traces(step_spec(spec, shape, cluster, plan), symmetric=True)
    outcome = run_traces(traces, ClusterNetwork(cluster))
    return {"timeline": timeline_rows(outcome), "comm_bytes_per_group": comm_bytes_per_group(traces),
            "simulated_step_s": summarize(outcome).step_time_s}


def timeline_rows(outcome: SimOutcome) -> list[dict[str, Any]]:
    """Timeline bars of the first MAX_RANKS simulated ranks (the MAX_ROWS longest), as plain data."""
    rows: list[dict[str, Any]] = []
    for prog, times in list(zip(outcome.program.ranks, outcome.times, strict=True))[:MAX_RANKS]:
        for i, kind in enumerate(prog.kind):
            s, e = times.start[i], times.end[i]
            if e > s:
                rows.append({"rank": prog.rank, "track": "compute" if kind == COMPUTE else "comm",
                             "name": prog.names[i], "start_s": s, "end_s": e})
    rows.sort(key=lambda r: r["end_s"] - r["start_s"], reverse=True)
    return sorted(rows[:MAX_ROWS], key=lambda r: (r["rank"], r["start_s"]))
