"""One captured training step (linked ET+ JSON of one rank, see `trace.link`) -> distscope's RankGraph.

What the capture records (trace/recorder.py): the step is a `distscope::step` record function on the
thread that runs the training loop; every collective or p2p call carries a `distscope::comm` record
function inside its c10d op naming the process group, its ranks, its parallelism label and its
sequence number (CommLogger annotations); every Python `Work.wait()` is a `distscope::wait` record
function naming the call it waits for.

How the step becomes a graph (times from Kineto, in the job's own order):
* Lanes. Every op runs on the lane of the thread Kineto saw it on ("tid:<n>", the linked host tid).
  Only leaf ops take time (a c10d op is a leaf: its issue cost; what it calls is not counted twice).
  Known limit: an op's own time between its callees (CPU aten::addmm's GEMM after its bias copy_) is
  counted in the "(python)" gaps, so the step time is kept but a what-if that scales named ops misses it.
* The training thread is busy from the step's start to its end: between leaf ops it runs Python, so
  each gap becomes a COMP node of the gap's length ("(python)"), except where it waits (below).
  Other threads (gloo's worker, callbacks) are idle between their ops.
* Collectives. Each annotated call becomes a COMM node (kind from the c10d op; bytes = numel x element
  size of the tensor argument nccl-tests counts, read from the host trace's inputs; Chakra's comm_size:
  the per-rank shard for ALL_GATHER, the buffer otherwise), on its process group, after its issuing op.
  Its time comes from the network model, not from the trace. When it completed in the job (used only to
  tell a wait from Python time) is the annotation's start plus the comm log's issue-to-completion time
  of that call (CommLogger: the Work's future callback), else the end of its execution span (gloo's
  `gloo:<op>` record function on the worker thread, the first created after the annotation). Both are
  late bounds: the callback and the span end run after the waiters were woken.
* Data dependencies come from the host trace's tensor storage ids: the first op of a thread that
  touches a collective's buffer after the collective was issued needs the collective (a correct
  program touches it only once the collective completed: DDP's C++ Reducer waits for a bucket inside
  the autograd engine, then copies it into the gradients); an op touching a buffer last written by
  another thread's op needs that op.
* Waits. An explicit `distscope::wait` becomes a dependency of the next op on that COMM node (its
  measured duration is dropped). A gap of the training thread before an op that needs something still
  running when the gap began is a wait: it becomes that dependency, with no time of its own.
  Otherwise the gap is Python time.
* Completion skew (torchrun captures, collectives whose ranks share one host). A collective completes
  on every member within one message of the last arrival: its first completion on any rank of the
  group (comm logs, wall clock; mapped onto this rank's Kineto clock by the median offset between its
  annotations and its logged issue times) is when it was done. A wait of the training thread that ends
  later than that was the host's, not the network's: the thread was not running (4 ranks on 2 cores).
  That lateness becomes a "(completion skew)" node after the "(wait)", on the training thread. It is
  host time, kept by every what-if (--scale-compute leaves it alone), and scaled by the rank's CPU time
  without the profiler over its CPU time with it (the competing threads' work was inflated as its own).
  A recv is done once it was posted and its paired send (the k-th from that peer on that group) was
  done (capture_files.first_completions).
* An op on another thread runs after what it needs, or else after the latest op of the training thread
  that started before it (the op that enqueued it, as TraceLinker.enforce_inter_thread_order does).
* GPU jobs. A device op (kernel, copy, memset: the linker's device nodes) runs on its stream's lane, after
  its stream's previous op and the host op that launched it (or, for a launch between a host op's
  callees, the leaf of that thread that started last before the launcher). Host ops take part in no
  storage dependency with device ops: they enqueue work on device buffers without waiting for it. A
  training-thread gap in which an autograd engine thread (CUDA backward runs on one per device) finished
  work is the thread blocked in backward(): a wait on the engine's last op in the gap, not Python time.
  The step ends with its last op on any lane (the capture synchronizes the device before it stops).
  Known limit: a host op that synchronizes with the device inside the step (`.item()`, a D2H copy) keeps
  its measured duration instead of waiting for the kernels before it.
"""

from __future__ import annotations

import bisect
import dataclasses
import re
import statistics
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from distscope.comm.collective import Collective
from distscope.errors import DistscopeError
from distscope.measure.c10d_ops import C10D_OPS, FUNCTIONAL_OPS, CommOpSpec
from distscope.trace.graph import CollKind, Node, NodeKind, RankGraph
from distscope.trace.link import WAIT_MARK, node_attrs
from distscope.trace.profiler_cost import ProfilerCost, node_tensors

