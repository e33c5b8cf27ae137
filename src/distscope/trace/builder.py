"""Build per-rank execution graphs of one training step from per-layer costs and a parallel layout.

Costs come from outside (the estimator); this module only decides structure: which node runs where,
after what, on which process group. Rank layout (Megatron-LM order, TP fastest):
    rank = t + TP * (c + CP * (d + DP * s))      t: TP, c: CP, d: DP, s: pipeline stage
EP groups are runs of `ep` consecutive DP indices (experts sharded inside the data-parallel group).

MoE layers use Megatron's expert grid: a stage's tp·cp·dp ranks re-folded as etp x ep x edp (etp
fastest), so EP, ETP and the expert-data-parallel group EDP (which reduces expert gradients) are
carved out of the stage-local rank t + tp·(c + cp·d).

Per rank, in schedule order (schedule.py), each pass is
    [recv activation/gradient]  ->  per layer: compute, then its blocking TP/CP/EP collectives
    ->  [send activation/gradient]           (sends are off the critical chain)
A split backward (zero-bubble schedules) runs each layer's input-gradient work in its B pass and the
weight-gradient GEMMs (LayerCost.wgrad_s) in a later W pass. Where each model chunk lives follows
the schedule's plan.Placement (interleaved loop, ZB-V's V, DualPipe's mirrored pair). Data-parallel
gradient collectives follow each layer's last gradient pass (overlapped, on the DP stream) or the
end of the last one (not overlapped); the optimizer step follows them, then the ZeRO /
distributed-optimizer parameter all-gather. Without a flush (PipeDream-2BW) the previous step's
gradient reduction, optimizer step and gathers run beside this step's passes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from distscope.enums import Enum
from distscope.errors import DistscopeError
from distscope.plan import SCHEDULE_TRAITS, Placement
from distscope.trace.gcpause import gc_paused
from distscope.trace.graph import CollKind, Node, NodeKind, RankGraph
from distscope.trace.schedule import Pass, Schedule, Step, stage_order
from distscope.trace.traceset import TraceSet


class Group(Enum):
    """Process-group roles. DP is the gradient group dp x cp (ranks holding the same weights);
    DPZ is the same ranks priced without NIC rail aggregation (ZeRO-3 traffic); EMB joins the first
    and last pipeline stage (tied word-embedding gradients). EP, ETP and EDP are the expert grid's
    groups (EDPZ: EDP for ZeRO-3 traffic); EPX and EPL split an EP group that spans nodes for the
    node-forwarded MoE dispatcher (model/moe.py): EPX joins its ranks of one local index across the
    nodes, EPL its ranks inside one node. MIRROR joins ranks s and pp-1-s, which hold the same two
    stages under DualPipe."""

    TP = "tp"
    CP = "cp"
    EP = "ep"
    DP = "dp"
    DPZ = "dpz"
    EMB = "emb"
    ETP = "etp"
    EDP = "edp"
    EDPZ = "edpz"
    EPX = "epx"
    EPL = "epl"
    MIRROR = "mirror"


@dataclass(frozen=True, kw_only=True)
class CommOp:
    group: Group
    kind: CollKind
    size_bytes: int  # Chakra comm_size: the per-rank shard for ALL_GATHER, the full buffer otherwise
    hide_s: float = 0.0  # layer compute that runs alongside this collective (fork/join overlap)
    with_previous: bool = False  # continues the previous op's overlap point (runs right after it)
    tag: str = field(init=False, repr=False, compare=False)  # 'tp_all_reduce': its nodes' name part

    def __post_init__(self) -> None:
        if self.hide_s < 0:
            raise DistscopeError(f"CommOp {self.kind.value} on {self.group.value}: hide_s={self.hide_s} < 0")
        if self.size_bytes < 0:
            raise DistscopeError(f"CommOp {self.kind.value} on {self.group.value}: size_bytes={self.size_bytes} < 0")
        # derived once here: a step builds one node per (op, micro-batch), and Enum.value is a Python call
        object.__setattr__(self, "tag", f"{self.group.value}_{self.kind.value.lower()}")


def _points(ops: tuple[CommOp, ...]) -> tuple[tuple[CommOp, ...], ...]:
    """Ops grouped into overlap points: an op `with_previous` joins the point before it."""
    points: list[list[CommOp]] = []
    for op in ops:
        if op.with_previous and points:
            points[-1].append(op)
        else:
            points.append([op])
    return tuple(tuple(p) for p in points)


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
    wgrad_s: float = 0.0  # weight-gradient share of bwd_s (its own W pass under a split backward)
    # derived once (the builder reads them per micro-batch): ops per overlap point, compute they hide
    fwd_points: tuple[tuple[CommOp, ...], ...] = field(init=False, repr=False, compare=False)
    bwd_points: tuple[tuple[CommOp, ...], ...] = field(init=False, repr=False, compare=False)
    fwd_hide_s: float = field(init=False, repr=False, compare=False)
    bwd_hide_s: float = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.fwd_s < 0 or self.bwd_s < 0:
            raise DistscopeError(f"layer {self.name!r}: fwd_s={self.fwd_s}, bwd_s={self.bwd_s} must be >= 0")
        if not 0 <= self.wgrad_s <= self.bwd_s:
            raise DistscopeError(f"layer {self.name!r}: wgrad_s={self.wgrad_s} must be in [0, bwd_s={self.bwd_s}]")
        object.__setattr__(self, "fwd_points", _points(self.fwd_comm))
        object.__setattr__(self, "bwd_points", _points(self.bwd_comm))
        object.__setattr__(self, "fwd_hide_s", sum(op.hide_s for op in self.fwd_comm))
        object.__setattr__(self, "bwd_hide_s", sum(op.hide_s for op in self.bwd_comm))


@dataclass(frozen=True, kw_only=True)
class StageExtras:
    """Step-level work of one pipeline stage (all its ranks).

    grad_early starts with the stage's final backward micro-step and grad_late after it (DDP bucket
    overlap: only the last bucket waits for the end of backward); tied (first/last stage) and the
    optimizer follow; param_gather follows the optimizer, or with param_gather_overlap runs alongside
    the step's first forward micro-step (the previous step's gather hidden behind forward).
    mb_gather is issued for every micro-batch (ZeRO-3 weight gathers) with its forward and
    mb_gather_bwd with its backward: with mb_gather_overlap alongside them (joined after its last
    gradient pass), else when the pass starts (after its input arrived); mb_reduce follows its
    backward (its W pass under a split backward: the weight gradients), and mb_reduce_early (the gradients of all but
    the stage's last layer when the stack reduce-scatters layer by layer behind the backward) starts
    with it. With mb_chunk_layers (the layers of each of
    the rank's model chunks) they are per chunk instead: each (micro-batch, chunk) pass moves its
    chunk's share of them, in that chunk's passes (FSDP gathers and reduces a module's parameters
    around that module's own forward and backward, so an interleaved or DualPipe rank does it per chunk).
    """

    optimizer_s: float = 0.0
    grad_early: tuple[CommOp, ...] = ()
    grad_late: tuple[CommOp, ...] = ()
    tied: tuple[CommOp, ...] = ()
    param_gather: tuple[CommOp, ...] = ()
    param_gather_overlap: bool = False
    mb_gather: tuple[CommOp, ...] = ()
    mb_gather_overlap: bool = False
    mb_gather_bwd: tuple[CommOp, ...] = ()
    mb_reduce: tuple[CommOp, ...] = ()
    mb_reduce_early: tuple[CommOp, ...] = ()
    mb_chunk_layers: tuple[int, ...] = ()


def _chunk_ops(ops: tuple[CommOp, ...], share: float) -> tuple[CommOp, ...]:
    return tuple(replace(op, size_bytes=round(op.size_bytes * share)) for op in ops)


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
    etp: int = 0  # expert tensor-parallel degree (0 = tp)
    ep_node: int = 0  # EP ranks per node when the EP group spans nodes (Group.EPX/EPL); 0 = not split
    # stages[v]: the layers of model chunk v, counted from the embedding side (pp * vp entries);
    # which rank holds it follows the schedule's placement (interleaved: v mod pp).
    stages: tuple[tuple[LayerCost, ...], ...] = field(default_factory=tuple)
    pp_bytes: int = 0  # activation (and gradient) bytes crossing a stage boundary per micro-batch
    # per boundary instead (model chunk v to v+1: pp*vp - 1 entries), where the stages differ (a torch
    # module split over its children); empty = pp_bytes at every boundary
    boundary_bytes: tuple[int, ...] = ()
    pp_overlap: bool = True  # sends off the critical chain (else the sender waits for its send)
    dp_overlap: bool = True  # per-layer grad_comm after the layer's last backward (else after all)
    optimizer_s: float = 0.0
    param_gather: tuple[CommOp, ...] = ()  # after the optimizer (ZeRO-1/2, distributed optimizer)
    extras: tuple[StageExtras, ...] = ()  # per pipeline stage; replaces optimizer_s/param_gather
    steps: int = 1  # consecutive steps in the trace (only without a flush: PipeDream-2BW)

    def __post_init__(self) -> None:
        if self.steps > 1 and SCHEDULE_TRAITS[self.schedule].flush:
            raise DistscopeError(f"StepSpec: steps={self.steps} needs a schedule without a flush (2bw) ({self.degrees})")
        for name in ("tp", "cp", "dp", "ep", "pp", "vp", "micro_batches", "steps"):
            if getattr(self, name) < 1:
                raise DistscopeError(f"StepSpec: {name}={getattr(self, name)} must be >= 1 ({self.degrees})")
        if (self.tp * self.cp * self.dp) % (self.expert_tp * self.ep):
            raise DistscopeError(f"StepSpec: etp*ep={self.expert_tp * self.ep} must divide tp*cp*dp ({self.degrees})")
        if len(self.stages) != self.pp * self.vp:
            raise DistscopeError(
                f"StepSpec: {len(self.stages)} stage layer lists, need pp*vp={self.pp * self.vp} ({self.degrees})"
            )
        need = SCHEDULE_TRAITS[self.schedule].fixed_vp
        if (need is None and self.vp == 1 and self.pp > 1) or (need is not None and self.vp != need and self.pp > 1):
            raise DistscopeError(f"StepSpec: vp={self.vp} does not fit schedule={self.schedule.value} ({self.degrees})")
        if self.vp > 1 and need == 1:
            raise DistscopeError(f"StepSpec: vp={self.vp} needs schedule=interleaved-1f1b ({self.degrees})")
        if self.ep_node and (self.ep_node < 1 or self.ep % self.ep_node):
            raise DistscopeError(f"StepSpec: ep_node={self.ep_node} must divide ep ({self.degrees})")
        if self.extras and len(self.extras) != self.pp:
            raise DistscopeError(f"StepSpec: {len(self.extras)} stage extras, need pp={self.pp} ({self.degrees})")
        if self.boundary_bytes and len(self.boundary_bytes) != self.pp * self.vp - 1:
            raise DistscopeError(f"StepSpec: {len(self.boundary_bytes)} boundary sizes, need pp*vp-1="
                                 f"{self.pp * self.vp - 1} ({self.degrees})")

    @property
    def degrees(self) -> str:
        return f"tp={self.tp} cp={self.cp} dp={self.dp} ep={self.ep} pp={self.pp} vp={self.vp} mb={self.micro_batches}"

    @property
    def world(self) -> int:
        return self.tp * self.cp * self.dp * self.pp

    @property
    def expert_tp(self) -> int:
        return self.etp or self.tp

    @property
    def expert_dp(self) -> int:
        return self.tp * self.cp * self.dp // (self.expert_tp * self.ep)

    @property
    def placement(self) -> Placement:
        return SCHEDULE_TRAITS[self.schedule].placement if self.pp > 1 else Placement.LOOP

    def crossing_bytes(self, v: int) -> int:
        """Bytes one micro-batch sends between model chunks v and v + 1 (either direction)."""
        return self.boundary_bytes[v] if self.boundary_bytes else self.pp_bytes

    def position(self, stage: int, chunk: int) -> int:
        """Model chunk (index into `stages`) that `stage` runs as its local chunk `chunk`."""
        if self.placement is Placement.V:
            return stage if chunk == 0 else 2 * self.pp - 1 - stage
        if self.placement is Placement.MIRROR:
            return stage if chunk == 0 else self.pp - 1 - stage
        return chunk * self.pp + stage

    def holder(self, position: int, chunk: int) -> tuple[int, int]:
        """(stage, local chunk) running model chunk `position` for a micro-batch that uses local
        chunk `chunk` (MIRROR: the chunk names the direction)."""
        if self.placement is Placement.V:
            return (position, 0) if position < self.pp else (2 * self.pp - 1 - position, 1)
        if self.placement is Placement.MIRROR:
            return (position, 0) if chunk == 0 else (self.pp - 1 - position, 1)
        return position % self.pp, position // self.pp

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
        if kind is Group.MIRROR:
            pair = tuple(sorted({self.rank(t, c, d, s), self.rank(t, c, d, self.pp - 1 - s)}))
            return f"mirror:s{min(s, self.pp - 1 - s)}:t{t}:c{c}:d{d}", pair
        # the expert grid: stage-local index L = et + etp·(x + ep·z) (Megatron's expert rank order)
        et_n, ep_n = self.expert_tp, self.ep
        local = t + self.tp * (c + self.cp * d)
        et, x, z = local % et_n, (local // et_n) % ep_n, local // (et_n * ep_n)
        base = s * self.tp * self.cp * self.dp
        if kind is Group.EP:
            return f"ep:s{s}:e{et}:z{z}", tuple(base + et + et_n * (y + ep_n * z) for y in range(ep_n))
        if kind in (Group.EPX, Group.EPL) and not self.ep_node:
            raise DistscopeError(f"StepSpec: a {kind.value} collective needs ep_node > 0 ({self.degrees})")
        if kind is Group.EPL:
            lo = x - x % self.ep_node
            return f"epl:s{s}:e{et}:z{z}:n{lo}", tuple(base + et + et_n * (y + ep_n * z) for y in range(lo, lo + self.ep_node))
        if kind is Group.EPX:
            i = x % self.ep_node
            return (f"epx:s{s}:e{et}:z{z}:i{i}",
                    tuple(base + et + et_n * (y + ep_n * z) for y in range(i, ep_n, self.ep_node)))
        if kind is Group.ETP:
            return f"etp:s{s}:x{x}:z{z}", tuple(base + y + et_n * (x + ep_n * z) for y in range(et_n))
        return f"{kind.value}:s{s}:e{et}:x{x}", tuple(base + et + et_n * (x + ep_n * y) for y in range(self.expert_dp))


def _size(spec: StepSpec, group: Group) -> int:
    sizes = {
        Group.TP: spec.tp,
        Group.CP: spec.cp,
        Group.DP: spec.dp * spec.cp,
        Group.DPZ: spec.dp * spec.cp,
        Group.EP: spec.ep,
        Group.EPX: spec.ep // spec.ep_node if spec.ep_node else 1,
        Group.EPL: spec.ep_node,
        Group.EMB: min(spec.pp, 2),
        Group.ETP: spec.expert_tp,
        Group.EDP: spec.expert_dp,
        Group.EDPZ: spec.expert_dp,
        Group.MIRROR: min(spec.pp, 2),
    }
    return sizes[group]


# A stage's data-parallel collectives on its dense parameters' group (DP, DPZ) and on its experts' (EDP,
# EDPZ) go out one after the other, in the order they are issued: the two groups cross the same NICs, so
# together they take the sum of their times (model/estimate.py sums them), not the longer of the two that
# separate streams would give in a congestion-unaware network. (Within one group its stream orders them.)
_DP_LANE = frozenset({Group.DP, Group.DPZ, Group.EDP, Group.EDPZ})


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
        self.dp_lane: tuple[int, Group] | None = None  # the last data-parallel collective issued (_DP_LANE)

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
        on_chain = deps is None
        if deps is None:
            deps = self.here() + tuple(self.joins)
            self.joins = []
        lane = op.group in _DP_LANE
        if lane and self.dp_lane is not None and self.dp_lane[1] is not op.group:
            deps += (self.dp_lane[0],)
        nid = self.add(deps, name=name, kind=NodeKind.COMM_COLL, comm_kind=op.kind, comm_size_bytes=op.size_bytes,
                       pg_name=pg)
        if lane:
            self.dp_lane = (nid, op.group)
        if on_chain:
            self.chain = nid
        return nid

    def comm_point(self, ops: tuple[CommOp, ...], name: str) -> None:
        """Blocking collectives run back to back; with hide_s, that much compute runs alongside
        them (fork/join)."""
        hide = sum(op.hide_s for op in ops)
        if hide <= 0:
            for k, op in enumerate(ops):
                self.coll(op, f"{name}_{op.tag}{k}")
            return
        fork = self.here() + tuple(self.joins)
        self.joins = []
        last: tuple[int, ...] = fork
        for k, op in enumerate(ops):
            nid = self.coll(op, f"{name}_{op.tag}{k}", deps=last)
            if nid is not None:
                last = (nid,)
        self.chain = self.add(fork, name=f"{name}_overlapped", kind=NodeKind.COMP, duration_s=hide)
        if last != fork:
            self.joins.extend(last)

    def layer(self, layer: LayerCost, kind: Pass, micro: int, split: bool = False) -> None:
        """One layer's pass: F, B (without its weight gradient when `split`) or W."""
        forward = kind is Pass.F
        if kind is Pass.W:
            self.compute(f"{layer.name}_wgrad_mb{micro}", layer.wgrad_s)
            return
        if forward:
            what, points, dur, hide = "fwd", layer.fwd_points, layer.fwd_s, layer.fwd_hide_s
        else:
            what, points, hide = "bwd", layer.bwd_points, layer.bwd_hide_s
            dur = layer.bwd_s - (layer.wgrad_s if split else 0.0)
        serial = dur - hide
        if serial < -1e-12:
            raise DistscopeError(f"layer {layer.name!r}: {what} overlaps more compute than its {dur} s")
        self.compute(
            f"{layer.name}_{what}_mb{micro}",
            max(serial, 0.0),
            layer.fwd_flops if forward else layer.bwd_flops,
            layer.fwd_bytes if forward else layer.bwd_bytes,
        )
        for k, point in enumerate(points):
            self.comm_point(point, f"{layer.name}_{what}_p{k}_mb{micro}")


def _tag(forward: bool, edge: int, micro: int, spec: StepSpec, ids: int) -> int:
    """Unique per (direction, boundary between model chunks edge and edge+1, micro-batch id)."""
    return ((0 if forward else 1) * spec.pp * spec.vp + edge) * ids + micro


def _orders(spec: StepSpec) -> tuple[list[list[Step]], frozenset[tuple[bool, int, int]], int]:
    """Every stage's order, the (forward, micro, model chunk) passes that run somewhere, and the
    number of micro-batch ids (a PipeDream-2BW window also holds the previous step's)."""
    orders = [stage_order(spec.schedule, stage=s, stages=spec.pp, micro_batches=spec.micro_batches * spec.steps,
                          chunks=spec.vp) for s in range(spec.pp)]
    ran = frozenset((st.forward, st.micro, spec.position(s, st.chunk))
                    for s, order in enumerate(orders) for st in order if st.kind is not Pass.W)
    ids = 1 + max(st.micro for order in orders for st in order)
    return orders, ran, ids


def rank_graph(spec: StepSpec, rank: int, orders: tuple[list[list[Step]], frozenset[tuple[bool, int, int]], int] | None = None
               ) -> tuple[RankGraph, dict[str, tuple[int, ...]]]:
    """One rank's graph for the step, and the process groups it uses."""
    t, c, d, s = spec.coords(rank)
    g = _Graph(spec, rank)
    ex = spec.extras[s] if spec.extras else StageExtras(optimizer_s=spec.optimizer_s, param_gather=spec.param_gather)
    nvirt = spec.pp * spec.vp
    all_orders, ran, ids = orders or _orders(spec)
    order = all_orders[s]
    flush = SCHEDULE_TRAITS[spec.schedule].flush
    chunks_here = 2 if spec.placement is Placement.MIRROR and spec.pp > 1 else spec.vp
    last_grad: dict[tuple[int, int], int] = {}  # (chunk, layer) -> node of its last gradient pass
    mb_pending: dict[tuple[int, int], list[int]] = {}  # (micro-batch, chunk) -> overlapped ZeRO-3 collectives to join
    early_start: int | None = None
    grad_steps = [n for n, st in enumerate(order) if st.kind is Pass.W or (st.kind is Pass.B and not st.split)]
    fwd_steps = [n for n, st in enumerate(order) if st.forward]
    first_of_last_grads = grad_steps[-min(chunks_here, len(grad_steps))]
    last_of_first_fwds = fwd_steps[min(chunks_here, len(fwd_steps)) - 1]
    # per-micro-batch ZeRO work, keyed (micro-batch, chunk) where it is per chunk, else (micro-batch, 0)
    per_chunk = bool(ex.mb_chunk_layers)
    total_layers = sum(ex.mb_chunk_layers) or 1
    mb_ops = ([tuple(_chunk_ops(ops, n_ / total_layers) for ops in (ex.mb_gather, ex.mb_reduce_early, ex.mb_reduce,
                                                                   ex.mb_gather_bwd)) for n_ in ex.mb_chunk_layers]
              if per_chunk else [(ex.mb_gather, ex.mb_reduce_early, ex.mb_reduce, ex.mb_gather_bwd)])

    def mkey(st: Step) -> tuple[int, int]:
        return (st.micro, st.chunk if per_chunk else 0)

    # a micro-batch's gradient reduce-scatters start with its first pass that produces weight gradients
    # (a B pass, or the W pass of a split backward) and end after its last one
    first_fwd: dict[tuple[int, int], int] = {}
    first_bwd: dict[tuple[int, int], int] = {}
    first_grad: dict[tuple[int, int], int] = {}
    last_grad_of: dict[tuple[int, int], int] = {}
    grad_set = set(grad_steps)
    for n, st in enumerate(order):
        if st.forward:
            first_fwd.setdefault(mkey(st), n)
            continue
        if st.kind is Pass.B:
            first_bwd.setdefault(mkey(st), n)
        if n in grad_set:
            first_grad.setdefault(mkey(st), n)
            last_grad_of[mkey(st)] = n
    gather_pending: list[int] = []
    step_done: dict[int, int] = {}  # without a flush: step k -> the node its weight update ends with

    def recv(step: Step) -> None:
        v = spec.position(s, step.chunk)
        src_v = v - 1 if step.forward else v + 1
        if 0 <= src_v < nvirt and spec.pp > 1 and spec.crossing_bytes(min(v, src_v)) and (
                step.forward, step.micro, src_v) in ran:
            src_s, _ = spec.holder(src_v, step.chunk)
            if src_s == s:  # ZB-V's turn: the next chunk is on this rank, and the order already follows it
                return
            what = "fwd" if step.forward else "bwd"
            g.on_chain(
                name=f"recv_{what}_mb{step.micro}_c{step.chunk}",
                kind=NodeKind.COMM_RECV,
                comm_src=spec.rank(t, c, d, src_s),
                comm_tag=_tag(step.forward, min(v, src_v), step.micro, spec, ids),
                tensor_size_bytes=spec.crossing_bytes(min(v, src_v)),
            )

    def send(step: Step) -> None:
        v = spec.position(s, step.chunk)
        dst_v = v + 1 if step.forward else v - 1
        if 0 <= dst_v < nvirt and spec.pp > 1 and spec.crossing_bytes(min(v, dst_v)) and g.chain is not None and (
                step.forward, step.micro, dst_v) in ran:
            dst_s, _ = spec.holder(dst_v, step.chunk)
            if dst_s == s:
                return
            what = "fwd" if step.forward else "bwd"
            kw = dict(
                name=f"send_{what}_mb{step.micro}_c{step.chunk}",
                kind=NodeKind.COMM_SEND,
                comm_dst=spec.rank(t, c, d, dst_s),
                comm_tag=_tag(step.forward, min(v, dst_v), step.micro, spec, ids),
                tensor_size_bytes=spec.crossing_bytes(min(v, dst_v)),
            )
            if spec.pp_overlap:
                g.add((g.chain,), **kw)
            else:
                g.on_chain(**kw)

    def compute(n: int, step: Step) -> None:
        nonlocal early_start
        layers = spec.stages[spec.position(s, step.chunk)]
        if n == first_of_last_grads:  # the final gradient passes (one micro-batch) start here
            early_start = g.chain if g.chain is not None else -1
        idx = range(len(layers)) if step.forward else reversed(range(len(layers)))
        for li in idx:
            g.layer(layers[li], step.kind, step.micro, step.split)
            if step.kind is Pass.W or (step.kind is Pass.B and not step.split):
                assert g.chain is not None
                last_grad[step.chunk, li] = g.chain

    skip = False
    for n, step in enumerate(order):
        if skip:
            skip = False
            continue
        if n == 0 and ex.param_gather and ex.param_gather_overlap and flush:
            for k, op in enumerate(ex.param_gather):
                nid = g.coll(op, f"param_{op.tag}{k}", deps=())
                if nid is not None:
                    gather_pending.append(nid)
        if not flush and step.forward and step.micro % spec.micro_batches == 0 and step.micro // spec.micro_batches >= 2:
            g.joins.append(step_done[step.micro // spec.micro_batches - 2])  # the version two steps back
        partner = order[n + 1] if step.pair and n + 1 < len(order) else None
        # the ZeRO-3 gathers of the passes that start a micro-batch's forward or backward here
        gathers = [(cand, 0 if cand.forward else 3, "" if cand.forward else "b")
                   for cand, k in ((step, n), (partner, n + 1)) if cand is not None and ex.mb_gather
                   and (first_fwd if cand.forward else first_bwd).get(mkey(cand)) == k]
        for cand, which, tag in gathers if ex.mb_gather_overlap else ():  # prefetched: joined after the last grad
            for k, op in enumerate(mb_ops[mkey(cand)[1]][which]):
                name = f"zero3_{op.kind.value.lower()}{k}{tag}_mb{cand.micro}" + (f"_c{cand.chunk}" if per_chunk else "")
                nid = g.coll(op, name, deps=g.here())
                if nid is not None:
                    mb_pending.setdefault(mkey(cand), []).append(nid)
        if step.kind is not Pass.W:
            recv(step)
        if partner is not None:  # DualPipe: an overlapped pair waits for both inputs
            recv(partner)
        for cand, which, tag in () if ex.mb_gather_overlap else gathers:  # blocking: when the pass starts
            for k, op in enumerate(mb_ops[mkey(cand)[1]][which]):
                g.coll(op, f"zero3_{op.kind.value.lower()}{k}{tag}_mb{cand.micro}" + (f"_c{cand.chunk}" if per_chunk else ""))
        for maybe, k in ((step, n), (partner, n + 1)):  # a DualPipe pair may hold a micro-batch's first backward
            if maybe is not None and first_grad.get(mkey(maybe)) == k:
                for j, op in enumerate(mb_ops[mkey(maybe)[1]][1]):
                    name = f"zero3_{op.kind.value.lower()}{j}_early_mb{maybe.micro}" + (f"_c{maybe.chunk}" if per_chunk else "")
                    nid = g.coll(op, name, deps=g.here())
                    if nid is not None:
                        mb_pending.setdefault(mkey(maybe), []).append(nid)
        compute(n, step)
        if n == last_of_first_fwds and gather_pending:
            # hidden behind one micro-batch's forward, whose output waits for it: Megatron's
            # --overlap-param-gather waits in each module's forward pre-hook for its bucket's gather
            # (core/distributed/distributed_data_parallel.py _make_forward_pre_hook), so a gather-bound
            # first forward sends its output late
            g.joins.extend(gather_pending)
            g.on_chain(name="param_gather_wait", kind=NodeKind.COMP, duration_s=0.0)
        if partner is not None:
            compute(n + 1, partner)
            skip = True
        pairs: tuple[tuple[Step | None, int], ...] = ((step, n), (partner, n + 1))
        for maybe, k in pairs:
            if maybe is None:
                continue
            st = maybe
            if st.kind is not Pass.W:
                send(st)
            if last_grad_of.get(mkey(st)) == k:
                g.joins.extend(mb_pending.pop(mkey(st), []))
                for j, op in enumerate(mb_ops[mkey(st)[1]][2]):
                    g.coll(op, f"zero3_{op.kind.value.lower()}{j}_mb{st.micro}" + (f"_c{st.chunk}" if per_chunk else ""))
            if not flush and not st.forward and st.micro % spec.micro_batches == spec.micro_batches - 1:
                step_done[st.micro // spec.micro_batches] = _step_update(g, ex, spec, st.micro // spec.micro_batches)
    end = g.here() + tuple(g.joins)
    g.joins = []
    if not flush:
        return RankGraph(rank=rank, nodes=tuple(g.nodes)), g.groups
    grads: list[int] = []
    for (chunk, li), node in sorted(last_grad.items(), key=lambda kv: kv[1]):
        layer = spec.stages[spec.position(s, chunk)][li]
        for k, op in enumerate(layer.grad_comm):
            nid = g.coll(
                op,
                f"{layer.name}_c{chunk}_grad_{op.tag}{k}",
                deps=(node,) if spec.dp_overlap else end,
            )
            if nid is not None:
                grads.append(nid)
    for k, op in enumerate(ex.grad_early):
        deps = () if early_start in (None, -1) else (early_start,)
        nid = g.coll(op, f"grad_{op.tag}{k}_early", deps=deps)
        if nid is not None:
            grads.append(nid)
    for k, op in enumerate(ex.grad_late):
        nid = g.coll(op, f"grad_{op.tag}{k}", deps=end)
        if nid is not None:
            grads.append(nid)
    local_grads = tuple(grads)
    for k, op in enumerate(ex.tied):  # Megatron finalize_model_grads: grad sync, then embedding all-reduce
        nid = g.coll(op, f"tied_{op.tag}{k}", deps=end + local_grads)
        if nid is not None:
            grads.append(nid)
    tail_gather = ex.param_gather if not ex.param_gather_overlap else ()
    if ex.optimizer_s > 0 or tail_gather or grads:
        g.chain = g.add(end + tuple(grads), name="optimizer_step", kind=NodeKind.COMP, duration_s=ex.optimizer_s)
        for k, op in enumerate(tail_gather):
            g.coll(op, f"param_{op.tag}{k}")
    return RankGraph(rank=rank, nodes=tuple(g.nodes)), g.groups


def _step_update(g: _Graph, ex: StageExtras, spec: StepSpec, k: int) -> int:
    """PipeDream-2BW: step k's gradient reduction, optimizer step and weight gathers once its last
    backward pass ran on this stage. Created here, the optimizer takes the compute stream as soon as
    its gradients are reduced; with DP overlap the collectives run beside the next passes, without
    it the chain waits for them. Returns the node the update ends with."""
    blocking = not spec.dp_overlap
    after: tuple[int, ...] = g.here()
    done: list[int] = []
    for j, op in enumerate(ex.grad_early + ex.grad_late + ex.tied):
        nid = g.coll(op, f"step{k}_grad_{op.tag}{j}", deps=None if blocking else after)
        if nid is not None and not blocking:
            done.append(nid)
    last = g.add(tuple(done) + (g.here() if blocking else after), name=f"optimizer_step{k}", kind=NodeKind.COMP,
                 duration_s=ex.optimizer_s)
    if blocking:
        g.chain = last
    for j, op in enumerate(ex.param_gather):
        nid = g.coll(op, f"step{k}_param_{op.tag}{j}", deps=None if blocking else (last,))
        if nid is not None:
            last = nid
    return last


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
    orders = _orders(spec)
    for r in reps:
        stage = spec.coords(r)[3]
        if stage in templates:
            graphs[r] = _remap(spec, *templates[stage], r, groups)
        else:
            graphs[r], used = rank_graph(spec, r, orders)
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
