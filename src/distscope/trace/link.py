"""Link a PyTorch host execution trace (ExecutionTraceObserver JSON) with the Kineto trace of the same
run into "ET+" JSON: the format mlc-chakra's `chakra_trace_link` writes and `chakra_converter PyTorch`
reads (chakra/src/trace_link/trace_linker.py, mlc-chakra 1.0.0).

Why distscope links them itself: `chakra_trace_link` from PyPI cannot run, it imports `et_replay`
(facebookresearch/param), which is not on PyPI; HTA's ET correlation (hta/common/execution_trace.py)
imports the same package. The join itself is small and is done here, torch-free, following the
linker's rules:
* a host op and a Kineto CPU event are the same call when the host op's `rf_id` attribute equals the
  event's "Record function id"; the op gets the event's `ts`, `inclusive_dur` (its `dur`) and
  `exclusive_dur` (its `dur` minus its directly nested events on the same thread);
* `inter_thread_dep`: the first op of a thread, and the first op after an idle gap longer than 1 ms on
  its thread, depends on the latest CPU op of another thread that started before it
  (TraceLinker.enforce_inter_thread_order, threshold 1000 us);
* device kernels/copies are found through their CUDA runtime launch (same "correlation") and the
  innermost CPU op enclosing that launch on its thread; each becomes a node with `cat`, `stream` and
  `ctrl_deps` = that op (TraceLinker.process_dependent_gpu_ops).
One thing the PyPI linker does not do: the host trace records an asynchronous record function
(gloo's `gloo:all_reduce`, which runs on gloo's worker thread) on the thread that created it. The
Kineto event says where it ran, so such ops (with their callees) move under a thread root of their own
with that thread's `tid`; the converter then chains them apart from the main thread instead of in
series with it. Ops of the creating thread that the host trace nested under such a span (it stays
"open" there: the next collective's c10d op) stay on their thread, under the op open before the span.
Deviation: `inter_thread_dep` is set on the op that starts a group, not repeated on every op of the
group (the converter chains the rest behind it anyway).
"""

from __future__ import annotations

import bisect
from collections import Counter, defaultdict
from typing import Any

from distscope.errors import DistscopeError
from distscope.trace.chakra_io import PYTORCH_ET_SCHEMAS

THREAD_ROOT = "[pytorch|profiler|execution_trace|thread]"
PROCESS_ROOT = "[pytorch|profiler|execution_trace|process]"
INTER_THREAD_GAP_US = 1000.0  # TraceLinker.enforce_inter_thread_order(threshold=1000)
WAIT_MARK = "distscope::wait"  # a Python Work.wait() / wait_tensor (measure/logger.py annotations)
_HOST_CATS = frozenset({"cpu_op", "user_annotation"})
_DEVICE_CATS = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})
_RUNTIME_CATS = frozenset({"cuda_runtime", "cuda_driver"})


def node_attrs(node: dict[str, Any]) -> dict[str, Any]:
    """A host-trace node's `attrs` list as a dict (name -> value)."""
    return {a["name"]: a.get("value") for a in node.get("attrs", ()) if isinstance(a, dict) and "name" in a}


def _set_attr(node: dict[str, Any], name: str, value: Any, typ: str) -> None:
    for a in node.setdefault("attrs", []):
        if a.get("name") == name:
            a["value"] = value
            return
    node["attrs"].append({"name": name, "type": typ, "value": value})


def check_host_trace(host: Any, where: str) -> list[dict[str, Any]]:
    """The host trace's nodes; one-line errors for a wrong file or a torch version the converter cannot read."""
    if not isinstance(host, dict) or not isinstance(host.get("nodes"), list):
        raise DistscopeError(f"host trace {where}: not a PyTorch execution trace (no 'nodes' list)")
    schema = host.get("schema")
    if schema not in PYTORCH_ET_SCHEMAS:
        raise DistscopeError(
            f"host trace {where}: schema={schema!r} comes from a torch version mlc-chakra cannot convert "
            f"(reads {', '.join(PYTORCH_ET_SCHEMAS)})"
        )
    for node in host["nodes"]:
        if not isinstance(node, dict) or "id" not in node or "name" not in node:
            raise DistscopeError(f"host trace {where}: node {str(node)[:60]!r} has no id/name")
    return host["nodes"]