STEP_MARK = "distscope::step"
COMM_MARK = "distscope::comm"
ENGINE_OP = "autograd::engine::evaluate_function"  # the autograd engine's per-node record function
SKEW_NAME = "(completion skew)"  # a wait that ended after the collective's first completion in its group
EXEC_PREFIXES = ("gloo:",)  # record functions of a backend's worker thread that execute a collective
_COLL_OF = {
    Collective.ALL_REDUCE: CollKind.ALL_REDUCE,
    Collective.ALL_GATHER: CollKind.ALL_GATHER,
    Collective.REDUCE_SCATTER: CollKind.REDUCE_SCATTER,
    Collective.ALL_TO_ALL: CollKind.ALL_TO_ALL,
    Collective.BROADCAST: CollKind.BROADCAST,
    Collective.REDUCE: CollKind.REDUCE,
    Collective.GATHER: CollKind.GATHER,
    Collective.SCATTER: CollKind.SCATTER,
    Collective.BARRIER: CollKind.BARRIER,
}
# Element sizes of the dtype names the host trace writes in `Tensor(<dtype>)` (chakra's
# PyTorchNode.get_data_type_size table, plus torch's float8/bool names).
ELEMENT_BYTES = {
    "float": 4, "float32": 4, "double": 8, "float64": 8, "c10::Half": 2, "half": 2, "float16": 2,
    "c10::BFloat16": 2, "bfloat16": 2, "long": 8, "long int": 8, "int64": 8, "int": 4, "int32": 4,
    "short": 2, "int16": 2, "signed char": 1, "int8": 1, "unsigned char": 1, "uint8": 1, "bool": 1,
    "c10::Float8_e4m3fn": 1, "c10::Float8_e5m2": 1, "c10::complex<float>": 8, "c10::complex<double>": 16,
}
_KV = re.compile(r"(\w+)=(\S*)")


@dataclasses.dataclass(frozen=True, kw_only=True)
class CommCallTrace:
    """One collective/p2p call of the captured step, as read from the trace."""

    node_id: int  # its COMM node in the graph
    op: Collective
    group: str
    group_ranks: tuple[int, ...]
    label: str
    seq: int
    bytes: int  # nccl-tests convention (all_gather: output, reduce_scatter: input, else the buffer)
    dtype: str


@dataclasses.dataclass(frozen=True, kw_only=True)
class CapturedRank:
    graph: RankGraph
    groups: dict[str, tuple[int, ...]]
    labels: dict[str, str]
    step_s: float  # the step's measured length on this rank (its distscope::step record function)
    start_us: float = 0.0  # when it began on the Kineto clock (one clock for the ranks of one host)
    calls: tuple[CommCallTrace, ...]
    implicit_waits: int  # waits found from data dependencies (no Python wait call)
    wait_s: float  # time the training thread spent waiting (explicit and implicit), replaced by dependencies


@dataclasses.dataclass
class _Ev:
    """A timed op of the step (times in seconds from the step's start)."""

    nid: int
    name: str
    lane: str
    start: float
    end: float
    reads: frozenset[int] = frozenset()  # storage ids of its tensor inputs and outputs
    writes: frozenset[int] = frozenset()  # storage ids of its tensor outputs
    profiler_s: float = 0.0  # what the profiler added inside its interval (its own callbacks and its callees')
    launcher: int | None = None  # a device op (kernel, copy, memset): the host op that launched it
    engine: bool = False  # a host op on an autograd engine thread (a device's backward thread)


def _marks(name: str) -> dict[str, str]:
    return dict(_KV.findall(name))


def _schema_args(schema: str) -> list[str]:
    """Argument names of an op schema 'ns::op(Type a, Type b=1, ...) -> ...'."""
    inner = schema[schema.find("(") + 1 :]
    depth, buf, args = 0, "", []
    for ch in inner:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            if depth == 0:
                break
            depth -= 1
        if ch == "," and depth == 0:
            args.append(buf)
            buf = ""
        else:
            buf += ch
    if buf.strip():
        args.append(buf)
    return [a.split("=")[0].strip().split()[-1] for a in args if a.strip()]


