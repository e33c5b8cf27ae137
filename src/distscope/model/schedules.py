"""Pipeline schedules in the estimator: step time of the pipeline and what it holds in memory.

Each rank's work per micro-batch is split into F (forward), B (backward for the inputs, including
recompute) and W (backward for the weights: the weight-gradient GEMMs, as many FLOPs as the forward
GEMMs). C is the latency of one stage-boundary transfer when sends are asynchronous (PP overlap; with
blocking sends their time is already in F and B and C = 0). m micro-batches, p ranks.

The closed forms for the schedules with a split backward are the longest paths of each schedule's
dependency graph (trace/schedule.py gives the per-rank order): with a fixed per-rank order the
makespan is the maximum over paths of (#F)·F + (#B)·B + (#W)·W + (#hops)·C, a maximum of linear forms.
The forms below were enumerated from that graph for p = 2..16 and F, B, W in [0.3, 3], C up to 15%
of the smallest pass (tests/trace/test_schedules.py re-derives them from the graph); for F = B = W
they reduce to the papers' bubbles. Per-rank costs are not uniform (embedding, LM head): the steady
term uses the slowest rank, the fill/drain term the mean rank (the existing 1F1B rule generalised).
"""

from __future__ import annotations

import collections
import dataclasses
import functools
from collections.abc import Sequence
from typing import Any

from distscope.plan import SCHEDULE_TRAITS, Placement, Schedule


@dataclasses.dataclass(frozen=True, slots=True)
class StagePass:
    """One rank's work for one micro-batch, seconds (for two-chunk schedules: both chunks)."""

    f_s: float
    b_s: float
    w_s: float
    tail_s: float = 0.0  # the part of a whole backward (B + W) that follows the sending of its input gradient
    # ZB-V: each of the rank's two model chunks' share of the work (uneven chunks; empty: halves)
    chunk_shares: tuple[float, ...] = ()


    @property
    def total_s(self) -> float:
        return self.f_s + self.b_s + self.w_s


def flush_pipeline_s(stages: Sequence[StagePass], m: int, vp: int, c_s: float = 0.0,
                     c_wrap_s: float | None = None) -> float:
    """GPipe, 1F1B and interleaved 1F1B, one StagePass per rank, with asynchronous transfers of C each
    (`c_wrap_s`: interleaved 1F1B's from the last rank back to the first; blocking sends are inside the
    passes, C = 0):

        m·t_max + (Σ_i u_i − u_max)/vp + 2·(vp·(p−1)·C + (vp−1)·C_wrap) − (vp−1)·Σ_i min(tail_i/vp, C_in,i)

    t_i = F_i + B_i + W_i, u_i = t_i − tail_i (fill and drain cross the ranks without their per-micro-batch
    tails, the DP stream's wait after a backward sent its input gradient on), u_max that of the slowest rank.
    For uniform ranks and C = 0, (m + (p−1)/vp)·t (Narayanan et al. 2021, SC'21, sec. 2.2); GPipe has the
    time of 1F1B (Huang et al. 2019), only more memory. The first micro-batch's forward and the last one's
    backward cross every boundary between model chunks, vp·(p−1) between neighbours and vp−1 wrapping
    round; in every lap of the drain but one a rank's tail after a chunk's backward runs while the next
    backward's input gradient is in flight to it (rank p−1 receives the wrap). Equal to the graph's
    longest path for uniform ranks (tests/trace/test_schedules.py)."""
    t_max, u_max, u_sum, tails = -1.0, 0.0, 0.0, False  # one pass: the planner calls this per plan
    for s in stages:
        t = s.f_s + s.b_s + s.w_s
        u = t - s.tail_s
        u_sum += u
        tails = tails or s.tail_s > 0
        if t > t_max:
            t_max, u_max = t, u
    pipe = m * t_max + (u_sum - u_max) / vp
    p = len(stages)
    if p > 1 and c_s > 0:
        c_w = c_s if c_wrap_s is None else c_wrap_s
        pipe += 2 * (vp * (p - 1) * c_s + (vp - 1) * c_w)
        if vp > 1 and tails:
            pipe -= (vp - 1) * sum(min(s.tail_s / vp, c_w if i == p - 1 else c_s) for i, s in enumerate(stages))
    return pipe


