"""Per-rank summary of a simulation and its Chrome/Perfetto timeline."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from distscope.sim.engine import SimOutcome
from distscope.sim.program import COMM_TID, COMPUTE, PASS, lane_tid
from distscope.trace.traceset import TraceSet


@dataclass(frozen=True, kw_only=True)
class RankResult:
    rank: int
    finish_s: float
    compute_s: float
    exposed_comm_s: float


@dataclass(frozen=True, kw_only=True)
class SimResult:
    step_time_s: float
    ranks: tuple[RankResult, ...]
    events: int
    wall_s: float
    simulated_ranks: int

    def to_json(self) -> dict[str, object]:
        out = asdict(self)
        out["ranks"] = [asdict(r) for r in self.ranks]
        return out


def _union(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            if b > out[-1][1]:
                out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
    return out


def _minus_len(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> float:
    """Total length of union `a` not covered by union `b` (both sorted, disjoint)."""
    total = 0.0
    j = 0
    for s, e in a:
        covered = 0.0
        while j < len(b) and b[j][1] <= s:
            j += 1
        k = j
        while k < len(b) and b[k][0] < e:
            covered += min(e, b[k][1]) - max(s, b[k][0])
            k += 1
        total += (e - s) - covered
    return total


def summarize(outcome: SimOutcome) -> SimResult:
    """Finish, compute and exposed-communication time per rank (exposed = communication time during
    which the compute stream is idle)."""
    per_sim = []
    for prog, times in zip(outcome.program.ranks, outcome.times, strict=True):
        comp: list[tuple[float, float]] = []
        comm: list[tuple[float, float]] = []
        for i, kind in enumerate(prog.kind):
            iv = (times.start[i], times.end[i])
            (comp if kind in (COMPUTE, PASS) else comm).append(iv)
        comp_u = _union(comp)
        finish = max(times.end, default=0.0)
        per_sim.append((finish, sum(e - s for s, e in comp_u), _minus_len(_union(comm), comp_u)))
    ranks = tuple(
        RankResult(rank=r, finish_s=per_sim[k][0], compute_s=per_sim[k][1], exposed_comm_s=per_sim[k][2])
        for r, k in enumerate(outcome.program.class_of)
    )
    return SimResult(
        step_time_s=max(r.finish_s for r in ranks),
        ranks=ranks,
        events=outcome.events,
        wall_s=outcome.wall_s,
        simulated_ranks=len(outcome.program.ranks),
    )


TRACK_TOLERANCE_NS = 1  # a slice starting this close before its track's last end is clipped to fit (float noise)


def partition_tracks(slices_ns: list[tuple[int, int]], tol_ns: int = TRACK_TOLERANCE_NS) -> list[tuple[int, int]]:
    """Greedy interval partitioning: in start order, each slice goes on the first track whose last slice
    has ended (the fewest tracks for an interval graph). Returns (track, clipped start) per slice; the start
    moves by at most `tol_ns` past a track end that float noise put just after it, so that every track
    holds disjoint slices (Chrome/Perfetto nest slices of one thread by time and mis-draw partial overlaps)."""
    order = sorted(range(len(slices_ns)), key=lambda i: (slices_ns[i][0], -slices_ns[i][1], i))
    ends: list[int] = []
    out = [(0, 0)] * len(slices_ns)
    for i in order:
        s, e = slices_ns[i]
        track = next((t for t, last in enumerate(ends) if last <= s or (last - tol_ns <= s and last <= e)), len(ends))
        if track == len(ends):
            ends.append(s)
        s = max(s, ends[track])
        ends[track] = e
        out[i] = (track, s)
    return out


def write_timeline(outcome: SimOutcome, path: str | Path, max_ranks: int = 256) -> None:
    """Chrome trace-event JSON (opens in Perfetto): one process per simulated rank; thread 0 = compute
    (the first lane), thread 1 = "comm 0", threads 2.. = further compute lanes, then further tracks.

    Concurrent work never shares a thread: each rank's communication (and each compute lane, should it
    overlap) is split into tracks by `partition_tracks`, "comm 0", "comm 1", ..., so a thread holds only
    disjoint slices. Times are whole nanoseconds, written in microseconds."""
    events: list[dict[str, object]] = []
    members: dict[int, list[int]] = {}
    for r, k in enumerate(outcome.program.class_of):
        members.setdefault(k, []).append(r)
    for k, (prog, times) in enumerate(zip(outcome.program.ranks, outcome.times, strict=True)):
        if k >= max_ranks:
            break
        pid = prog.rank
        label = f"rank {pid}" + (f" (+{len(members[k]) - 1} equivalent)" if len(members[k]) > 1 else "")
        events.append({"ph": "M", "name": "process_name", "pid": pid, "args": {"name": label}})
        # group -1 = communication, g >= 0 = compute lane g
        groups: dict[int, list[int]] = {}
        for i, kind in enumerate(prog.kind):
            lane = prog.lane[i] if prog.lane else 0
            groups.setdefault(lane if kind in (COMPUTE, PASS) else -1, []).append(i)
        base_tids = {-1: COMM_TID, **{lane: lane_tid(lane) for lane in range(prog.num_lanes)}}
        names = {-1: "comm", 0: "compute", **{lane: f"lane {lane}" for lane in range(1, prog.num_lanes)}}
        next_tid = max(base_tids.values()) + 1
        threads: dict[int, str] = {COMM_TID: "comm 0", **{base_tids[g]: names[g] for g in range(prog.num_lanes)}}
        comm_tids = {COMM_TID}
        for g in sorted(groups, key=lambda g: (g != -1, g)):
            idx = groups[g]
            ns = [(round(times.start[i] * 1e9), round(times.end[i] * 1e9)) for i in idx]
            tids = {0: base_tids[g]}
            for i, (track, s_ns), (_, e_ns) in zip(idx, partition_tracks(ns), ns, strict=True):
                if track not in tids:
                    tids[track] = next_tid
                    threads[next_tid] = f"comm {track}" if g == -1 else f"{names[g]} ({track + 1})"
                    if g == -1:
                        comm_tids.add(next_tid)
                    next_tid += 1
                events.append(
                    {
                        "ph": "X",
                        "name": prog.names[i] or str(prog.ids[i]),
                        "pid": pid,
                        "tid": tids[track],
                        "ts": s_ns / 1000,
                        "dur": (e_ns - s_ns) / 1000,
                        "args": {"node": prog.ids[i]},
                    }
                )
        # compute lanes first, then the communication tracks, in the viewer's order
        ordered = [t for t in sorted(threads) if t not in comm_tids] + sorted(comm_tids)
        for order, tid in enumerate(ordered):
            events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": threads[tid]}})
            events.append(
                {"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid, "args": {"sort_index": order}}
            )
    Path(path).write_text(json.dumps({"traceEvents": events, "displayTimeUnit": "ns"}))


def comm_bytes_by_group(traces: TraceSet, *, per_rank: bool = False) -> dict[str, Any]:
    """Bytes each group's communication moves, nccl-tests convention (all_gather: the gathered output,
    i.e. n x Chakra's per-rank comm_size; p2p: the message), keyed by the group's label (or name) and op,
    summed over ranks -- or, with `per_rank`, {rank: {group: {op: bytes}}}. Symmetric sets count every
    rank through its representative."""
    from distscope.trace.graph import NodeKind

    ops = {NodeKind.COMM_SEND: "send", NodeKind.COMM_RECV: "recv"}
    ranks = range(traces.num_ranks)
    out: dict[Any, Any] = {}
    for r in ranks:
        rep = r if traces.class_of is None else traces.class_of[r]
        mine: dict[str, dict[str, int]] = {}
        for n in traces.graphs[rep].nodes:
            if not n.kind.is_comm:
                continue
            group = traces.group_labels.get(n.pg_name) or n.pg_name or "world"
            if n.kind is NodeKind.COMM_COLL:
                assert n.comm_kind is not None
                size = n.comm_size_bytes
                if n.comm_kind.value == "ALL_GATHER":
                    size *= len(traces.members(n.pg_name, rep))  # the representative's group: same size
                op = n.comm_kind.value.lower()
            else:
                size = n.tensor_size_bytes or n.comm_size_bytes
                op = ops[n.kind]
            g = mine.setdefault(group, {})
            g[op] = g.get(op, 0) + size
        if per_rank:
            out[r] = mine
        else:
            for group, by_op in mine.items():
                tot = out.setdefault(group, {})
                for op, b in by_op.items():
                    tot[op] = tot.get(op, 0) + b
    return out