def _tensor_bytes(value: Any, typ: str, where: str) -> tuple[int, str]:
    """Bytes and dtype of a host-trace tensor value [id, storage, offset, numel, itemsize, device]
    (or a list of them), typed 'Tensor(float)' / 'GenericList[Tensor(float),...]'."""
    m = re.search(r"Tensor\(([^)]*)\)", typ)
    dtype = m.group(1) if m else ""
    if dtype and dtype not in ELEMENT_BYTES:
        raise DistscopeError(f"{where}: tensor dtype {dtype!r} is not one distscope knows the size of")

    def walk(v: Any) -> int:
        if isinstance(v, list) and len(v) == 6 and all(isinstance(x, int) for x in v[:5]):
            return int(v[3]) * int(v[4])
        if isinstance(v, list):
            return sum(walk(x) for x in v)
        return 0

    return walk(value), dtype


def _storages(values: Any) -> frozenset[int]:
    """Storage ids of the tensors in a host-trace value list ([id, storage, offset, numel, itemsize, dev])."""
    out: set[int] = set()

    def walk(v: Any) -> None:
        if isinstance(v, list) and len(v) == 6 and all(isinstance(x, int) for x in v[:5]):
            out.add(int(v[1]))
        elif isinstance(v, list):
            for x in v:
                walk(x)

    walk(values)
    return frozenset(out)


def _issue_bytes(op_node: dict[str, Any], spec: CommOpSpec, group_size: int, where: str) -> tuple[int, str, dict[str, Any]]:
    """(bytes in nccl-tests convention, dtype, argument values by name) of a c10d/functional op node."""
    attrs = node_attrs(op_node)
    names = _schema_args(str(attrs.get("op_schema") or ""))
    inputs = op_node.get("inputs") or {}
    values, types = inputs.get("values") or [], inputs.get("types") or []
    args = {n: values[i] for i, n in enumerate(names) if i < len(values)}
    if spec.counted_arg is None:
        return 0, "", args
    if spec.counted_arg not in names or names.index(spec.counted_arg) >= len(values):
        raise DistscopeError(f"{where}: op_schema has no argument {spec.counted_arg!r} to count bytes from")
    i = names.index(spec.counted_arg)
    nbytes, dtype = _tensor_bytes(values[i], str(types[i] if i < len(types) else ""), where)
    if spec.times_group_size:
        nbytes *= group_size
    return nbytes, dtype, args


