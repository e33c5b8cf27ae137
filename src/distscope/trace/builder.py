"""Build per-rank execution graphs of one training step from per-layer costs and a parallel layout.

Costs come from outside (the estimator); this module only decides structure: which node runs where,
after what, on which process group. Rank layout (Megatron-LM order, TP fastest):
    rank = t + TP * (c + CP * (d + DP * s))      t: TP, c: CP, d: DP, s: pipeline stage
EP groups are runs of `ep` consecutive DP indices (experts sharded inside the data-parallel group).

Per rank, in schedule order (schedule.py), each micro-step is
    [recv activation/gradient]  ->  per layer: compute, then its blocking TP/CP/EP collectives
    ->  [send activation/gradient]           (sends are off the critical chain)
Data-parallel gradient collectives follow each layer's last backward (overlapped, on the DP stream)
or the end of the last backward (not overlapped); the optimizer step follows them, then the ZeRO /
distributed-optimizer parameter all-gather.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace

from distscope.errors import DistscopeError
from distscope.trace.graph import CollKind, Node, NodeKind, RankGraph
from distscope.trace.schedule import Schedule, stage_order
from distscope.trace.traceset import TraceSet


class Group(enum.Enum):
    TP = "tp"
    CP = "cp"
    EP = "ep"
    DP = "dp"


@dataclass(frozen=True, kw_only=True)
class CommOp:
    group: Group
    kind: CollKind
    size_bytes: int

    def __post_init__(self) -> None:
        if self.size_bytes < 0:
            raise DistscopeError(
                f"CommOp {self.kind.value} on {self.group.value}: size_bytes={self.size_bytes} < 0"
            )


@dataclass(frozen=True, kw_only=True)
class LayerCost:
    """One layer's work on one rank for one micro-batch (durations from the estimator)."""

    name: str
    fwd_s: float
    bwd_s: float
    fwd_flops: int = 0
    bwd_flops: int = 0
    fwd_bytes: int = 0
    bwd_bytes: int = 0
    fwd_comm: tuple[CommOp, ...] = ()
    bwd_comm: tuple[CommOp, ...] = ()
    grad_comm: tuple[CommOp, ...] = ()  # DP gradient sync of this layer's parameters

    def __post_init__(self) -> None:
        if self.fwd_s < 0 or self.bwd_s < 0:
            raise DistscopeError(f"layer {self.name!r}: fwd_s={self.fwd_s}, bwd_s={self.bwd_s} must be >= 0")


@dataclass(frozen=True, kw_only=True)
class StepSpec:
    """A training step: layout, schedule, per-virtual-stage layers and step-level work."""

    tp: int = 1
    cp: int = 1
    dp: int = 1
    ep: int = 1
    pp: int = 1
    vp: int = 1
    micro_batches: int = 1
    schedule: Schedule = Schedule.ONE_F_ONE_B
    # stages[j * pp + s]: the layers of model chunk j on pipeline stage s (pp * vp entries).
    stages: tuple[tuple[LayerCost, ...], ...] = field(default_factory=tuple)
    pp_bytes: int = 0  # activation (and gradient) bytes crossing a stage boundary per micro-batch
    dp_overlap: bool = True
    optimizer_s: float = 0.0
    param_gather: tuple[CommOp, ...] = ()  # after the optimizer (ZeRO-1/2, distributed optimizer)

    def __post_init__(self) -> None:
        for name in ("tp", "cp", "dp", "ep", "pp", "vp", "micro_batches"):
            if getattr(self, name) < 1:
                raise DistscopeError(f"StepSpec: {name}={getattr(self, name)} must be >= 1 ({self.degrees})")
        if self.dp % self.ep:
            raise DistscopeError(f"StepSpec: ep={self.ep} must divide dp={self.dp} ({self.degrees})")
        if len(self.stages) != self.pp * self.vp:
            raise DistscopeError(
                f"StepSpec: {len(self.stages)} stage layer lists, need pp*vp={self.pp * self.vp} "
                f"({self.degrees})"
            )
        if self.vp > 1 and self.schedule is not Schedule.INTERLEAVED:
            raise DistscopeError(f"StepSpec: vp={self.vp} needs schedule=interleaved ({self.degrees})")

    @property
    def degrees(self) -> str:
        return (
            f"tp={self.tp} cp={self.cp} dp={self.dp} ep={self.ep} pp={self.pp} vp={self.vp} "
            f"mb={self.micro_batches}"
        )

    @property
    def world(self) -> int:
        return self.tp * self.cp * self.dp * self.pp

    def rank(self, t: int, c: int, d: int, s: int) -> int:
        return t + self.tp * (c + self.cp * (d + self.dp * s))

    def coords(self, rank: int) -> tuple[int, int, int, int]:
        t = rank % self.tp
        rank //= self.tp
        c = rank % self.cp
        rank //= self.cp
        d = rank % self.dp
        return t, c, d, rank // self.dp

    def group(self, kind: Group, rank: int) -> tuple[str, tuple[int, ...]]:
        t, c, d, s = self.coords(rank)
        if kind is Group.TP:
            return f"tp:s{s}:d{d}:c{c}", tuple(self.rank(x, c, d, s) for x in range(self.tp))
        if kind is Group.CP:
            return f"cp:s{s}:d{d}:t{t}", tuple(self.rank(t, x, d, s) for x in range(self.cp))
        if kind is Group.DP:
            return f"dp:s{s}:c{c}:t{t}", tuple(self.rank(t, c, x, s) for x in range(self.dp))
        base = d - d % self.ep
        return f"ep:s{s}:c{c}:t{t}:d{base}", tuple(self.rank(t, c, x, s) for x in range(base, base + self.ep))