def zb_h1_s(stages: Sequence[StagePass], m: int, c_s: float) -> float:
    """ZB-H1 (Qi et al. 2023, Zero Bubble Pipeline Parallelism, sec. 2.1: 1F1B with every rank's W
    passes delayed by its rank, so B runs earlier and the delayed W fill the tail):

        m·t_max + Σ_{i≠slowest} max(B_i + 2C, F_i + 3C, F_i + B_i − W_i + 4C)

    (uniform, C = 0 and F ≥ W: (p−1)(F + B − W), the paper's bubble; 1F1B's is (p−1)(F + B + W))."""
    t = [s.total_s for s in stages]
    k = t.index(max(t))
    fill = sum(max(s.b_s + 2 * c_s, s.f_s + 3 * c_s, s.f_s + s.b_s - s.w_s + 4 * c_s)
               for i, s in enumerate(stages) if i != k)
    return m * t[k] + fill


def _mean(stages: Sequence[StagePass], scale: float) -> tuple[float, float, float]:
    n = len(stages)
    return (sum(s.f_s for s in stages) / n * scale, sum(s.b_s for s in stages) / n * scale,
            sum(s.w_s for s in stages) / n * scale)


def zb_v_s(stages: Sequence[StagePass], m: int, c_s: float) -> float:
    """ZB-V (Qi et al. 2023, arXiv 2401.10241v2 sec. 6; the handcrafted order of their
    handcrafted_zb_v / PyTorch's ScheduleZBVZeroBubble): two chunks per rank in a V. With f, b, w the
    per-chunk passes (half a rank's F, B, W) and p ranks:

        m·t_max + max( b + (p−2)w + 3(p−1)C,       (p−1)b + (5p−7)C,        2(p−1)(b − w) + (6p−8)C,
                       f + (p−2)w + (3p−5)C,       (p−2)f + b + (5p−7)C,    (p−2)f + p·b − 2(p−1)w + (6p−8)C,
                       (2p−3)f − (p−2)b + (3p−5)C, (2p−3)f + b − 2(p−1)w + (4p−6)C,
                       (2p−2)f − (p−1)b − w + (3p−3)C, (2p−2)f − (2p−1)w + (4p−4)C )

    (f = b = w, C = 0: (p−1)·f, the first ranks' start-up; the paper's zero bubble in steady state).
    Needs m >= 2p − 1."""
    p = len(stages)
    f, b, w = _mean(stages, 0.5)
    c = c_s
    fill = max(
        b + (p - 2) * w + 3 * (p - 1) * c, (p - 1) * b + (5 * p - 7) * c, 2 * (p - 1) * (b - w) + (6 * p - 8) * c,
        f + (p - 2) * w + (3 * p - 5) * c, (p - 2) * f + b + (5 * p - 7) * c,
        (p - 2) * f + p * b - 2 * (p - 1) * w + (6 * p - 8) * c,
        (2 * p - 3) * f - (p - 2) * b + (3 * p - 5) * c, (2 * p - 3) * f + b - 2 * (p - 1) * w + (4 * p - 6) * c,
        (2 * p - 2) * f - (p - 1) * b - w + (3 * p - 3) * c, (2 * p - 2) * f - (2 * p - 1) * w + (4 * p - 4) * c,
    )
    return m * max(s.total_s for s in stages) + fill


