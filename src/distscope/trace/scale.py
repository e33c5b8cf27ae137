"""A captured job at another data-parallel degree: `distscope simulate CAP --dp N`.

The captured ranks keep their own compute (every replica of the job runs the same per-rank graph, as
data parallelism does); each data-parallel group grows from its captured size d to N by adding
N/d - 1 replicas of the whole captured job, ranks j*W + r (W captured ranks, replica j of rank r). A
DP collective moves the same buffer (a DDP bucket, an FSDP unit's full parameters or gradients), so
all-reduce and reduce-scatter keep their captured comm_size (the whole buffer) and an all-gather's
comm_size (the per-rank shard) becomes shard * d / N; the network model prices the larger group.
TP and PP groups keep their size and members inside each replica. The result is a symmetric trace set:
one simulated graph per captured rank, whatever N is.

What this cannot replay: a TP or PP degree change (the per-rank compute and the bytes depend on the
model's shapes: use `distscope estimate` with the model, refused in one line), and the compute that
shrinks with the shard under FSDP / ZeRO (the optimizer step on a 1/N shard), which keeps its captured
time.
"""

from __future__ import annotations

import dataclasses

from distscope.errors import DistscopeError
from distscope.trace.graph import CollKind, Node, NodeKind
from distscope.trace.traceset import TraceSet

DP_LABELS = ("dp", "dp_replicate", "dp_shard", "data", "fsdp", "ddp")


def dp_groups(traces: TraceSet) -> dict[str, tuple[int, ...]]:
    """The captured data-parallel groups: labelled dp (DeviceMesh dim or --dims); with no labels at all,
    a single world group is data parallel. Raises a one-line error when none can be told."""
    groups: dict[str, tuple[int, ...]] = {}
    for r, g in traces.graphs.items():
        for n in g.nodes:
            if n.kind is NodeKind.COMM_COLL and n.pg_name and n.pg_name not in groups:
                groups[n.pg_name] = traces.members(n.pg_name, r)
    if not groups:
        raise DistscopeError("--dp: the capture has no collectives, so no data-parallel group to grow (FSDP on one "
                             "rank issues none); capture the job on 2 or more ranks")
    labelled = {name: m for name, m in groups.items() if traces.group_labels.get(name, "") in DP_LABELS}
    if labelled:
        return labelled
    world = tuple(range(traces.num_ranks))
    if groups and not traces.group_labels and all(m == world for m in groups.values()):
        return groups
    seen = sorted({traces.group_labels.get(n, n) for n in groups})
    raise DistscopeError(
        f"--dp: the capture has no data-parallel group to grow (groups: {', '.join(seen) or 'none'}); recapture "
        "with --dims 'dp=0,2|1,3' naming them, or a DeviceMesh dim named dp. A TP or PP degree change cannot be "
        "replayed from a capture (its compute and bytes need the model's shapes): use `distscope estimate`"
    )


def scale_dp(traces: TraceSet, dp: int) -> tuple[TraceSet, int]:
    """The trace set at data-parallel degree `dp` and the captured degree (module docstring)."""
    if traces.class_of is not None:
        raise DistscopeError("--dp applies to a capture (one trace per rank), not to a symmetric trace set")
    groups = dp_groups(traces)
    sizes = {len(m) for m in groups.values()}
    if len(sizes) != 1:
        raise DistscopeError(f"--dp: the captured data-parallel groups differ in size ({sorted(sizes)}); cannot grow them")
    d = sizes.pop()
    if dp < 1:
        raise DistscopeError(f"--dp={dp} must be >= 1")
    if dp < d or dp % d:
        raise DistscopeError(f"--dp={dp} does not divide into the captured layout: its data-parallel degree is {d}; "
                             f"give a multiple of {d}")
    k, w = dp // d, traces.num_ranks
    if k == 1:
        return traces, d
    rename = {name: f"{name}@dp{dp}" for name in groups}
    grown = {rename[name]: tuple(sorted(m + j * w for j in range(k) for m in members))
             for name, members in groups.items()}
    def grow(n: Node) -> Node:
        if n.pg_name not in rename:
            return n
        size = n.comm_size_bytes * d // dp if n.comm_kind is CollKind.ALL_GATHER else n.comm_size_bytes
        return dataclasses.replace(n, pg_name=rename[n.pg_name], comm_size_bytes=size)

    graphs = {r: dataclasses.replace(g, nodes=tuple(grow(n) for n in g.nodes)) for r, g in traces.graphs.items()}
    kept = {name: m for name, m in traces.process_groups.items() if name not in rename}
    labels = {rename.get(name, name): lab for name, lab in traces.group_labels.items()}
    return TraceSet(graphs=graphs, process_groups={**kept, **grown}, group_labels=labels,
                    class_of=tuple(r % w for r in range(w * k))), d