def _size(spec: StepSpec, group: Group) -> int:
    return {Group.TP: spec.tp, Group.CP: spec.cp, Group.DP: spec.dp, Group.EP: spec.ep}[group]


class _Graph:
    """Accumulates one rank's nodes; `chain` is the node the next blocking op depends on."""

    def __init__(self, spec: StepSpec, rank: int) -> None:
        self.spec = spec
        self.rank = rank
        self.nodes: list[Node] = []
        self.chain: int | None = None
        self.groups: dict[str, tuple[int, ...]] = {}

    def add(self, deps: tuple[int, ...], **kw: object) -> int:
        nid = len(self.nodes)
        self.nodes.append(Node(id=nid, data_deps=deps, **kw))  # type: ignore[arg-type]
        return nid

    def on_chain(self, **kw: object) -> int:
        self.chain = self.add(() if self.chain is None else (self.chain,), **kw)
        return self.chain

    def coll(self, op: CommOp, name: str, deps: tuple[int, ...] | None = None) -> int | None:
        if _size(self.spec, op.group) == 1 or op.size_bytes == 0:
            return None
        pg, members = self.spec.group(op.group, self.rank)
        self.groups[pg] = members
        kw = dict(
            name=name, kind=NodeKind.COMM_COLL, comm_kind=op.kind, comm_size_bytes=op.size_bytes, pg_name=pg
        )
        if deps is None:
            return self.on_chain(**kw)
        return self.add(deps, **kw)


def _tag(forward: bool, edge: int, micro: int, spec: StepSpec) -> int:
    """Unique per (direction, boundary between virtual stages edge and edge+1, micro-batch)."""
    return ((0 if forward else 1) * spec.pp * spec.vp + edge) * spec.micro_batches + micro