def build_rank(
    et_plus: dict[str, Any], rank: int, where: str, completion_s: dict[tuple[str, int], float] | None = None,
    first_done: dict[tuple[str, int], tuple[float, float]] | None = None, cost: ProfilerCost | None = None,
) -> CapturedRank:
    """The step of one rank as a graph (see the module docstring). `completion_s`: issue-to-completion
    seconds of each call by (group, seq), from the comm log; `first_done`: wall-clock (issue on this rank,
    first completion in the group) of its collectives (capture_files.first_completions); `cost`: what
    the profiler added to each op, taken back out (trace/profiler_cost.py)."""
    cost = cost or ProfilerCost()
    nodes = et_plus.get("nodes")
    if not isinstance(nodes, list):
        raise DistscopeError(f"{where}: not an ET+ trace (no 'nodes' list)")
    by_id = {int(n["id"]): n for n in nodes}
    steps = [n for n in nodes if n.get("name") == STEP_MARK and "ts" in n]
    if len(steps) != 1:
        raise DistscopeError(
            f"{where}: {len(steps)} '{STEP_MARK}' record functions with Kineto times; need exactly one "
            "(was the step captured with distscope.trace.capture?)"
        )
    step = steps[0]
    w0, w1 = float(step["ts"]), float(step["ts"]) + float(step["inclusive_dur"])
    main_lane = f"tid:{node_attrs(step).get('tid')}"

    def rel(t_us: float) -> float:
        return (t_us - w0) * 1e-6

    children: dict[int, list[int]] = defaultdict(list)
    for n in nodes:
        p = n.get("ctrl_deps")
        if isinstance(p, int) and p != n["id"]:  # the process root names itself
            children[p].append(int(n["id"]))

    # Collectives: annotation -> issuing op (its parent) -> execution span on the worker thread.
    comm_marks = sorted((n for n in nodes if str(n.get("name", "")).startswith(COMM_MARK + " ") and "ts" in n),
                        key=lambda n: float(n["ts"]))
    exec_spans = sorted(
        (n for n in nodes if str(n.get("name", "")).startswith(EXEC_PREFIXES) and "ts" in n),
        key=lambda n: int(node_attrs(n).get("rf_id") or 0),
    )
    exec_rf = [int(node_attrs(n).get("rf_id") or 0) for n in exec_spans]
    comm_ops = [n for n in nodes if "ts" in n and _spec_of(str(n.get("name", ""))) is not None]
    taken: set[int] = set()
    opaque: set[int] = set()  # subtrees that are not compute: issuing ops' callees, execution spans
    comms: list[dict[str, Any]] = []
    for mark in comm_marks:
        kv = _marks(mark["name"])
        here = f"{where}, node {mark['id']} ({mark['name']!r})"
        op_node = by_id.get(int(mark.get("ctrl_deps", -1)))
        # the host trace nests an op under whatever record function was open on the thread: an earlier
        # collective's async `gloo:<op>` span (created on this thread, run on gloo's) can be the parent;
        # then the calling op is the c10d op on this thread whose interval holds the annotation
        if op_node is None or _spec_of(str(op_node.get("name", ""))) is None:
            op_node = _enclosing_comm_op(mark, comm_ops)
        if op_node is None or "ts" not in op_node:
            raise DistscopeError(f"{here}: its calling c10d op is missing from the trace")
        op_name = str(op_node["name"])
        spec = _spec_of(op_name)
        if spec is None:
            raise DistscopeError(f"{here}: calling op {op_name!r} is not a c10d collective or p2p op")
        try:
            ranks = tuple(int(r) for r in kv["ranks"].split(",") if r)
            seq = int(kv["seq"])
            group = kv["pg"]
        except (KeyError, ValueError):
            raise DistscopeError(f"{here}: annotation lacks pg=/seq=/ranks=") from None
        nbytes, dtype, args = _issue_bytes(op_node, spec, len(ranks), f"{where}, node {op_node['id']} ({op_name!r})")
        rf = int(node_attrs(mark).get("rf_id") or 0)
        span = None
        for j in range(bisect.bisect_right(exec_rf, rf), len(exec_spans)):
            if j not in taken:
                taken.add(j)
                span = exec_spans[j]
                break
        opaque.add(int(op_node["id"]))
        if span is not None:
            opaque.add(int(span["id"]))
        done = (completion_s or {}).get((group, seq))
        if done is not None:
            end_us = float(mark["ts"]) + done * 1e6
        elif span is not None:
            end_us = float(span["ts"]) + float(span["inclusive_dur"])
        else:
            end_us = None
        comms.append(dict(mark=mark, op_node=op_node, spec=spec, ranks=ranks, seq=seq, group=group,
                          label=kv.get("dim", ""), nbytes=nbytes, dtype=dtype, args=args, span=span, end_us=end_us))
    waits = {int(n["id"]): _marks(n["name"]) for n in nodes if str(n.get("name", "")).startswith(WAIT_MARK + " ")}
    _first_done_on_this_clock(comms, first_done or {})

    # Leaf ops inside the step window, per lane (callees of opaque ops are skipped).
    def lane_of(n: dict[str, Any]) -> str:
        if "cat" in n:
            return f"stream:{n.get('stream', 0)}"
        return f"tid:{node_attrs(n).get('tid')}"

    leaves: list[_Ev] = []
    # the autograd engine's device threads (CUDA backward runs there while the training thread blocks)
    engine_lanes = {lane_of(n) for n in nodes if "ts" in n and "cat" not in n
                    and str(n.get("name", "")).startswith(ENGINE_OP)} - {main_lane}
    eps = 1.0  # us: Kineto rounds to the microsecond in places
    # Profiler cost outside the ops' intervals, by lane: (time, seconds) at op boundaries, in the gaps
    boundaries: dict[str, list[tuple[float, float]]] = defaultdict(list)
    tiny = 1e-9

    def contained(c: int, n: dict[str, Any]) -> bool:
        """Whether callee c lies inside n's time interval (the host trace nests an op under the op that
        was open when it started on that thread; Kineto's times win where they disagree)."""
        cn = by_id[c]
        return "ts" not in cn or "ts" not in n or float(cn["ts"]) < float(n["ts"]) + float(n["inclusive_dur"]) - eps

    def callees_cost(callees: Iterable[int], lane: str) -> float:
        """Profiler cost of timed callees (and theirs) that run on `lane`: inside a leaf's interval."""
        total = 0.0
        for c in callees:
            cn = by_id[c]
            if "ts" in cn and "cat" not in cn and lane_of(cn) == lane:
                total += cost.total(node_tensors(cn), launches(c))
            total += callees_cost(children.get(c, ()), lane)
        return total

    def launches(nid: int) -> int:
        """Device ops (kernels, copies, memsets) the op launched itself (the linker's ctrl_deps)."""
        return sum(1 for c in children.get(nid, ()) if "cat" in by_id[c])

    def visit(nid: int) -> None:
        n = by_id[nid]
        timed = "ts" in n and n.get("name") != STEP_MARK
        inside = timed and float(n["ts"]) >= w0 - eps and float(n["ts"]) + float(n["inclusive_dur"]) <= w1 + eps
        kids = children.get(nid, ())
        t0, t1 = (rel(float(n["ts"])), rel(float(n["ts"]) + float(n["inclusive_dur"]))) if timed else (0.0, 0.0)
        cpu = timed and "cat" not in n
        lane = lane_of(n) if timed else ""
        # a device op the host op launched runs on its stream's lane, whenever it ran: it never makes its
        # launcher a parent (a GPU idle at the launch runs it inside the launcher's interval)
        host_kids = [c for c in kids if "cat" not in by_id[c]]
        if inside and (nid in opaque or nid in waits or not any("ts" in by_id[c] and contained(c, n) for c in host_kids)):
            if not (nid in opaque and str(n["name"]).startswith(EXEC_PREFIXES)):
                outs = _storages((n.get("outputs") or {}).get("values"))
                added = 0.0
                if cpu:
                    k = node_tensors(n)
                    added = cost.inside(k, launches(nid)) + callees_cost((c for c in kids if contained(c, n)), lane)
                    out_s = cost.outside(k, launches(nid))
                    boundaries[lane] += [(t0 - tiny, out_s / 2), (t1 + tiny, out_s / 2)]
                parent = n.get("ctrl_deps")
                leaves.append(_Ev(nid, str(n["name"]), lane, t0, t1,
                                  reads=outs | _storages((n.get("inputs") or {}).get("values")), writes=outs,
                                  profiler_s=added, launcher=parent if not cpu and isinstance(parent, int) else None,
                                  engine=lane in engine_lanes))
            kids = [c for c in kids if "cat" in by_id[c] or not contained(c, n)]
        elif inside and cpu:  # an op with callees: its callbacks run in the gaps around its first and last callee
            k = node_tensors(n)
            out_s = cost.outside(k, launches(nid))
            boundaries[lane] += [(t0 - tiny, cost.inside(k, launches(nid)) + out_s / 2), (t1 + tiny, out_s / 2)]
        for c in kids:
            visit(c)

    import sys

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 100_000))
    try:
        for n in nodes:
            p = n.get("ctrl_deps")
            if not isinstance(p, int) or p not in by_id or p == n["id"]:
                visit(int(n["id"]))
    finally:
        sys.setrecursionlimit(limit)
    leaves = _launchers_as_leaves(leaves, by_id, lane_of, rel)
    gaps = _GapCost(boundaries)
    return dataclasses.replace(_assemble(rank, where, leaves, comms, waits, main_lane, (w1 - w0) * 1e-6, rel, gaps),
                               start_us=w0)