def entered_in_window(nodes: list[dict[str, Any]], first_rf: int) -> list[dict[str, Any]]:
    """The host trace's nodes less those of record functions entered before profiling began (record
    function id below `first_rf`, the Kineto window's first). Such a node is written when its function
    exits under a newly registered observer: a capture of several steps registers one per step from
    inside Optimizer.step (its post-hook), and that Optimizer.step exits under the next step's observer
    carrying the node id the previous one gave it, which can equal an id of this trace (mlc-chakra's
    converter then recursed without end). The observer's own records ("## process_group:init ##", made at
    registration) and the thread and process roots (rf_id 0) stay."""
    if not first_rf:
        return nodes
    return [n for n in nodes if str(n["name"]).startswith("## ") or not 0 < int(node_attrs(n).get("rf_id") or 0) < first_rf]


def kineto_events(kineto: Any, where: str) -> list[dict[str, Any]]:
    """Complete ("X") events of a Kineto trace."""
    if not isinstance(kineto, dict) or not isinstance(kineto.get("traceEvents"), list):
        raise DistscopeError(f"Kineto trace {where}: not a Kineto/Chrome trace (no 'traceEvents' list)")
    out = []
    for e in kineto["traceEvents"]:
        if isinstance(e, dict) and e.get("ph") == "X" and "ts" in e and "dur" in e:
            out.append(e)
    return out


def exclusive_durations(events: list[dict[str, Any]]) -> dict[int, float]:
    """id(event) -> its dur minus the dur of the events directly nested in it on its thread."""
    excl: dict[int, float] = {}
    by_tid: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for e in events:
        by_tid[e.get("tid")].append(e)
    for evs in by_tid.values():
        evs.sort(key=lambda e: (float(e["ts"]), -float(e["dur"])))
        stack: list[dict[str, Any]] = []
        for e in evs:
            ts = float(e["ts"])
            while stack and float(stack[-1]["ts"]) + float(stack[-1]["dur"]) <= ts:
                stack.pop()
            excl[id(e)] = float(e["dur"])
            if stack:
                excl[id(stack[-1])] -= min(float(e["dur"]), float(stack[-1]["ts"]) + float(stack[-1]["dur"]) - ts)
            stack.append(e)
    return {k: max(0.0, v) for k, v in excl.items()}


def _enclosing(sorted_evs: list[dict[str, Any]], starts: list[float], ts: float) -> dict[str, Any] | None:
    """The innermost event of one thread that contains time ts."""
    best = None
    i = bisect.bisect_right(starts, ts)
    for e in reversed(sorted_evs[max(0, i - 64) : i]):
        if float(e["ts"]) + float(e["dur"]) >= ts and (best is None or float(e["dur"]) < float(best["dur"])):
            best = e
    return best