def rank_graph(spec: StepSpec, rank: int) -> tuple[RankGraph, dict[str, tuple[int, ...]]]:
    """One rank's graph for the step, and the process groups it uses."""
    t, c, d, s = spec.coords(rank)
    g = _Graph(spec, rank)
    nvirt = spec.pp * spec.vp
    last_bwd: dict[tuple[int, int], int] = {}  # (chunk, layer) -> node of its last backward
    for step in stage_order(
        spec.schedule, stage=s, stages=spec.pp, micro_batches=spec.micro_batches, chunks=spec.vp
    ):
        v = step.chunk * spec.pp + s
        layers = spec.stages[v]
        src_v = v - 1 if step.forward else v + 1
        dst_v = v + 1 if step.forward else v - 1
        in_tag = _tag(step.forward, min(v, src_v), step.micro, spec)
        out_tag = _tag(step.forward, min(v, dst_v), step.micro, spec)
        what = "fwd" if step.forward else "bwd"
        if 0 <= src_v < nvirt and spec.pp > 1 and spec.pp_bytes:
            g.on_chain(
                name=f"recv_{what}_mb{step.micro}_c{step.chunk}",
                kind=NodeKind.COMM_RECV,
                comm_src=spec.rank(t, c, d, src_v % spec.pp),
                comm_tag=in_tag,
                tensor_size_bytes=spec.pp_bytes,
            )
        order = range(len(layers)) if step.forward else reversed(range(len(layers)))
        for li in order:
            layer = layers[li]
            g.on_chain(
                name=f"{layer.name}_{what}_mb{step.micro}",
                kind=NodeKind.COMP,
                duration_s=layer.fwd_s if step.forward else layer.bwd_s,
                num_ops=layer.fwd_flops if step.forward else layer.bwd_flops,
                tensor_size_bytes=layer.fwd_bytes if step.forward else layer.bwd_bytes,
            )
            for k, op in enumerate(layer.fwd_comm if step.forward else layer.bwd_comm):
                g.coll(op, f"{layer.name}_{what}_{op.group.value}_{op.kind.value.lower()}{k}_mb{step.micro}")
            if not step.forward:
                last_bwd[step.chunk, li] = g.chain  # type: ignore[assignment]
        if 0 <= dst_v < nvirt and spec.pp > 1 and spec.pp_bytes and g.chain is not None:
            g.add(
                (g.chain,),
                name=f"send_{what}_mb{step.micro}_c{step.chunk}",
                kind=NodeKind.COMM_SEND,
                comm_dst=spec.rank(t, c, d, dst_v % spec.pp),
                comm_tag=out_tag,
                tensor_size_bytes=spec.pp_bytes,
            )
    end = g.chain
    grads: list[int] = []
    for (chunk, li), node in sorted(last_bwd.items(), key=lambda kv: kv[1]):
        layer = spec.stages[chunk * spec.pp + s][li]
        for k, op in enumerate(layer.grad_comm):
            dep = node if spec.dp_overlap else end
            nid = g.coll(
                op,
                f"{layer.name}_c{chunk}_grad_{op.group.value}_{op.kind.value.lower()}{k}",
                deps=() if dep is None else (dep,),
            )
            if nid is not None:
                grads.append(nid)
    opt_deps = tuple(sorted({*grads, *(() if end is None else (end,))}))
    if spec.optimizer_s > 0 or spec.param_gather:
        g.chain = g.add(opt_deps, name="optimizer_step", kind=NodeKind.COMP, duration_s=spec.optimizer_s)
        for k, op in enumerate(spec.param_gather):
            g.coll(op, f"param_{op.group.value}_{op.kind.value.lower()}{k}")
    return RankGraph(rank=rank, nodes=tuple(g.nodes)), g.groups


def build_traces(spec: StepSpec, *, symmetric: bool = False) -> TraceSet:
    """All ranks' graphs, or with `symmetric` one representative per pipeline stage
    (rank (0, 0, 0, s)): ranks of one stage run identical graphs on identically shaped groups."""
    if symmetric:
        reps = [spec.rank(0, 0, 0, s) for s in range(spec.pp)]
        class_of = tuple(spec.rank(0, 0, 0, spec.coords(r)[3]) for r in range(spec.world))
    else:
        reps = list(range(spec.world))
        class_of = None
    graphs: dict[int, RankGraph] = {}
    groups: dict[str, tuple[int, ...]] = {}
    templates: dict[int, tuple[int, RankGraph]] = {}  # stage -> (template rank, graph)
    for r in reps:
        stage = spec.coords(r)[3]
        if stage in templates:
            graphs[r] = _remap(spec, *templates[stage], r, groups)
        else:
            graphs[r], used = rank_graph(spec, r)
            groups.update(used)
            templates[stage] = (r, graphs[r])
    return TraceSet(graphs=graphs, process_groups=groups, class_of=class_of)


def _remap(
    spec: StepSpec, template_rank: int, template: RankGraph, rank: int, groups: dict[str, tuple[int, ...]]
) -> RankGraph:
    """`template`'s graph moved to another rank of the same stage: compute nodes are shared (frozen),
    collectives get this rank's groups, messages this rank's peers."""
    t, c, d, _ = spec.coords(rank)
    names: dict[str, str] = {}
    nodes = []
    for node in template.nodes:
        if node.kind is NodeKind.COMM_COLL:
            new = names.get(node.pg_name)
            if new is None:
                new, members = spec.group(Group(node.pg_name.split(":", 1)[0]), rank)
                names[node.pg_name] = new
                groups[new] = members
            node = replace(node, pg_name=new)
        elif node.kind is NodeKind.COMM_SEND and node.comm_dst is not None:
            node = replace(node, comm_dst=spec.rank(t, c, d, spec.coords(node.comm_dst)[3]))
        elif node.kind is NodeKind.COMM_RECV and node.comm_src is not None:
            node = replace(node, comm_src=spec.rank(t, c, d, spec.coords(node.comm_src)[3]))
        nodes.append(node)
    del template_rank
    return RankGraph(rank=rank, nodes=tuple(nodes))