def _launchers_as_leaves(leaves: list[_Ev], by_id: dict[int, dict[str, Any]], lane_of: Any, rel: Any) -> list[_Ev]:
    """Each device op's launcher as a leaf of the graph: the launching op itself when it is a leaf, else
    the leaf of its thread that started last before it did (the launch came between its callees; a
    later leaf could be a reader of the device op's output, and a cycle)."""
    ids = {e.nid for e in leaves}
    by_lane: dict[str, list[_Ev]] = defaultdict(list)
    for e in leaves:
        if e.launcher is None:
            by_lane[e.lane].append(e)
    for evs in by_lane.values():
        evs.sort(key=lambda e: e.start)
    starts = {lane: [e.start for e in evs] for lane, evs in by_lane.items()}
    out = []
    for e in leaves:
        if e.launcher is not None and e.launcher not in ids:
            op = by_id.get(e.launcher, {})
            lane = lane_of(op) if "ts" in op else ""
            j = bisect.bisect_right(starts.get(lane, []), rel(float(op.get("ts", 0.0)))) - 1
            e = dataclasses.replace(e, launcher=by_lane[lane][j].nid if j >= 0 else None)
        out.append(e)
    return out


class _GapCost:
    """Profiler cost that fell in the gaps between a lane's ops (seconds between two times), and what is
    taken out of each node of a lane in order: a node gives up its own share and any earlier share a
    shorter node could not give (a lane's nodes run in series, so the total comes out where it went in)."""

    def __init__(self, boundaries: dict[str, list[tuple[float, float]]]) -> None:
        self._debt: dict[str, float] = defaultdict(float)
        self.taken = 0.0  # seconds taken out so far, all lanes
        self._t: dict[str, list[float]] = {}
        self._cum: dict[str, list[float]] = {}
        for lane, pts in boundaries.items():
            pts.sort()
            self._t[lane] = [t for t, _ in pts]
            acc, cum = 0.0, [0.0]
            for _, c in pts:
                acc += c
                cum.append(acc)
            self._cum[lane] = cum

    def take(self, lane: str, dur: float, share: float) -> float:
        """The node's duration without the profiler: `dur` less its `share` and the lane's carried debt."""
        owed = self._debt[lane] + share
        left = max(0.0, dur - owed)
        self._debt[lane] = owed - (max(0.0, dur) - left)
        self.taken += max(0.0, dur) - left
        return left

    def between(self, lane: str, t0: float, t1: float) -> float:
        ts = self._t.get(lane)
        if not ts:
            return 0.0
        cum = self._cum[lane]
        return cum[bisect.bisect_left(ts, t1)] - cum[bisect.bisect_left(ts, t0)]


