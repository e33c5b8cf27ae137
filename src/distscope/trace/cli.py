"""`distscope trace ...`: inspect and generate Chakra execution traces."""

from __future__ import annotations

import json
import sys
from collections import Counter

import typer

trace_app = typer.Typer(help="Chakra execution traces: inspect and generate.", no_args_is_help=True)


@trace_app.command("info")
def info(
    target: str = typer.Argument(..., help="Trace directory with one trace, or PREFIX of PREFIX.<rank>.et files."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Ranks, node counts by kind, collectives and process groups of a trace set."""
    from distscope.sim.cli import _resolve_prefix
    from distscope.trace.chakra_io import read_traces

    traces = read_traces(_resolve_prefix(target))
    kinds: Counter[str] = Counter()
    colls: Counter[str] = Counter()
    for graph in traces.graphs.values():
        for node in graph.nodes:
            kinds[node.kind.value] += 1
            if node.comm_kind is not None:
                colls[node.comm_kind.value] += 1
    out = {
        "ranks": traces.num_ranks,
        "nodes": sum(kinds.values()),
        "by_kind": dict(sorted(kinds.items())),
        "collectives": dict(sorted(colls.items())),
        "process_groups": len(traces.process_groups),
    }
    if as_json:
        sys.stdout.write(json.dumps(out) + "\n")
        return
    for key, value in out.items():
        typer.echo(f"{key}: {value}")
