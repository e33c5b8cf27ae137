"""Bytes per step per (process-group role, op) that a trace's ranks issue: the one communication
volume every verb reports (`estimate --comm-volume`, the report's step view, `trace generate` then
`simulate`), read off the same per-rank graphs the simulator runs.

Counted as nccl-tests counts them: ALL_GATHER nodes carry the per-rank shard (Chakra comm_size, as
ASTRA-sim reads it) and are counted as the gathered output (shard x group size); REDUCE_SCATTER and the
other collectives their full buffer; point-to-point as SEND and RECV, the bytes the rank sends and
receives. Roles are those of trace/builder.py Group (tp, cp, ep, epx, epl, etp, dp, dpz, edp, edpz, emb,
mirror) plus pp for the pipeline's point-to-point traffic.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from rich.table import Table

from distscope.comm.collective import Collective
from distscope.plan import Plan
from distscope.software.presets import SoftwareProfile
from distscope.system.topology import Cluster
from distscope.trace.graph import CollKind, NodeKind
from distscope.trace.traceset import TraceSet
from distscope.workload.spec import ModelSpec
from distscope.workload.training import TrainingShape

PP = "pp"
_OPS = {CollKind.ALL_REDUCE: Collective.ALL_REDUCE, CollKind.ALL_GATHER: Collective.ALL_GATHER,
        CollKind.REDUCE_SCATTER: Collective.REDUCE_SCATTER, CollKind.ALL_TO_ALL: Collective.ALL_TO_ALL,
        CollKind.BROADCAST: Collective.BROADCAST, CollKind.REDUCE: Collective.REDUCE}


def role_of(pg_name: str) -> str:
    """The parallel role of a process-group name: distscope's own names start with it (`tp:s0:d0:c0`,
    `dp:s1:t0`); other tools' names stay whole."""
    return pg_name.split(":", 1)[0] if ":" in pg_name else (pg_name or "world")


def rank_volume(traces: TraceSet, rank: int) -> dict[str, dict[str, int]]:
    """{role: {op: bytes}} one rank issues in the traced step (module doc)."""
    acc: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for n in traces.graphs[rank].nodes:
        if n.kind is NodeKind.COMM_COLL:
            assert n.comm_kind is not None
            op = _OPS.get(n.comm_kind)
            if op is None:
                continue
            size = n.comm_size_bytes
            if n.comm_kind is CollKind.ALL_GATHER:
                size *= len(traces.members(n.pg_name, rank))
            acc[role_of(n.pg_name)][op.value] += size
        elif n.kind is NodeKind.COMM_SEND:
            acc[PP][Collective.SEND.value] += n.tensor_size_bytes or n.comm_size_bytes
        elif n.kind is NodeKind.COMM_RECV:
            acc[PP][Collective.RECV.value] += n.tensor_size_bytes or n.comm_size_bytes
    return {role: dict(sorted(ops.items())) for role, ops in sorted(acc.items())}


def plan_volume(spec: ModelSpec, shape: TrainingShape, cluster: Cluster, plan: Plan,
                software: SoftwareProfile | None = None) -> list[dict[str, dict[str, int]]]:
    """Per pipeline stage, rank_volume of the stage's representative rank in the plan's symmetric trace."""
    from distscope.trace.builder import build_traces
    from distscope.trace.from_plan import step_spec

    step = step_spec(spec, shape, cluster, plan, software=software)
    traces = build_traces(step, symmetric=True)
    return [rank_volume(traces, step.rank(0, 0, 0, s)) for s in range(step.pp)]


def volume_report(spec: ModelSpec, shape: TrainingShape, cluster: Cluster, plan: Plan,
                  software: SoftwareProfile | None = None) -> dict[str, Any]:
    """JSON-able: per pipeline stage, bytes per (group role, op) one rank issues per optimizer step."""
    return {
        "model": spec.name,
        "plan": plan.degrees(),
        "unit": "bytes per optimizer step per rank (nccl-tests convention)",
        "stages": [{"stage": s, "bytes": v} for s, v in enumerate(plan_volume(spec, shape, cluster, plan, software))],
    }


def volume_table(report: dict[str, Any]) -> Table:
    table = Table(title=f"communication volume per step per rank: {report['model']} [{report['plan']}]")
    for col in ("stage", "group", "op", "bytes", "MiB"):
        table.add_column(col, justify="right" if col in ("stage", "bytes", "MiB") else "left")
    for st in report["stages"]:
        for group, ops in st["bytes"].items():
            for op, b in ops.items():
                table.add_row(str(st["stage"]), group, op, str(b), f"{b / 2**20:.3f}")
    return table