def _assemble(
    rank: int,
    where: str,
    leaves: list[_Ev],
    comms: list[dict[str, Any]],
    waits: dict[int, dict[str, str]],
    main_lane: str,
    step_s: float,
    rel: Any,
    gaps: _GapCost,
) -> CapturedRank:
    out: list[Node] = []

    def add(**kw: Any) -> int:
        nid = len(out)
        out.append(Node(id=nid, **kw))
        return nid

    by_lane: dict[str, list[_Ev]] = defaultdict(list)
    for ev in leaves:
        by_lane[ev.lane].append(ev)
    for evs in by_lane.values():
        evs.sort(key=lambda e: (e.start, e.end))
    comm_of_op = {int(c["op_node"]["id"]): c for c in comms}
    comm_by_key = {(c["group"], c["seq"]): c for c in comms}
    ends: dict[Any, float] = {("comm", id(c)): rel(c["end_us"]) for c in comms if c["end_us"] is not None}
    ends.update({("ev", e.nid): e.end for e in leaves})
    cross = _cross_lane_deps(leaves, comm_of_op)
    graph_id: dict[Any, int] = {}
    pending: list[tuple[int, Any]] = []  # (node index, key) dependencies resolved after all nodes exist
    calls: list[CommCallTrace] = []
    implicit = 0
    wait_s = 0.0

    def emit_comm(c: dict[str, Any], issue_id: int) -> None:
        spec: CommOpSpec = c["spec"]
        ranks: tuple[int, ...] = c["ranks"]
        op = spec.op
        name = f"{op.value} pg={c['group']} seq={c['seq']}"
        if op in (Collective.SEND, Collective.RECV):
            names = ("dst", "dstRank") if op is Collective.SEND else ("src", "srcRank")  # group-local rank
            local = next((c["args"][k] for k in names if k in c["args"]), None)
            tag = c["args"].get("tag", 0)
            if not isinstance(local, int) or not 0 <= local < len(ranks):
                raise DistscopeError(f"{where}, node {c['op_node']['id']}: peer rank {local!r} is not in group {ranks}")
            peer = ranks[local]
            kw: dict[str, Any] = (
                dict(kind=NodeKind.COMM_SEND, comm_dst=peer) if op is Collective.SEND
                else dict(kind=NodeKind.COMM_RECV, comm_src=peer)
            )
            nid = add(name=name, data_deps=(issue_id,), tensor_size_bytes=c["nbytes"], comm_size_bytes=c["nbytes"],
                      comm_tag=int(tag or 0), pg_name=c["group"], comm_dtype=c["dtype"], **kw)
        else:
            kind = _COLL_OF.get(op)
            if kind is None:
                raise DistscopeError(f"{where}, node {c['op_node']['id']}: {op.value} has no Chakra collective type")
            size = c["nbytes"] // len(ranks) if kind is CollKind.ALL_GATHER else c["nbytes"]
            nid = add(name=name, kind=NodeKind.COMM_COLL, data_deps=(issue_id,), comm_kind=kind,
                      comm_size_bytes=size, pg_name=c["group"], comm_dtype=c["dtype"])
        graph_id[("comm", id(c))] = nid
        calls.append(CommCallTrace(node_id=nid, op=op, group=c["group"], group_ranks=ranks, label=c["label"],
                                   seq=c["seq"], bytes=c["nbytes"], dtype=c["dtype"]))

    prev: int | None = None

    def chain(name: str, dur: float, lane: str, extra: list[Any]) -> int:
        nonlocal prev
        nid = add(name=name, kind=NodeKind.COMP, duration_s=max(0.0, dur), lane=lane, is_cpu_op=True,
                  data_deps=() if prev is None else (prev,))
        pending.extend((nid, k) for k in extra)
        prev = nid
        return nid

    # The training thread: leaves and the Python time between them; a gap before an op that needs a
    # collective (or another thread's op) still running when the gap began is a wait, not Python time.
    main = by_lane.get(main_lane, [])
    t = 0.0
    carry: list[Any] = []  # explicit waits: dependencies of the next node
    comm_of_key = {("comm", id(c)): c for c in comms}

    def waited(keys: list[Any], began: float, resumed: float) -> None:
        """A wait from `began` to `resumed` on `keys`: a dependency, and the part of it after the
        collectives' first completion in their groups as completion skew (module docstring)."""
        nonlocal wait_s
        carry.extend(keys)
        done = [rel(comm_of_key[k]["first_done_us"]) for k in keys
                if k in comm_of_key and comm_of_key[k].get("first_done_us") is not None]
        late = min(resumed - began, resumed - max(done)) if done else 0.0
        wait_s += resumed - began - max(late, 0.0)
        if late > 0:
            chain("(wait)", 0.0, main_lane, _take(carry))
            chain(SKEW_NAME, late, main_lane, [])

    # A training-thread gap in which an autograd engine thread finished work was the thread blocked in
    # backward(): a wait on the engine's last op in the gap, not Python time.
    engine = sorted((e for e in leaves if e.engine), key=lambda e: e.end)
    engine_ends = [e.end for e in engine]

    def engine_wait(t0: float, t1: float) -> list[Any]:
        j = bisect.bisect_right(engine_ends, t1) - 1
        return [("ev", engine[j].nid)] if j >= 0 and engine_ends[j] > t0 else []

    stream: list[_Ev | None] = [*main, None]
    for item in stream:
        start = step_s if item is None else item.start
        needs = [] if item is None else cross.get(item.nid, [])
        if start > t:
            pending_keys = [k for k in needs if ends.get(k, start) > t] + engine_wait(t, start)
            if pending_keys:
                implicit += 1
                waited(pending_keys, t, start)
                if carry:
                    chain("(wait)", 0.0, main_lane, _take(carry))
            else:
                chain("(python)", gaps.take(main_lane, start - t, gaps.between(main_lane, t, start)), main_lane,
                      _take(carry))
        if item is None:
            break
        if item.nid in waits:
            kv = waits[item.nid]
            c = comm_by_key.get((kv.get("pg", ""), int(kv.get("seq", "-1"))))
            waited([("comm", id(c))] if c is not None else [], max(item.start, t), item.end)
            t = max(t, item.end)
            continue
        nid = chain(item.name, gaps.take(main_lane, item.end - max(item.start, t), item.profiler_s), main_lane,
                    _take(carry) + needs)
        graph_id[("ev", item.nid)] = nid
        if item.nid in comm_of_op:
            emit_comm(comm_of_op[item.nid], nid)
        t = max(t, item.end)
    if carry:
        chain("(wait)", 0.0, main_lane, _take(carry))

    # Other threads: their ops in order, after what they need, or else the op that enqueued them.
    main_starts = [(e.start, e.nid) for e in main if ("ev", e.nid) in graph_id]
    main_start_ts = [st for st, _ in main_starts]
    for lane, evs in sorted(by_lane.items()):
        if lane == main_lane:
            continue
        prev = None
        for ev in evs:
            needs = list(cross.get(ev.nid, []))
            if ev.launcher is not None:  # a device op runs after its launch (and its stream's previous op)
                needs.append(("ev", ev.launcher))
            elif not needs:
                j = bisect.bisect_right(main_start_ts, ev.start) - 1
                needs = [("ev", main_starts[j][1])] if j >= 0 else []
            nid = chain(ev.name, gaps.take(lane, ev.end - ev.start, ev.profiler_s), lane, needs)
            graph_id[("ev", ev.nid)] = nid
            if ev.nid in comm_of_op:
                emit_comm(comm_of_op[ev.nid], nid)
    missing = [c for c in comms if ("comm", id(c)) not in graph_id]
    if missing:
        c = missing[0]
        raise DistscopeError(
            f"{where}, node {c['op_node']['id']} ({c['op_node']['name']!r}): collective issued outside the "
            "captured step's ops (its op was not a leaf inside the step window)"
        )
    extra: dict[int, list[int]] = defaultdict(list)
    for nid, key in pending:
        dep = graph_id.get(key)
        if dep is not None and dep != nid:
            extra[nid].append(dep)
    # Completion skew is host lateness measured while the profiler ran: the competing threads' work
    # that kept this one off the CPU was inflated by the profiler as this rank's own was, so the
    # lateness is scaled by this rank's CPU time without the profiler over its CPU time with it.
    busy = sum(n.duration_s for n in out if n.kind is NodeKind.COMP and n.lane == main_lane and n.name != SKEW_NAME)
    lean = busy / (busy + gaps.taken) if busy + gaps.taken > 0 else 1.0
    for n in out:
        if extra.get(n.id):
            out[n.id] = n = dataclasses.replace(n, data_deps=tuple(dict.fromkeys((*n.data_deps, *extra[n.id]))))
        if n.name == SKEW_NAME:
            out[n.id] = dataclasses.replace(n, duration_s=n.duration_s * lean)
    return CapturedRank(
        graph=RankGraph(rank=rank, nodes=tuple(out)),
        groups={c.group: c.group_ranks for c in calls},
        labels={c.group: c.label for c in calls if c.label},
        step_s=step_s,
        calls=tuple(calls),
        implicit_waits=implicit,
        wait_s=wait_s,
    )


