"""Per-rank execution semantics on top of the event loop.

Each simulated rank has one compute stream per lane (COMP and MEM nodes of one lane -- a CPU thread or
a device stream of the traced job -- run one at a time, lowest ready index first; lanes overlap) and
one communication stream per process-group name (its collectives run one at a time, in ready order,
as NCCL runs one communicator's kernels). A node is ready when all its data and control dependencies
have finished: both are finish-to-start, as in ASTRA-sim's feeder (Chakra FeederV3 DependancyResolver
with USE_DATA_DEPS = USE_CTRL_DEPS = true). METADATA nodes take no time and no stream: they finish
when they become ready (ASTRA-sim Workload::issue_metadata -> skip_invalid).
* A collective starts when every participant has reached it and lasts the network model's time for
  the group (unaware), or shares bandwidth with concurrent transfers (shared).
* Sends are eager: a send of b bytes issued at t arrives at t + p2p time and then completes; the
  matching receive completes at max(its post time, arrival). Sends and receives use no stream.
The engine never waits forever: when the event heap is empty, any unfinished node is reported.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable
from dataclasses import dataclass

from distscope.errors import DistscopeError
from distscope.sim.fluid import FluidNetwork
from distscope.sim.loop import EventLoop
from distscope.sim.program import COLL, COMPUTE, PASS, RECV, SEND, Program, RankProgram


@dataclass
class RankTimes:
    start: list[float]
    end: list[float]


@dataclass
class SimOutcome:
    program: Program
    times: list[RankTimes]  # per simulated rank
    events: int
    wall_s: float


class _Rank:
    __slots__ = ("busy", "indeg", "prog", "queue", "sim", "stream_busy", "stream_queue", "times")

    def __init__(self, sim: int, prog: RankProgram) -> None:
        self.sim = sim
        self.prog = prog
        self.indeg = list(prog.indeg)
        self.queue: list[list[int]] = [[] for _ in range(prog.num_lanes)]  # ready compute nodes per lane
        self.busy = [False] * prog.num_lanes
        self.stream_queue: dict[int, list[int]] = {}
        self.stream_busy: dict[int, bool] = {}
        n = len(prog.kind)
        self.times = RankTimes(start=[-1.0] * n, end=[-1.0] * n)


PROGRESS_EVENTS = 1 << 15  # events between progress reports (a report costs microseconds)


def simulate_program(program: Program, *, shared: bool = False,
                     progress: Callable[[int, int], None] | None = None) -> SimOutcome:
    """Run the program to completion; raises DistscopeError if some node can never run.
    `progress(done, total)` every PROGRESS_EVENTS events, in nodes: each node ends in about one event."""
    wall0 = time.perf_counter()
    loop = EventLoop()
    fluid = FluidNetwork(loop) if shared else None
    ranks = [_Rank(k, p) for k, p in enumerate(program.ranks)]
    arrivals = [0] * len(program.inst_participants)
    waiting: list[list[tuple[int, int]]] = [[] for _ in program.inst_participants]
    send_arrival: dict[tuple[int, int], float] = {}
    recv_waiting: dict[tuple[int, int], list[tuple[int, int]]] = {}

    def complete(r: int, i: int) -> None:
        rank = ranks[r]
        rank.times.end[i] = loop.now
        prog = rank.prog
        kind = prog.kind[i]
        if kind == COMPUTE:
            lane = prog.lane[i]
            rank.busy[lane] = False
            start_compute(rank, lane)
        elif kind == COLL:
            sid = prog.stream[i]
            rank.stream_busy[sid] = False
            start_stream(rank, sid)
        indeg = rank.indeg
        for c in prog.children[i]:
            indeg[c] -= 1
            if indeg[c] == 0:
                dispatch(rank, c)

    def start_compute(rank: _Rank, lane: int) -> None:
        queue = rank.queue[lane]
        if rank.busy[lane] or not queue:
            return
        i = heapq.heappop(queue)
        rank.busy[lane] = True
        rank.times.start[i] = loop.now
        r = rank.sim
        loop.at(loop.now + rank.prog.dur_s[i], lambda: complete(r, i))

    def start_stream(rank: _Rank, sid: int) -> None:
        q = rank.stream_queue.get(sid)
        if rank.stream_busy.get(sid) or not q:
            return
        i = heapq.heappop(q)
        rank.stream_busy[sid] = True
        rank.times.start[i] = loop.now
        inst = rank.prog.inst[i]
        arrivals[inst] += 1
        waiting[inst].append((rank.sim, i))
        if arrivals[inst] == program.inst_participants[inst]:
            parts = waiting[inst]
            waiting[inst] = []

            def finish_all() -> None:
                for r, j in parts:
                    complete(r, j)

            if fluid is not None:
                fluid.start(rank.prog.dur_s[i], rank.prog.resources[i], finish_all)
            else:
                loop.at(loop.now + rank.prog.dur_s[i], finish_all)

    def dispatch(rank: _Rank, i: int) -> None:
        prog = rank.prog
        kind = prog.kind[i]
        r = rank.sim
        if kind == COMPUTE:
            lane = prog.lane[i]
            heapq.heappush(rank.queue[lane], i)
            start_compute(rank, lane)
        elif kind == PASS:
            rank.times.start[i] = loop.now
            loop.at(loop.now, lambda: complete(r, i))
        elif kind == COLL:
            sid = prog.stream[i]
            heapq.heappush(rank.stream_queue.setdefault(sid, []), i)
            start_stream(rank, sid)
        elif kind == SEND:
            rank.times.start[i] = loop.now

            def arrived() -> None:
                send_arrival[r, i] = loop.now
                for rr, ri in recv_waiting.pop((r, i), []):
                    complete(rr, ri)
                complete(r, i)

            if fluid is not None:
                fluid.start(prog.dur_s[i], prog.resources[i], arrived)
            else:
                loop.at(loop.now + prog.dur_s[i], arrived)
        else:  # RECV
            rank.times.start[i] = loop.now
            peer = prog.peer[i]
            assert peer is not None
            if peer in send_arrival:
                complete(r, i)
            else:
                recv_waiting.setdefault(peer, []).append((r, i))

    for rank in ranks:
        for i, d in enumerate(rank.indeg):
            if d == 0:
                dispatch(rank, i)
    if progress is None:
        loop.run()
    else:
        total = sum(len(p.kind) for p in program.ranks)
        while loop.pending:
            loop.run(PROGRESS_EVENTS)
            progress(min(loop.events, total), total)
        progress(total, total)
    _check_finished(ranks, program)
    return SimOutcome(
        program=program,
        times=[r.times for r in ranks],
        events=loop.events,
        wall_s=time.perf_counter() - wall0,
    )


def _check_finished(ranks: list[_Rank], program: Program) -> None:
    for rank in ranks:
        prog = rank.prog
        for i, end in enumerate(rank.times.end):
            if end >= 0 or rank.indeg[i] > 0:
                continue
            where = f"rank {prog.rank}, node {prog.ids[i]} ({prog.names[i]!r})"
            kind = prog.kind[i]
            if kind == COLL:
                raise DistscopeError(
                    f"{where}: collective on pg_name={program.inst_label[prog.inst[i]]!r} never started: "
                    f"not every member reached it (deadlock in the traces' order)"
                )
            if kind == RECV:
                raise DistscopeError(f"{where}: field comm_src: the matching send never ran (deadlock)")
            raise DistscopeError(f"{where}: never ran (deadlock)")