def link(host: Any, kineto: Any, *, host_where: str = "", kineto_where: str = "") -> dict[str, Any]:
    """ET+ JSON for one rank (a new dict; the inputs are not modified)."""
    import copy

    events = kineto_events(kineto, kineto_where)
    cpu = [e for e in events if e.get("cat") in _HOST_CATS and "Record function id" in e.get("args", {})]
    by_rf = {int(e["args"]["Record function id"]): e for e in cpu}
    nodes = copy.deepcopy(entered_in_window(check_host_trace(host, host_where), min(by_rf, default=0)))
    excl = exclusive_durations([e for e in events if e.get("cat") in _HOST_CATS])
    by_id = {int(n["id"]): n for n in nodes}
    next_id = max(by_id, default=0) + 1
    ev_of: dict[int, dict[str, Any]] = {}
    for n in nodes:
        rf = node_attrs(n).get("rf_id")
        e = by_rf.get(int(rf)) if rf is not None else None
        if e is None or n["name"] in (THREAD_ROOT, PROCESS_ROOT):
            continue
        ev_of[int(n["id"])] = e
        n["ts"] = float(e["ts"])
        n["inclusive_dur"] = float(e["dur"])
        n["exclusive_dur"] = excl.get(id(e), float(e["dur"]))
        n["inter_thread_dep"] = None

    # Threads: the Kineto thread that runs most ops recorded under a host tid is that tid's home.
    host_tid = {nid: node_attrs(by_id[nid]).get("tid") for nid in ev_of}
    votes: dict[Any, Counter[Any]] = defaultdict(Counter)
    for nid, e in ev_of.items():
        votes[host_tid[nid]][e.get("tid")] += 1
    home = {t: c.most_common(1)[0][0] for t, c in votes.items()}
    tid_of_kineto = {k: t for t, k in home.items()}
    used = [int(t) for t in home if isinstance(t, int)]
    next_tid = max(used, default=0) + 1
    process_root = next((int(n["id"]) for n in nodes if n["name"] == PROCESS_ROOT), None)
    roots: dict[int, int] = {}  # host tid -> its thread root id
    template: dict[str, Any] | None = None
    for n in nodes:
        if n["name"] == THREAD_ROOT:
            roots.setdefault(int(node_attrs(n).get("tid") or 0), int(n["id"]))
            template = template or n
            if process_root is None:
                process_root = n.get("ctrl_deps")
    new_nodes: list[dict[str, Any]] = []
    first_parent = {nid: by_id[nid].get("ctrl_deps") for nid in ev_of}
    moved = {nid for nid, e in ev_of.items() if home.get(host_tid[nid]) != e.get("tid")}
    for nid, e in sorted(ev_of.items()):
        k = e.get("tid")
        if nid not in moved:
            p = first_parent[nid]
            while p in moved:  # nested under an async op that ran elsewhere: under the op open before it
                p = first_parent[p]
            by_id[nid]["ctrl_deps"] = p
            continue
        if k not in tid_of_kineto:
            tid_of_kineto[k] = next_tid
            next_tid += 1
        t = tid_of_kineto[k]
        n = by_id[nid]
        _set_attr(n, "tid", t, "uint64")
        parent = by_id.get(n.get("ctrl_deps"))  # type: ignore[arg-type]
        if parent is not None and ev_of.get(int(parent["id"]), {}).get("tid") == k:
            continue  # a callee: it moves along with its caller
        if t not in roots:
            root = copy.deepcopy(template) if template is not None else _empty_root()
            root.update(id=next_id, name=THREAD_ROOT, ctrl_deps=process_root)
            _set_attr(root, "tid", t, "uint64")
            roots[t] = next_id
            next_id += 1
            new_nodes.append(root)
        n["ctrl_deps"] = roots[t]

    _inter_thread_deps(ev_of, by_id, _in_waits(by_id))
    new_nodes += _device_nodes(events, cpu, ev_of, by_id, next_id)
    out = {k: v for k, v in host.items() if k != "nodes"}
    out["nodes"] = nodes + new_nodes
    return out


def _empty_root() -> dict[str, Any]:
    """A thread root with the attributes chakra's converter reads from every node."""
    empty: dict[str, list[Any]] = {"values": [], "shapes": [], "types": [], "strides": []}
    attrs = [("rf_id", "uint64", 0), ("fw_parent", "uint64", 0), ("seq_id", "int64", -1), ("scope", "uint64", 7),
             ("tid", "uint64", 0), ("fw_tid", "uint64", 0), ("op_schema", "string", "")]
    return {"inputs": dict(empty), "outputs": dict(empty),
            "attrs": [{"name": n, "type": t, "value": v} for n, t, v in attrs]}