def _cross_lane_deps(leaves: list[_Ev], comm_of_op: dict[int, dict[str, Any]]) -> dict[int, list[Any]]:
    """Data dependencies from the host trace's tensor storage ids, in time order: the first op on a lane
    that touches a buffer of a collective issued earlier needs that collective (a correct program
    touches it only after the collective completed), and an op that touches a buffer last written by an
    op of another lane needs that op. Device ops (kernels, copies) take no part: see below."""
    inflight: dict[int, list[Any]] = defaultdict(list)  # storage -> comms issued on it
    writer: dict[int, _Ev] = {}
    used: set[tuple[Any, str]] = set()
    out: dict[int, list[Any]] = defaultdict(list)
    for ev in sorted(leaves, key=lambda e: (e.start, e.end)):
        if ev.launcher is not None:
            # a device op runs after its launch, in its stream's order; a host op enqueues work on device
            # buffers without waiting for them (only a synchronizing call does, and it is timed as such)
            continue
        if ev.nid in comm_of_op:
            key = ("comm", id(comm_of_op[ev.nid]))
            for s in ev.reads:
                inflight[s].append(key)
            continue
        for s in ev.reads:
            for key in inflight.get(s, ()):
                if (key, ev.lane) not in used:
                    used.add((key, ev.lane))
                    out[ev.nid].append(key)
            w = writer.get(s)
            if w is not None and w.lane != ev.lane and w.end <= ev.start:
                dep = ("ev", w.nid)
                if (dep, ev.lane) not in used:
                    used.add((dep, ev.lane))
                    out[ev.nid].append(dep)
        for s in ev.writes:
            writer[s] = ev
    return out


