"""What a report shows of one simulated step: a pipeline timeline and bytes per parallel group.

The plan's step is built as symmetric Chakra-style traces (trace/builder.py) and simulated (sim/) in
congestion-unaware mode; the result is plain JSON data (so `distscope report` can redraw it from a
saved `--json`): timeline rows for up to MAX_RANKS simulated ranks (each with its category: forward,
backward, optimizer, or the parallel group of a transfer) and the bytes each representative rank moves
per step in each parallel group (tp, cp, ep, dp, pp).
"""

from __future__ import annotations

from typing import Any

from distscope.comm.collective import Collective
from distscope.plan import Plan
from distscope.sim.engine import SimOutcome
from distscope.sim.program import COLL, COMPUTE, RECV
from distscope.software.presets import SoftwareProfile
from distscope.system.topology import Cluster
from distscope.trace.graph import Node, NodeKind
from distscope.trace.traceset import TraceSet
from distscope.trace.volume import rank_volume, role_of
from distscope.workload.spec import ModelSpec
from distscope.workload.training import TrainingShape

MAX_RANKS = 16  # simulated ranks drawn (one per pipeline stage class in symmetric traces)
MAX_ROWS = 20000  # timeline bars kept (the largest first); a step of a deep pipeline has many more
MAX_GPUS = 65536  # as plan re-ranking: the simulator's cost grows with the data-parallel group


_GROUPS = {"tp": "tp", "cp": "cp", "ep": "ep", "epx": "ep", "epl": "ep", "etp": "ep", "edp": "dp", "edpz": "dp",
           "dp": "dp", "dpz": "dp", "emb": "pp", "mirror": "pp", "pp": "pp"}  # trace/builder.py Group roles


def comm_bytes_per_group(traces: TraceSet, max_ranks: int = MAX_RANKS) -> dict[str, dict[str, float]]:
    """Per traced rank (the first max_ranks: one per pipeline stage in a symmetric set), bytes per step
    in each parallel group (tp, cp, ep, dp, pp), as trace/volume.py counts them; point-to-point (pp)
    the bytes sent."""
    out: dict[str, dict[str, float]] = {}
    for rank in sorted(traces.graphs)[:max_ranks]:
        acc: dict[str, float] = {}
        for role, ops in rank_volume(traces, rank).items():
            key = _GROUPS.get(role, role)
            acc[key] = acc.get(key, 0.0) + sum(b for op, b in ops.items() if op != Collective.RECV.value)
        out[f"rank {rank}"] = acc
    return out


def step_view(spec: ModelSpec, shape: TrainingShape, cluster: Cluster, plan: Plan,
              software: SoftwareProfile | None = None) -> dict[str, Any]:
    """{'timeline': [...], 'comm_bytes_per_group': {...}, 'simulated_step_s': s}, or {'skipped': why}."""
    if cluster.num_gpus > MAX_GPUS:
        return {"skipped": f"{cluster.num_gpus:,} GPUs > {MAX_GPUS:,}: no simulated timeline"}
    from distscope.sim.api import run_traces
    from distscope.sim.cluster_network import ClusterNetwork
    from distscope.sim.result import summarize
    from distscope.trace.builder import build_traces
    from distscope.trace.from_plan import step_spec

    traces = build_traces(step_spec(spec, shape, cluster, plan, software=software), symmetric=True)
    outcome = run_traces(traces, ClusterNetwork(cluster))
    return {"timeline": timeline_rows(outcome), "comm_bytes_per_group": comm_bytes_per_group(traces),
            "simulated_step_s": summarize(outcome).step_time_s}


def _category(node: Node, kind: int) -> str:
    if kind == COMPUTE:
        name = node.name
        if "_fwd_" in name or name.endswith("_fwd"):
            return "forward"
        if "_bwd_" in name or name.endswith("_bwd"):
            return "backward"
        return "optimizer" if name.startswith("optimizer") else "compute"
    return "pp" if node.kind in (NodeKind.COMM_SEND, NodeKind.COMM_RECV) else _GROUPS.get(role_of(node.pg_name), node.pg_name or "world")


def timeline_rows(outcome: SimOutcome) -> list[dict[str, Any]]:
    """Timeline bars of the first MAX_RANKS simulated ranks (the MAX_ROWS longest), as plain data.

    Waiting is not drawn as communication: a receive starts when its send left (not when it was
    posted), a collective `duration` before it ends (its start is this rank's arrival; with the shared
    network a congested collective shows its uncontended length)."""
    rows: list[dict[str, Any]] = []
    for prog, times in list(zip(outcome.program.ranks, outcome.times, strict=True))[:MAX_RANKS]:
        for i, kind in enumerate(prog.kind):
            s, e = times.start[i], times.end[i]
            peer = prog.peer[i]
            if kind == RECV and peer is not None:
                s = max(s, outcome.times[peer[0]].start[peer[1]])
            elif kind == COLL:
                s = max(s, e - prog.dur_s[i])
            if e > s:
                rows.append({"rank": prog.rank, "track": "compute" if kind == COMPUTE else "comm",
                             "category": _category(prog.nodes[i], kind), "name": prog.names[i],
                             "start_s": s, "end_s": e})
    rows = _merge_touching(rows)
    rows.sort(key=lambda r: r["end_s"] - r["start_s"], reverse=True)
    return sorted(rows[:MAX_ROWS], key=lambda r: (r["rank"], r["start_s"]))


def _merge_touching(rows: list[dict[str, Any]], gap_frac: float = 1e-6) -> list[dict[str, Any]]:
    """One bar for back-to-back ops of one category on one lane (e.g. a micro-batch's layers): a 0.1 ms
    layer in a 3 s step is a tenth of a pixel, and would not show on its own."""
    step = max((r["end_s"] for r in rows), default=0.0)
    out: list[dict[str, Any]] = []
    last: dict[tuple[int, str], dict[str, Any]] = {}
    for r in sorted(rows, key=lambda r: (r["rank"], r["track"], r["start_s"])):
        key = (r["rank"], r["track"])
        prev = last.get(key)
        if prev is not None and prev["category"] == r["category"] and r["start_s"] - prev["end_s"] <= gap_frac * step:
            prev["end_s"] = max(prev["end_s"], r["end_s"])
            prev["ops"] += 1
            prev["name"] = f"{prev['first']} … {r['name']} ({prev['ops']} ops)"
            continue
        last[key] = {**r, "ops": 1, "first": r["name"]}
        out.append(last[key])
    for r in out:
        del r["ops"], r["first"]
    return out