def _in_waits(by_id: dict[int, dict[str, Any]]) -> set[int]:
    """Ids of wait record functions and every op nested in one (by the host trace's ctrl_deps)."""
    memo: dict[int, bool] = {}
    for nid in by_id:
        chain, p, found = [], nid, False
        while p in by_id and p not in memo:
            chain.append(p)
            if str(by_id[p].get("name", "")).startswith(WAIT_MARK + " "):
                found = True
                break
            parent = by_id[p].get("ctrl_deps")
            p = parent if isinstance(parent, int) and parent != p else -1
        found = found or memo.get(p, False)
        memo.update(dict.fromkeys(chain, found))
    return {k for k, v in memo.items() if v}


def _inter_thread_deps(ev_of: dict[int, dict[str, Any]], by_id: dict[int, dict[str, Any]], waits: set[int]) -> None:
    """`inter_thread_dep` as TraceLinker sets it, except that it never names a wait or an op inside one:
    a wait ends only once the work it waits for (often the very op on the other thread) is done, so
    that dependency would be a cycle (aten::view -> distscope::wait -> gloo:all_gather -> the wait)."""
    per_thread: dict[Any, list[int]] = defaultdict(list)
    for nid, e in ev_of.items():
        per_thread[e.get("tid")].append(nid)
    starts = sorted((float(e["ts"]), nid) for nid, e in ev_of.items())
    start_ts = [s for s, _ in starts]
    for tid, nids in per_thread.items():
        nids.sort(key=lambda i: (float(ev_of[i]["ts"]), -float(ev_of[i]["dur"])))
        prev_end = None
        for nid in nids:
            e = ev_of[nid]
            ts = float(e["ts"])
            if prev_end is None or ts - prev_end > INTER_THREAD_GAP_US:
                j = bisect.bisect_left(start_ts, ts) - 1
                while j >= 0 and (ev_of[starts[j][1]].get("tid") == tid or starts[j][1] in waits):
                    j -= 1
                if j >= 0:
                    by_id[nid]["inter_thread_dep"] = starts[j][1]
            end = ts + float(e["dur"])
            prev_end = end if prev_end is None else max(prev_end, end)


def _device_nodes(
    events: list[dict[str, Any]],
    cpu: list[dict[str, Any]],
    ev_of: dict[int, dict[str, Any]],
    by_id: dict[int, dict[str, Any]],
    next_id: int,
) -> list[dict[str, Any]]:
    """One node per device kernel/copy/set, a callee of the CPU op that launched it."""
    launch = {
        e["args"]["correlation"]: e
        for e in events
        if e.get("cat") in _RUNTIME_CATS and "correlation" in e.get("args", {})
    }
    host_of_event = {id(e): nid for nid, e in ev_of.items()}
    by_tid: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for e in cpu:
        if id(e) in host_of_event:
            by_tid[e.get("tid")].append(e)
    starts = {}
    for tid, evs in by_tid.items():
        evs.sort(key=lambda e: float(e["ts"]))
        starts[tid] = [float(e["ts"]) for e in evs]
    out = []
    for k in sorted((e for e in events if e.get("cat") in _DEVICE_CATS), key=lambda e: float(e["ts"])):
        rt = launch.get(k.get("args", {}).get("correlation"))
        if rt is None or rt.get("tid") not in by_tid:
            continue
        parent_ev = _enclosing(by_tid[rt["tid"]], starts[rt["tid"]], float(rt["ts"]))
        if parent_ev is None:
            continue
        parent = by_id[host_of_event[id(parent_ev)]]
        node = {
            "id": next_id,
            "name": k["name"],
            "ctrl_deps": parent["id"],
            "inputs": parent.get("inputs", {}),
            "outputs": parent.get("outputs", {}),
            "attrs": parent.get("attrs", []),
            "cat": k["cat"],
            "ph": k["ph"],
            "ts": float(k["ts"]),
            "inclusive_dur": float(k["dur"]),
            "exclusive_dur": float(k["dur"]),
            "stream": int(k.get("args", {}).get("stream", 0)),
        }
        pg = k.get("args", {}).get("Process Group Name")
        if pg is not None and "nccl" in k["name"].lower():
            node["pg_name"] = str(pg)
        next_id += 1
        out.append(node)
    return out