def _first_done_on_this_clock(comms: list[dict[str, Any]], first_done: dict[tuple[str, int], tuple[float, float]]) -> None:
    """Sets c["first_done_us"]: the collective's first completion in its group (wall clock) on this
    rank's Kineto clock, offset by the median of (logged issue - annotation start) over its calls."""
    known = [(c, first_done[(c["group"], c["seq"])]) for c in comms if (c["group"], c["seq"]) in first_done]
    if not known:
        return
    offset = statistics.median(issued * 1e6 - float(c["mark"]["ts"]) for c, (issued, _) in known)
    for c, (_, done) in known:
        c["first_done_us"] = done * 1e6 - offset


def _spec_of(op_name: str) -> CommOpSpec | None:
    ns, _, short = op_name.partition("::")
    return (FUNCTIONAL_OPS if ns == "_c10d_functional" else C10D_OPS).get(short)


def _enclosing_comm_op(mark: dict[str, Any], comm_ops: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The latest-starting c10d op on the annotation's thread whose interval holds its start."""
    tid, ts = node_attrs(mark).get("tid"), float(mark["ts"])
    holding = [op for op in comm_ops if node_attrs(op).get("tid") == tid
               and float(op["ts"]) <= ts <= float(op["ts"]) + float(op["inclusive_dur"])]
    return max(holding, key=lambda op: float(op["ts"])) if holding else None


def _take(items: list[Any]) -> list[Any]:
    out = list(items)
    items.clear()
    return out