def dualpipe_s(stages: Sequence[StagePass], m: int, c_s: float) -> float:
    """DualPipe (DeepSeek-AI 2024, DeepSeek-V3 Technical Report sec. 3.2.1; the order of
    deepseek-ai/DualPipe): p ranks (even), rank r holds stages r and p−1−r, m/2 micro-batches enter
    at each end. Per micro-batch a rank runs one stage: F, B, W below are per stage (half the rank's
    two-stage pass; StagePass holds it already), X = F + B + W one overlapped forward+backward pair,
    H = p/2:

        m·X_max + (m − H − 2 − ⌊(m − p − 4)/p⌋⁺)·C + max( (H−2)F + (H−1)B + (4H−3)C,
                                       (H−2)F + 2(H−1)B − (H−1)W + (5H−4)C,
                                       2(H−1)F + (3H−2)C,
                                       2(H−1)F + (H−1)B − (H−1)W + (4H−3)C )

    (F = B = W, C = 0: 2(H−1)F = (p/2 − 1)(F&B + B_full − 3W), the report's Table 2 bubble, with
    F&B = F + B + W (not overlapped) and B_full = B + W). The steady state's longest path crosses ranks on all but one in p
    pairs, hence the ⌊·⌋ term. Needs m >= 2p and even."""
    p = len(stages)
    h = p // 2
    f, b, w = _mean(stages, 1.0)
    c = c_s
    fill = max((h - 2) * f + (h - 1) * b + (4 * h - 3) * c,
               (h - 2) * f + 2 * (h - 1) * b - (h - 1) * w + (5 * h - 4) * c,
               2 * (h - 1) * f + (3 * h - 2) * c,
               2 * (h - 1) * f + (h - 1) * b - (h - 1) * w + (4 * h - 3) * c)
    hops = m - h - 2 - max(0, (m - p - 4) // p)
    return m * max(s.total_s for s in stages) + hops * c + fill


@dataclasses.dataclass(frozen=True, slots=True)
class StepUpdate:
    """One rank's per-step work in PipeDream-2BW, seconds: its gradient reduction (`reduce_s`, on the DP
    stream from its step's last backward; zero where it blocks the compute chain and is counted in
    `compute_s`), then its optimizer step and codec on the compute chain (`compute_s`), then its weight
    all-gather (`gather_s`, on the DP stream), which the step two steps later waits for."""

    compute_s: float = 0.0
    reduce_s: float = 0.0
    gather_s: float = 0.0


def pipedream_2bw_s(stages: Sequence[StagePass], m: int, c_s: float = 0.0,
                    updates: Sequence[StepUpdate] = ()) -> float:
    """PipeDream-2BW (Narayanan et al. 2021, ICML, sec. 3): 1F1B without a flush; the pipeline is
    filled once per run, not per step, and the weight update uses a one-step-stale version (double
    buffered). A step in steady state is m·t_max when the ranks do nothing else. Each rank also updates
    its weights once per step (`updates`): the optimizer takes its compute chain once the step's
    gradients are reduced, at the first pass boundary after, and the step two steps later waits for the
    new weights. In the coupled 1F1B steady state one rank's stall delays its neighbours' next passes
    unless their slack absorbs it, so the step is neither m·t_max plus the largest update nor plus their
    sum: it is the steady-state cycle of the graph, the difference of the makespans of four and two
    consecutive steps over two (as the simulator runs 2BW: trace/from_plan.steady_step_s)."""
    t_max = m * max(s.total_s for s in stages)
    if not any(u.compute_s or u.gather_s for u in updates) and not (c_s and len(stages) > 1):
        return t_max
    short, long = (_2bw_run_s(stages, m, k, c_s, updates) for k in (2, 4))
    return max(t_max, (long - short) / 2)


def _2bw_run_s(stages: Sequence[StagePass], m: int, steps: int, c_s: float, updates: Sequence[StepUpdate]) -> float:
    """Makespan of `steps` consecutive 2BW steps (one 1F1B order over steps·m micro-batches), each rank
    running its update (pipedream_2bw_s) once per step: before its next pass where the gradients are
    reduced by then (in the rank's idle time, if any), else inside the pass that is running when they are
    (the simulator's compute stream takes it at the next layer boundary), lengthening that pass."""
    cost, tail = _pass_costs(Schedule.PIPEDREAM_2BW, stages)
    graph = _pass_graph(Schedule.PIPEDREAM_2BW, len(stages), steps * m)
    ups = list(updates) or [StepUpdate()] * len(stages)
    end = [0.0] * len(graph)
    rank_t = [0.0] * len(stages)
    pending: list[float | None] = [None] * len(stages)  # when the rank's outstanding update may start
    weights: list[list[float]] = [[] for _ in stages]  # per rank, per step: when its new weights are gathered
    for i, (r, kind, inputs, micro, _, _) in enumerate(graph):
        ready = 0.0
        for d in inputs:
            ready = max(ready, end[d] if d >= 0 else end[~d] + c_s)
        k = micro // m
        needs = kind == _F and micro % m == 0 and k >= 2  # the first forward of step k uses step k-2's update
        start, dur, up = max(rank_t[r], ready), cost[r][0][kind], ups[r]
        due = pending[r]
        forced = needs and len(weights[r]) < k - 1  # this forward waits for that update
        if due is not None and (due < start + dur or forced):
            if due <= start or forced:  # before the pass
                u_end = max(rank_t[r], due) + up.compute_s
                start = max(start, u_end)
            else:  # inside it
                u_end = due + up.compute_s
                dur += up.compute_s
            weights[r].append(u_end + up.gather_s)
            pending[r] = None
        if needs:
            start = max(start, weights[r][k - 2])
        t = start + dur
        end[i] = t - tail[r][0] if kind == _B_FULL else t
        rank_t[r] = t
        if kind == _B_FULL and micro % m == m - 1:
            pending[r] = t + up.reduce_s
    # the last step's updates still outstanding (the same in both runs: their difference drops them)
    return max(t + (up.compute_s if left is not None else 0.0)
               for t, up, left in zip(rank_t, ups, pending, strict=True))


# pass kinds of the dependency graph: F, B without its W (split), B with its W, W
_F, _B_SPLIT, _B_FULL, _W = range(4)


# a pass's role for its (micro-batch, model chunk) on its rank (_lane_program): where trace/builder.py
# issues that micro-batch's per-micro-batch ZeRO collectives
FIRST_F, FIRST_B, FIRST_GRAD, LAST_GRAD, PAIR_FIRST, FIRST_FWDS_END = 1, 2, 4, 8, 16, 32
PassNode = tuple[int, int, tuple[int, ...], int, int, int]


@functools.lru_cache(maxsize=64)
def _pass_graph(schedule: Schedule, p: int, m: int, vp: int = 1) -> tuple[PassNode, ...]:
    """The schedule's dependency graph over (rank, pass) nodes in a topological order: per node its
    rank, kind, inputs (its node, or ~node where it crosses ranks), micro-batch, model chunk and
    PAIR_FIRST (_lane_program adds the other roles, FIRST_F...). A node is one pass, or a DualPipe
    overlapped pair (both inputs before it, both outputs at its end). F of
    model chunk v needs F of v−1, B of v needs B of v+1 (the last chunk: its own F), W its own B; each
    rank runs its passes in its order (trace/schedule.py, the order the trace generator follows)."""
    from distscope.trace.schedule import Pass, stage_order

    place = SCHEDULE_TRAITS[schedule].placement
    chunks = _chunks(schedule, vp)
    n_pos = p if place is Placement.MIRROR else p * chunks

    def position(r: int, c: int) -> int:
        if place is Placement.V:
            return r if c == 0 else 2 * p - 1 - r
        if place is Placement.MIRROR:
            return r if c == 0 else p - 1 - r
        return c * p + r

    orders = [stage_order(schedule, stage=r, stages=p, micro_batches=m, chunks=chunks) for r in range(p)]
    pos = [[position(r, c) for c in range(chunks)] for r in range(p)]
    b0, w0, last = m * n_pos, 2 * m * n_pos, n_pos - 1  # keys: (F, B, W) x micro x position, as one index

    holder = [0] * n_pos
    for r in range(p):
        for v in pos[r]:
            holder[v] = r

    def pass_io(x: Any, v: int) -> tuple[tuple[int, ...], int, int]:
        """A pass's input keys, its node kind and its output key."""
        k = x.micro * n_pos + v
        if x.kind is Pass.F:
            return ((k - 1,) if v else ()), _F, k
        if x.kind is Pass.B:
            return ((b0 + k + 1,) if v < last else (k,)), _B_SPLIT if x.split else _B_FULL, b0 + k
        return (b0 + k,), _W, w0 + k

    # per rank, its passes as (inputs as (key, crosses ranks), nodes less their inputs, output keys): a
    # pair is one item, its first pass waiting for both inputs, the second following it on the rank
    programs: list[list[tuple[tuple[tuple[int, bool], ...], tuple[tuple[int, int, int, int], ...], tuple[int, ...]]]] = []
    for r, order in enumerate(orders):
        pr = pos[r]
        prog = []
        i = 0
        while i < len(order):
            group = order[i:i + 2] if order[i].pair else order[i:i + 1]
            io = [pass_io(x, pr[x.chunk]) for x in group]
            prog.append((tuple((d, holder[d % n_pos] != r) for ins, _, _ in io for d in ins),
                         tuple((kind, x.micro, x.chunk, PAIR_FIRST if j == 0 and len(group) == 2 else 0)
                               for j, (x, (_, kind, _)) in enumerate(zip(group, io, strict=True))),
                         tuple(out for _, _, out in io)))
            i += len(group)
        programs.append(prog)
    done = [-1] * (3 * m * n_pos)  # key -> node
    waiting: dict[int, list[int]] = {}  # key -> the ranks whose next pass waits for it
    nodes: list[PassNode] = []
    append = nodes.append
    idx = [0] * p
    ready = collections.deque(range(p))
    while ready:
        r = ready.popleft()
        prog, i = programs[r], idx[r]
        n_prog = len(prog)
        while i < n_prog:
            deps_, made, outs = prog[i]
            blocked = False
            for d, _ in deps_:
                if done[d] < 0:
                    waiting.setdefault(d, []).append(r)
                    blocked = True
                    break
            if blocked:
                break
            inputs = tuple([~done[d] if cross else done[d] for d, cross in deps_]) if deps_ else ()
            for kind, micro, chunk, flag in made:
                append((r, kind, inputs, micro, chunk, flag))
                inputs = ()
            for o in outs:
                done[o] = len(nodes) - 1
                if o in waiting:
                    ready.extend(waiting.pop(o))
            i += 1
        idx[r] = i
    if any(i < len(prog) for i, prog in zip(idx, programs, strict=True)):
        raise ValueError(f"{schedule.value}: the per-rank orders of {p} ranks x {m} micro-batches deadlock")
    return tuple(nodes)


def _chunks(schedule: Schedule, vp: int) -> int:
    """Model chunks per rank in the schedule's graph: vp for interleaved 1F1B, two for ZB-V and
    DualPipe, else one."""
    if schedule is Schedule.INTERLEAVED:
        return vp
    return 1 if SCHEDULE_TRAITS[schedule].placement is Placement.LOOP else 2


def _roles(order: Sequence[Any], chunks: int) -> list[int]:
    """Per step of one rank's order, its roles for its (micro-batch, chunk): its first forward, its
    first backward, its first and last pass that makes weight gradients (a whole B, or a W); and the
    rank's forward that ends its first forward of each chunk (FIRST_FWDS_END)."""
    from distscope.trace.schedule import Pass

    out = [0] * len(order)
    fwds = [n for n, st in enumerate(order) if st.kind is Pass.F]
    if fwds:
        out[fwds[min(chunks, len(fwds)) - 1]] |= FIRST_FWDS_END
    first: dict[tuple[int, int, int], int] = {}
    last: dict[tuple[int, int], int] = {}
    for n, st in enumerate(order):
        grad = st.kind is Pass.W or (st.kind is Pass.B and not st.split)
        for role, hit in ((FIRST_F, st.kind is Pass.F), (FIRST_B, st.kind is Pass.B), (FIRST_GRAD, grad)):
            if hit:
                first.setdefault((st.micro, st.chunk, role), n)
        if grad:
            last[st.micro, st.chunk] = n
    for (_, _, role), n in first.items():
        out[n] |= role
    for n in last.values():
        out[n] |= LAST_GRAD
    return out


def longest_path_s(schedule: Schedule, stages: Sequence[StagePass], m: int, c_s: float,
                   hops: Sequence[float] = (), vp: int = 1, wrap_s: float | None = None) -> float:
    """Makespan of the schedule's dependency graph (_pass_graph) with each rank's own F, B, W (ZB-V:
    the StagePass holds both chunks, each pass is half of it) and C per transfer between ranks: the
    longest path the closed forms above state for uniform ranks. Ranks are rarely uniform (the
    embedding on the first, the LM head on the last; DualPipe's and ZB-V's end ranks hold both), and
    there the closed forms' m·t_max + fill(mean) can be more than 10% off the graph. `hops` (one per
    boundary between adjacent ranks, 1F1B-like placements only) replaces C where boundaries differ.
    Interleaved 1F1B: `vp` chunks per rank, each its StagePass.chunk_shares of the rank's passes, and
    `wrap_s` for the transfer from the last rank to the first (else C)."""
    return max(_walk(schedule, stages, m, c_s, hops, vp=vp, wrap_s=wrap_s)[0])


@functools.lru_cache(maxsize=1024)
def interleaved_path_s(stages: tuple[StagePass, ...], m: int, vp: int, c_s: float, wrap_s: float) -> float:
    """Interleaved 1F1B's step: the closed form (flush_pipeline_s) with its fill and drain taken from the
    schedule's graph (longest_path_s with vp chunks per rank, StagePass.chunk_shares). The closed form's
    mean-rank fill is up to ~3% short where ranks or chunks differ: a slower backward on the first rank
    paces every rank's backward-only cool-down, which it prices at the slowest rank's own. The graph is
    walked for min(m, p) micro-batches, one round; beyond that the steady state adds t_max per
    micro-batch (the closed form's own premise). On the 167 interleaved plans of benchmarks/consistency.py
    seeds 0 and 1 this differs from walking all m by at most 0.53% of the step (0.08% with 2p rounds,
    0.00% with 3p, at 4 and 9 times the cost: the planner's search took x1.3 with 2p); where the ranks
    differ by tens of percent the steady state itself can stall, and the premise fails (random ranks
    within ±50%: up to 9%). Memoised: plans that differ only in their data-parallel traffic (compression
    options, sharding) run the same passes."""
    p = len(stages)
    m0 = min(m, p)
    fill = longest_path_s(Schedule.INTERLEAVED, stages, m0, c_s, vp=vp, wrap_s=wrap_s) - flush_pipeline_s(
        stages, m0, vp, c_s, wrap_s)
    return flush_pipeline_s(stages, m, vp, c_s, wrap_s) + fill


def final_grads_windows_s(schedule: Schedule, stages: Sequence[StagePass], m: int, c_s: float,
                          chunks: int) -> tuple[tuple[float, float], ...]:
    """Per rank of the schedule's graph (longest_path_s): when it finishes, and how long before that
    its last `chunks` gradient passes began (trace/builder.py issues a rank's step-level gradient
    reduction there, one per model chunk it holds). Where the rank waits between those passes (a
    DualPipe rank's two chunks end far apart), the reduction runs in the wait too."""
    rank_t, starts = _walk(schedule, stages, m, c_s, (), chunks)
    return tuple((t, t - st[0]) for t, st in zip(rank_t, starts, strict=True))


def _pass_costs(schedule: Schedule, stages: Sequence[StagePass], vp: int = 1
                ) -> tuple[list[tuple[tuple[float, ...], ...]], list[tuple[float, ...]]]:
    """Per rank and model chunk, the seconds of one graph node of each kind (_F, _B_SPLIT, _B_FULL, _W)
    and of a whole backward's tail: a ZB-V or interleaved node is one of the rank's chunks, its share of
    the StagePass (StagePass.chunk_shares, else an equal share); a DualPipe node is a whole micro-batch's
    passes."""
    n = _chunks(schedule, vp)
    whole = SCHEDULE_TRAITS[schedule].placement is Placement.MIRROR
    ks = [(1.0,) * n if whole else s.chunk_shares if len(s.chunk_shares) == n else (1.0 / n,) * n for s in stages]
    return ([tuple((k * s.f_s, k * s.b_s, k * (s.b_s + s.w_s), k * s.w_s) for k in kk)
             for s, kk in zip(stages, ks, strict=True)],
            [tuple(k * s.tail_s for k in kk) for s, kk in zip(stages, ks, strict=True)])


def _walk(schedule: Schedule, stages: Sequence[StagePass], m: int, c_s: float, hops: Sequence[float],
          last_grads: int = 0, vp: int = 1, wrap_s: float | None = None
          ) -> tuple[list[float], list[collections.deque[float]]]:
    """The graph's finish per rank and, with `last_grads`, the start times of each rank's last that
    many gradient passes (a whole B, or a W). `wrap_s`: an interleaved transfer between the last rank
    and the first (from one model chunk to the next), else C."""
    if hops and (len(hops) != len(stages) - 1 or SCHEDULE_TRAITS[schedule].placement is not Placement.LOOP
                 or vp > 1):
        raise ValueError(f"hops: {len(hops)} boundary costs for {len(stages)} ranks of {schedule.value}")
    cost, tail = _pass_costs(schedule, stages, vp)
    graph = _pass_graph(schedule, len(stages), m, vp if schedule is Schedule.INTERLEAVED else 1)
    wrap = c_s if wrap_s is None else wrap_s
    end = [0.0] * len(graph)
    rank_t = [0.0] * len(stages)
    starts = [collections.deque[float](maxlen=max(last_grads, 1)) for _ in stages]
    for i, (r, kind, inputs, _, chunk, _) in enumerate(graph):
        t = rank_t[r]
        for d in inputs:
            if d < 0:  # crosses ranks
                src = graph[~d]
                e = end[~d] + (hops[min(r, src[0])] if hops else wrap if src[4] != chunk and vp > 1 else c_s)
            else:
                e = end[d]
            if e > t:
                t = e
        if last_grads and kind in (_B_FULL, _W):
            starts[r].append(t)
        t += cost[r][chunk][kind]
        rank_t[r] = t
        end[i] = t - tail[r][chunk] if kind == _B_FULL else t  # its input gradient leaves before its tail
    return rank_t, starts


@dataclasses.dataclass(frozen=True, slots=True)
class DpLane:
    """One rank's per-micro-batch data-parallel collectives, seconds on its DP stream, per model chunk
    it holds (ZeRO-3 re-gathering its weights every micro-batch, or ZeRO-2 reducing its gradients
    every micro-batch; trace/builder.py StageExtras): one
    weight all-gather issued with the chunk's first forward pass of a micro-batch and one with its
    first backward pass, the gradient reduce-scatter's early part with its first gradient pass and
    the rest (the last layer's share) after its last."""

    gather_s: tuple[float, ...]
    reduce_early_s: tuple[float, ...]
    reduce_last_s: tuple[float, ...]
    prefetch: bool = True  # gathers overlapped (DP overlap), else each runs when its pass starts, blocking
    # ZeRO-2's one weight all-gather per step, issued as the step starts (overlapped) and waited for
    # after the rank's first forward of each chunk, whose output leaves after it
    step_gather_s: float = 0.0


def lane_path_s(schedule: Schedule, stages: Sequence[StagePass], lanes: Sequence[DpLane], m: int,
                c_s: float, vp: int = 1, wrap_s: float | None = None) -> float:
    """Makespan of the schedule's dependency graph (longest_path_s) with each rank's DP stream as a
    second resource that runs one collective at a time, in the order trace/builder.py issues them
    (ZeRO-3): overlapped, a micro-batch's gathers leave when the rank reaches the pass that needs them,
    before that pass's input arrives, and are prefetched (the pass does not wait; blocking, the pass
    waits for them once its input is there); its early reduce-scatter leaves as its first gradient
    pass starts; after its last gradient pass the rank
    waits for all of them and then for the reduce-scatter's last part, which queues behind whatever
    the rank issued before it. A rank whose stream is the bottleneck thus idles where the schedule
    issues too little ahead (the pipeline's fill and drain): the closed forms' m·t + fill with the
    stream's exposure folded into each pass cannot see that (up to 15% off the simulated step)."""
    p = len(stages)
    vp = vp if schedule is Schedule.INTERLEAVED else 1
    cost, _ = _pass_costs(schedule, stages, vp)
    graph = _pass_graph(schedule, p, m, vp)
    wrap = c_s if wrap_s is None else wrap_s
    end = [0.0] * len(graph)
    chain = [0.0] * p
    lane = [ln.step_gather_s for ln in lanes]
    for r, inputs, gathers, earlies, passes, lasts, joins in _lane_program(schedule, p, m, vp):
        ln, t = lanes[r], chain[r]
        busy = lane[r]
        for c in gathers if ln.prefetch else ():  # prefetched gathers, issued before the pass's input arrives
            busy = max(busy, t) + ln.gather_s[c]
        for d in inputs:
            e = end[d] if d >= 0 else end[~d] + (wrap if vp > 1 and graph[~d][4] != passes[0][2] else c_s)
            if e > t:
                t = e
        for c in () if ln.prefetch else gathers:  # blocking gathers, once the input is there
            busy = t = max(busy, t) + ln.gather_s[c]
        for c in earlies:
            busy = max(busy, t) + ln.reduce_early_s[c]
        for j, kind, chunk in passes:
            t += cost[r][chunk][kind]
            end[j] = t
        if joins and t < ln.step_gather_s:
            t = ln.step_gather_s
            for j, *_ in passes:
                end[j] = t
        for c in lasts:  # joined after the last gradient pass, then the reduce-scatter's last part
            busy = t = max(busy, t) + ln.reduce_last_s[c]
        chain[r], lane[r] = t, busy
    return max(chain)


@functools.lru_cache(maxsize=64)
def _lane_program(schedule: Schedule, p: int, m: int, vp: int = 1) -> tuple[tuple[Any, ...], ...]:
    """_pass_graph as lane_path_s walks it: per pass (a DualPipe pair: both) its rank, inputs, and the
    model chunks whose gathers, early and last reduce-scatters it issues, and its (node, kind)s."""
    from distscope.trace.schedule import stage_order

    graph = _pass_graph(schedule, p, m, vp)
    chunks_ = _chunks(schedule, vp)
    # each rank's nodes follow its order: the k-th of rank r has the roles of its order's k-th step
    roles = [_roles(stage_order(schedule, stage=r, stages=p, micro_batches=m, chunks=chunks_), chunks_)
             for r in range(p)]
    seen = [0] * p
    out = []
    i = 0
    while i < len(graph):
        r, _, inputs, _, _, pair = graph[i]
        n_ = 2 if pair & PAIR_FIRST else 1
        group = graph[i:i + n_]
        role = roles[r][seen[r]:seen[r] + n_]
        seen[r] += n_

        def chunks(flags: int, group: tuple[PassNode, ...] = group, role: list[int] = role) -> tuple[int, ...]:
            return tuple(n[4] for n, f in zip(group, role, strict=True) if f & flags)

        out.append((r, inputs, chunks(FIRST_F | FIRST_B), chunks(FIRST_GRAD),
                    tuple((i + j, n[1], n[4]) for j, n in enumerate(group)), chunks(LAST_GRAD),
                    any(f & FIRST_FWDS_END for f in role)))
        i += n_
    return tuple(out)


@functools.lru_cache(maxsize=256)
def final_grad_passes(schedule: Schedule, stage: int, p: int, m: int, vp: int) -> tuple[int, int]:
    """(full backward passes, W passes) among rank `stage`'s last gradient passes, one per model chunk
    it holds: the passes after whose start its data-parallel gradient reduction runs (the weight
    gradients of a chunk are final only in its last pass that makes them: a B, or the W of a split B;
    trace/builder.py starts the reduction there). Without a split backward, one B per chunk."""
    chunks = 2 if SCHEDULE_TRAITS[schedule].placement is not Placement.LOOP else vp
    if not SCHEDULE_TRAITS[schedule].split_backward or p == 1:
        return chunks, 0
    from distscope.trace.schedule import Pass, stage_order

    order = stage_order(schedule, stage=stage, stages=p, micro_batches=m, chunks=chunks)
    grads = [st for st in order if st.kind is Pass.W or (st.kind is Pass.B and not st.split)]
    last = grads[-min(chunks, len(grads)):]
    n_w = sum(st.kind is Pass.W for st in last)
    return len(last) - n_w, n_w


def pipeline_s(schedule: Schedule, stages: Sequence[StagePass], m: int, vp: int, c_s: float) -> float:
    """Step time of the pipeline part for any schedule (see the functions above). The zero-bubble
    schedules and DualPipe use their closed form when every rank does the same work, else the longest
    path of their graph (longest_path_s); GPipe, 1F1B and interleaved 1F1B take flush_pipeline_s (with
    every transfer C, the wrap-around one included)."""
    if len(stages) == 1:
        return m * stages[0].total_s
    if schedule in (Schedule.ZB_H1, Schedule.ZB_V, Schedule.DUALPIPE) and (
            any(s != stages[0] for s in stages) or any(s.tail_s for s in stages)):
        return longest_path_s(schedule, stages, m, c_s)
    if schedule is Schedule.ZB_H1:
        return zb_h1_s(stages, m, c_s)
    if schedule is Schedule.ZB_V:
        return zb_v_s(stages, m, c_s)
    if schedule is Schedule.DUALPIPE:
        return dualpipe_s(stages, m, c_s)
    if schedule is Schedule.PIPEDREAM_2BW:
        return pipedream_2bw_s(stages, m, c_s)
    return flush_pipeline_s(stages, m, vp, c_s)


def inflight_sets(schedule: Schedule, stage: int, pp: int, vp: int, m: int) -> tuple[float, float]:
    """(full, weight-gradient-only) activation sets rank `stage` holds at its peak, in units of
    (the rank's layers × one micro-batch).

    GPipe: m (Huang et al. 2019). 1F1B and PipeDream-2BW: min(p − s, m) (Narayanan et al. 2021).
    Interleaved 1F1B: Megatron's warm-up of 2(p−s−1) + (vp−1)p micro-steps plus one, in chunks,
    / vp (stage 0: p + (p−1)/vp, Korthikanti et al. 2022 sec. 4.2.3). ZB-H1: min(p − s, m) full sets
    and s sets waiting for their W, which keep only the GEMM inputs (Qi et al. 2023 sec. 2.1: every
    rank has p micro-batches in flight). ZB-V: 2p chunk sets = p (sec. 6: the same peak as 1F1B on
    every rank). DualPipe: p + 1 stage sets, a rank holding two stages (DeepSeek-V3 Table 2)."""
    s = stage
    if pp == 1:
        return 1.0, 0.0
    if schedule is Schedule.GPIPE:
        return float(m), 0.0
    if schedule is Schedule.INTERLEAVED:
        return min(m * vp, 2 * (pp - s - 1) + (vp - 1) * pp + 1) / vp, 0.0
    if schedule is Schedule.ZB_H1:
        return float(min(pp - s, m)), float(min(s, m))
    if schedule is Schedule.ZB_V:
        return min(2 * pp, 2 * m) / 2, 0.0
    if schedule is Schedule.DUALPIPE:
        return (pp + 1) / 2, 0.0
    return float(min(pp - s, m)), 0.0


def weight_versions(schedule: Schedule) -> int:
    """Copies of the training-dtype weights a rank keeps of each of its layers: PipeDream-2BW stashes
    two versions (Narayanan et al. 2021, ICML sec. 3.1); DualPipe's second copy is a second stage,
    counted in its layers (model/stages.py)."""
    return 2 if schedule is Schedule.PIPEDREAM_2BW else 1
