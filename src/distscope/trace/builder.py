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
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from distscope.errors import DistscopeError
from distscope.trace.gcpause import gc_paused
from distscope.trace.graph import CollKind, Node, NodeKind, RankGraph
from distscope.trace.schedule import Schedule, stage_order
from distscope.trace.traceset import TraceSet


class Group(enum.Enum):
    """Process-group roles. DP is the gradient group dp x cp (ranks holding the same weights);
    DPZ is the same ranks priced without NIC rail aggregation (ZeRO-3 traffic); EMB joins the first
    and last pipeline stage (tied word-embedding gradients)."""

    TP = "tp"
    CP = "cp"
    EP = "ep"
    DP = "dp"
    DPZ = "dpz"
    EMB = "emb"


@dataclass(frozen=True, kw_only=True)
class CommOp:
    group: Group
    kind: CollKind
    size_bytes: int  # Chakra comm_size: the per-rank shard for ALL_GATHER, the full buffer otherwise
    hide_s: float = 0.0  # layer compute that runs alongside this collective (fork/join overlap)
    with_previous: bool = False  # continues the previous op's overlap point (runs right after it)

    def __post_init__(self) -> None:
        if self.hide_s < 0:
            raise DistscopeError(f"CommOp {self.kind.value} on {self.group.value}: hide_s={self.hide_s} < 0")
        if self.size_bytes < 0:
            raise DistscopeError(f"CommOp {self.kind.value} on {self.group.value}: size_bytes={self.size_bytes} < 0")


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
class StageExtras:
    """Step-level work of one pipeline stage (all its ranks).

    grad_early starts with the stage's final backward micro-step and grad_late after it (DDP bucket
    overlap: only the last bucket waits for the end of backward); tied (first/last stage) and the
    optimizer follow; param_gather follows the optimizer, or with param_gather_overlap runs alongside
    the step's first forward micro-step (the previous step's gather hidden behind forward).
    mb_gather is issued for every micro-batch (ZeRO-3 weight gathers): alongside its forward and
    backward with mb_gather_overlap, else before its forward; mb_reduce follows its backward.
    """

    optimizer_s: float = 0.0
    grad_early: tuple[CommOp, ...] = ()
    grad_late: tuple[CommOp, ...] = ()
    tied: tuple[CommOp, ...] = ()
    param_gather: tuple[CommOp, ...] = ()
    param_gather_overlap: bool = False
    mb_gather: tuple[CommOp, ...] = ()
    mb_gather_overlap: bool = False
    mb_reduce: tuple[CommOp, ...] = ()


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
    pp_overlap: bool = True  # sends off the critical chain (else the sender waits for its send)
    dp_overlap: bool = True  # per-layer grad_comm after the layer's last backward (else after all)
    optimizer_s: float = 0.0
    param_gather: tuple[CommOp, ...] = ()  # after the optimizer (ZeRO-1/2, distributed optimizer)
    extras: tuple[StageExtras, ...] = ()  # per pipeline stage; replaces optimizer_s/param_gather

    def __post_init__(self) -> None:
        for name in ("tp", "cp", "dp", "ep", "pp", "vp", "micro_batches"):
            if getattr(self, name) < 1:
                raise DistscopeError(f"StepSpec: {name}={getattr(self, name)} must be >= 1 ({self.degrees})")
        if self.dp % self.ep:
            raise DistscopeError(f"StepSpec: ep={self.ep} must divide dp={self.dp} ({self.degrees})")
        if len(self.stages) != self.pp * self.vp:
            raise DistscopeError(
                f"StepSpec: {len(self.stages)} stage layer lists, need pp*vp={self.pp * self.vp} ({self.degrees})"
            )
        if self.vp > 1 and self.schedule is not Schedule.INTERLEAVED:
            raise DistscopeError(f"StepSpec: vp={self.vp} needs schedule=interleaved-1f1b ({self.degrees})")
        if self.extras and len(self.extras) != self.pp:
            raise DistscopeError(f"StepSpec: {len(self.extras)} stage extras, need pp={self.pp} ({self.degrees})")

    @property
    def degrees(self) -> str:
        return f"tp={self.tp} cp={self.cp} dp={self.dp} ep={self.ep} pp={self.pp} vp={self.vp} mb={self.micro_batches}"

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
        if kind in (Group.DP, Group.DPZ):
            members = tuple(self.rank(t, x % self.cp, x // self.cp, s) for x in range(self.dp * self.cp))
            return f"{kind.value}:s{s}:t{t}", members
        if kind is Group.EMB:
            return f"emb:t{t}:c{c}:d{d}", tuple(sorted({self.rank(t, c, d, 0), self.rank(t, c, d, self.pp - 1)}))
        base = d - d % self.ep
        return f"ep:s{s}:c{c}:t{t}:d{base}", tuple(self.rank(t, c, x, s) for x in range(base, base + self.ep))


def _size(spec: StepSpec, group: Group) -> int:
    sizes = {
        Group.TP: spec.tp,
        Group.CP: spec.cp,
        Group.DP: spec.dp * spec.cp,
        Group.DPZ: spec.dp * spec.cp,
        Group.EP: spec.ep,
        Group.EMB: min(spec.pp, 2),
    }
    return sizes[group]


class _Graph:
    """Accumulates one rank's nodes. `chain` is the node the next blocking op depends on; `joins`
    are extra nodes (overlapped work) it must also wait for."""

    def __init__(self, spec: StepSpec, rank: int) -> None:
        self.spec = spec
        self.rank = rank
        self.nodes: list[Node] = []
        self.chain: int | None = None
        self.joins: list[int] = []
        self.groups: dict[str, tuple[int, ...]] = {}
        self._group: dict[Group, tuple[str, tuple[int, ...], bool]] = {}

    def add(self, deps: tuple[int, ...], **kw: object) -> int:
        nid = len(self.nodes)
        if len(deps) > 1:
            deps = tuple(sorted(set(deps)))
        self.nodes.append(Node(id=nid, data_deps=deps, **kw))  # type: ignore[arg-type]
        return nid

    def here(self) -> tuple[int, ...]:
        return () if self.chain is None else (self.chain,)

    def on_chain(self, **kw: object) -> int:
        self.chain = self.add(self.here() + tuple(self.joins), **kw)
        self.joins = []
        return self.chain

    def compute(self, name: str, dur: float, flops: int = 0, nbytes: int = 0) -> None:
        self.on_chain(name=name, kind=NodeKind.COMP, duration_s=dur, num_ops=flops, tensor_size_bytes=nbytes)

    def coll(self, op: CommOp, name: str, deps: tuple[int, ...] | None = None) -> int | None:
        """A collective: on the chain (blocking), or after `deps` off the chain."""
        if op.size_bytes == 0:
            return None
        cached = self._group.get(op.group)
        if cached is None:
            pg, members = self.spec.group(op.group, self.rank)
            cached = self._group[op.group] = (pg, members, _size(self.spec, op.group) > 1)
            if cached[2]:
                self.groups[pg] = members
        pg, members, used = cached
        if not used:
            return None
        kw = dict(name=name, kind=NodeKind.COMM_COLL, comm_kind=op.kind, comm_size_bytes=op.size_bytes, pg_name=pg)
        if deps is None:
            return self.on_chain(**kw)
        return self.add(deps, **kw)

    def comm_point(self, ops: list[CommOp], name: str) -> None:
        """Blocking collectives run back to back; with hide_s, that much compute runs alongside
        them (fork/join)."""
        hide = sum(op.hide_s for op in ops)
        if hide <= 0:
            for k, op in enumerate(ops):
                self.coll(op, f"{name}_{op.group.value}_{op.kind.value.lower()}{k}")
            return
        fork = self.here() + tuple(self.joins)
        self.joins = []
        last: tuple[int, ...] = fork
        for k, op in enumerate(ops):
            nid = self.coll(op, f"{name}_{op.group.value}_{op.kind.value.lower()}{k}", deps=last)
            if nid is not None:
                last = (nid,)
        self.chain = self.add(fork, name=f"{name}_overlapped", kind=NodeKind.COMP, duration_s=hide)
        if last != fork:
            self.joins.extend(last)

    def layer(self, layer: LayerCost, forward: bool, micro: int) -> None:
        what = "fwd" if forward else "bwd"
        ops = layer.fwd_comm if forward else layer.bwd_comm
        dur = layer.fwd_s if forward else layer.bwd_s
        serial = dur - sum(op.hide_s for op in ops)
        if serial < -1e-12:
            raise DistscopeError(f"layer {layer.name!r}: {what} overlaps more compute than its {dur} s")
        self.compute(
            f"{layer.name}_{what}_mb{micro}",
            max(serial, 0.0),
            layer.fwd_flops if forward else layer.bwd_flops,
            layer.fwd_bytes if forward else layer.bwd_bytes,
        )
        points: list[list[CommOp]] = []
        for op in ops:
            if op.with_previous and points:
                points[-1].append(op)
            else:
                points.append([op])
        for k, point in enumerate(points):
            self.comm_point(point, f"{layer.name}_{what}_p{k}_mb{micro}")


def _tag(forward: bool, edge: int, micro: int, spec: StepSpec) -> int:
    """Unique per (direction, boundary between virtual stages edge and edge+1, micro-batch)."""
    return ((0 if forward else 1) * spec.pp * spec.vp + edge) * spec.micro_batches + micro


def rank_graph(spec: StepSpec, rank: int) -> tuple[RankGraph, dict[str, tuple[int, ...]]]:
    """One rank's graph for the step, and the process groups it uses."""
    t, c, d, s = spec.coords(rank)
    g = _Graph(spec, rank)
    ex = spec.extras[s] if spec.extras else StageExtras(optimizer_s=spec.optimizer_s, param_gather=spec.param_gather)
    nvirt = spec.pp * spec.vp
    order = stage_order(spec.schedule, stage=s, stages=spec.pp, micro_batches=spec.micro_batches, chunks=spec.vp)
    last_bwd: dict[tuple[int, int], int] = {}  # (chunk, layer) -> node of its last backward
    mb_pending: dict[int, list[int]] = {}  # micro-batch -> overlapped ZeRO-3 gathers to join
    early_start: int | None = None
    bwd_steps = [n for n, st in enumerate(order) if not st.forward]
    fwd_steps = [n for n, st in enumerate(order) if st.forward]
    first_of_last_bwds = bwd_steps[-min(spec.vp, len(bwd_steps))]
    last_of_first_fwds = fwd_steps[min(spec.vp, len(fwd_steps)) - 1]
    gather_pending: list[int] = []
    for n, step in enumerate(order):
        v = step.chunk * spec.pp + s
        layers = spec.stages[v]
        src_v = v - 1 if step.forward else v + 1
        dst_v = v + 1 if step.forward else v - 1
        what = "fwd" if step.forward else "bwd"
        if n == 0 and ex.param_gather and ex.param_gather_overlap:
            for k, op in enumerate(ex.param_gather):
                nid = g.coll(op, f"param_{op.group.value}_{op.kind.value.lower()}{k}", deps=())
                if nid is not None:
                    gather_pending.append(nid)
        if step.forward and step.chunk == 0 and ex.mb_gather:
            for k, op in enumerate(ex.mb_gather):
                name = f"zero3_{op.kind.value.lower()}{k}_mb{step.micro}"
                if ex.mb_gather_overlap:
                    nid = g.coll(op, name, deps=g.here())
                    if nid is not None:
                        mb_pending.setdefault(step.micro, []).append(nid)
                else:
                    g.coll(op, name)
        if 0 <= src_v < nvirt and spec.pp > 1 and spec.pp_bytes:
            g.on_chain(
                name=f"recv_{what}_mb{step.micro}_c{step.chunk}",
                kind=NodeKind.COMM_RECV,
                comm_src=spec.rank(t, c, d, src_v % spec.pp),
                comm_tag=_tag(step.forward, min(v, src_v), step.micro, spec),
                tensor_size_bytes=spec.pp_bytes,
            )
        if n == first_of_last_bwds:  # the final vp backward micro-steps (one micro-batch) start here
            early_start = g.chain if g.chain is not None else -1
        idx = range(len(layers)) if step.forward else reversed(range(len(layers)))
        for li in idx:
            g.layer(layers[li], step.forward, step.micro)
            if not step.forward:
                assert g.chain is not None
                last_bwd[step.chunk, li] = g.chain
        if n == last_of_first_fwds and gather_pending:  # hidden behind one micro-batch's forward
            g.joins.extend(gather_pending)
        if 0 <= dst_v < nvirt and spec.pp > 1 and spec.pp_bytes and g.chain is not None:
            kw = dict(
                name=f"send_{what}_mb{step.micro}_c{step.chunk}",
                kind=NodeKind.COMM_SEND,
                comm_dst=spec.rank(t, c, d, dst_v % spec.pp),
                comm_tag=_tag(step.forward, min(v, dst_v), step.micro, spec),
                tensor_size_bytes=spec.pp_bytes,
            )
            if spec.pp_overlap:
                g.add((g.chain,), **kw)
            else:
                g.on_chain(**kw)
        if not step.forward and step.chunk == 0:
            g.joins.extend(mb_pending.pop(step.micro, []))
            for k, op in enumerate(ex.mb_reduce):
                g.coll(op, f"zero3_{op.kind.value.lower()}{k}_mb{step.micro}")
    end = g.here() + tuple(g.joins)
    g.joins = []
    grads: list[int] = []
    for (chunk, li), node in sorted(last_bwd.items(), key=lambda kv: kv[1]):
        layer = spec.stages[chunk * spec.pp + s][li]
        for k, op in enumerate(layer.grad_comm):
            nid = g.coll(
                op,
                f"{layer.name}_c{chunk}_grad_{op.group.value}_{op.kind.value.lower()}{k}",
                deps=(node,) if spec.dp_overlap else end,
            )
            if nid is not None:
                grads.append(nid)
    for k, op in enumerate(ex.grad_early):
        deps = () if early_start in (None, -1) else (early_start,)
        nid = g.coll(op, f"grad_{op.group.value}_{op.kind.value.lower()}{k}_early", deps=deps)
        if nid is not None:
            grads.append(nid)
    for k, op in enumerate(ex.grad_late):
        nid = g.coll(op, f"grad_{op.group.value}_{op.kind.value.lower()}{k}", deps=end)
        if nid is not None:
            grads.append(nid)
    local_grads = tuple(grads)
    for k, op in enumerate(ex.tied):  # Megatron finalize_model_grads: grad sync, then embedding all-reduce
        nid = g.coll(op, f"tied_embedding_{op.kind.value.lower()}{k}", deps=end + local_grads)
        if nid is not None:
            grads.append(nid)
    tail_gather = ex.param_gather if not ex.param_gather_overlap else ()
    if ex.optimizer_s > 0 or tail_gather or grads:
        g.chain = g.add(end + tuple(grads), name="optimizer_step", kind=NodeKind.COMP, duration_s=ex.optimizer_s)
        for k, op in enumerate(tail_gather):
            g.coll(op, f"param_{op.group.value}_{op.kind.value.lower()}{k}")
    return RankGraph(rank=rank, nodes=tuple(g.nodes)), g.groups


def build_traces(spec: StepSpec, *, symmetric: bool = False, on_rank: Callable[[], None] | None = None) -> TraceSet:
    """All ranks' graphs, or with `symmetric` one representative per pipeline stage
    (rank (0, 0, 0, s)): ranks of one stage run identical graphs on identically shaped groups.
    `on_rank` is called after each rank's graph (progress)."""
    with gc_paused():
        return _build_traces(spec, symmetric, on_rank)


def traced_ranks(spec: StepSpec, symmetric: bool) -> int:
    """How many graphs build_traces makes (for a progress total)."""
    return spec.pp if symmetric else spec.world


def _build_traces(spec: StepSpec, symmetric: bool, on_rank: Callable[[], None] | None = None) -> TraceSet:
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
        if on_rank is not None:
            on_rank()
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
