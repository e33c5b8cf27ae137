"""A serving replica as a discrete-event process on `distscope.sim.loop.EventLoop`.

Each iteration is priced by the replica's step model (cost.py) and filled by the stack's policy:
- STATIC: a batch is prefilled in one iteration, then decoded until its longest request ends;
- VLLM: a prefill-only iteration whenever the head of the queue fits (decodes wait), else a decode step;
- INFLIGHT (TRT-LLM): admitted prompts run whole in the same iteration as the running decodes;
- CHUNKED (Sarathi-Serve): decodes first, then prompt chunks up to the token budget.
Admission is FCFS: a request waits while the head of the queue does not fit (sequence cap, token
budget, KV blocks). Stacks that reserve a request's whole KV footprint at admission (TensorRT-LLM's
GUARANTEED_NO_EVICT) never preempt; the others allocate as sequences grow and, when the cache is full,
preempt the most recently admitted sequence (vLLM's recompute preemption: it re-queues at the front
and later re-prefills its prompt plus the tokens it had generated).

Disaggregated serving (DistServe, Zhong et al. OSDI'24; Splitwise, Patel et al. ISCA'24): a PREFILL
replica hands a request over after its first token (its KV cache then travels to a DECODE replica,
simulate.py); a DECODE replica admits handed-over requests straight into the running batch, with no
prefill iteration.

Speed: between scheduling events (an arrival that can be admitted, a completion, a full KV cache, a
multi-step boundary) the batch is constant, and the decode step time is affine in the summed context
(t = a + b·Σctx, Σctx growing by n per step), so a run of K decode steps is one event whose length is
a closed-form sum. An arrival that can be admitted cuts the run at the next step boundary (the old
end event is dropped by a generation counter). Block usage is tracked as tokens/block_tokens plus
half a block per sequence (the expected partial block).
"""

from __future__ import annotations

import enum
import heapq
import math
from collections import deque
from collections.abc import Callable

import numpy as np

from distscope.serve.replica import Replica
from distscope.serve.stack import Policy
from distscope.sim.loop import EventLoop

WATERMARK = 0.01  # vLLM's BlockSpaceManager keeps 1% of blocks free when admitting


class Role(enum.Enum):
    BOTH = "both"
    PREFILL = "prefill"
    DECODE = "decode"


class Ledger:
    """Per-request arrays shared by the replicas of one simulation."""

    __slots__ = ("arrival", "done", "finish", "first", "inp", "out", "preemptions")

    def __init__(self, inp: np.ndarray, out: np.ndarray) -> None:
        n = len(inp)
        self.inp = [int(x) for x in inp]
        self.out = [int(x) for x in out]
        self.arrival = [math.nan] * n
        self.first = [math.nan] * n
        self.finish = [math.nan] * n
        self.done = [0] * n  # tokens generated so far
        self.preemptions = 0


class ReplicaSim:
    def __init__(self, loop: EventLoop, replica: Replica, ledger: Ledger, on_finish: Callable[[int], None],
                 policy: Policy | None = None, reserve_full: bool | None = None, role: Role = Role.BOTH,
                 on_handoff: Callable[[int], None] | None = None) -> None:
        st = replica.stack
        self.loop, self.rep, self.led, self.on_finish = loop, replica, ledger, on_finish
        self.role, self.on_handoff = role, on_handoff
        self.policy = policy or st.policy
        if role is Role.PREFILL and self.policy is Policy.STATIC:
            raise ValueError("a prefill pool cannot batch statically")
        if reserve_full is None:
            reserve_full = st.reserve_full or self.policy is Policy.STATIC
        self.reserve = reserve_full and role is not Role.PREFILL
        self.max_seqs, self.budget, self.k = st.max_num_seqs, st.max_batched_tokens, st.steps_per_schedule
        self.bs = replica.memory.block_tokens
        self.cap = replica.memory.kv_blocks * (1.0 - (0.0 if self.reserve else WATERMARK))
        self.step = replica.step
        self.b_kv = replica.step.kv_s_per_ctx_token
        self.waiting: deque[int] = deque()
        self.prefilling: list[list[int]] = []  # CHUNKED: [rid, prompt tokens already prefilled]
        self.running: dict[int, tuple[int, int]] = {}  # rid -> (join step, ctx at join), admission order
        self.alloc: dict[int, int] = {}  # rid -> tokens allocated at admission
        self.fin_step: dict[int, int] = {}
        self.heap: list[tuple[int, int]] = []
        self.steps = 0
        self.n = 0
        self.S0 = 0  # Σ ctx at join over decoders
        self.J = 0  # Σ join step over decoders
        self.kv_fixed = 0  # tokens allocated at admission, all holders
        self.holders = 0
        self.busy = False
        self.idle_at: float | None = 0.0  # when the replica last went idle (None while it works)
        self.wake_due = 0.0  # what the next iteration pays for waking (Replica.wake)
        self.start_pending = False
        self.gen = 0
        self.seg: tuple[float, int, int, float, float, float, float] | None = None  # t0, C0, K, a, F, S, b·n
        self.floor = replica.launch_floor_s(decode_only=True)
        self.static_batch = 0
        self._a: dict[int, float] = {}
        self.outstanding = 0  # requests submitted and not finished (router load)

    # ---------------------------------------------------------------- arrivals
    def submit(self, rid: int) -> None:
        self.waiting.append(rid)
        self.outstanding += 1
        if not self.busy:
            if not self.start_pending:
                self.start_pending = True
                self.loop.at(self.loop.now, self._start)
        elif self.seg is not None and len(self.waiting) == 1 and self.policy is not Policy.STATIC and self._fits(rid):
            self._cut()

    def _cut(self) -> None:
        """End the running decode run at the first step boundary at or after now."""
        assert self.seg is not None
        t0, K = self.seg[0], self.seg[2]
        now = self.loop.now
        lo, hi = 1, K
        while lo < hi:
            mid = (lo + hi) // 2
            if t0 + self._seg_time(mid) >= now:
                hi = mid
            else:
                lo = mid + 1
        j = lo
        if self.k > 1:
            j = min(K, -(-j // self.k) * self.k)
        if j < K:
            self.seg = (t0, self.seg[1], j, *self.seg[3:])
            self.gen += 1
            self.loop.at(t0 + self._seg_time(j), self._end_segment_cb(self.gen))

    # ---------------------------------------------------------------- KV accounting
    def _blocks(self, extra_tokens: int, extra_holders: int) -> float:
        growth = 0 if self.reserve else self.n * self.steps - self.J
        return (self.kv_fixed + growth + extra_tokens) / self.bs + 0.5 * (self.holders + extra_holders)

    def _need(self, rid: int) -> int:
        led = self.led
        prompt = led.inp[rid] + led.done[rid]
        if self.role is Role.PREFILL:
            return prompt
        return prompt + (led.out[rid] - led.done[rid] if self.reserve else 0)

    def _fits(self, rid: int) -> bool:
        if self.n + len(self.prefilling) + 1 > self.max_seqs:
            return False
        return self._blocks(self._need(rid), 1) <= self.cap

    # ---------------------------------------------------------------- scheduling
    def _start(self) -> None:
        self.start_pending = False
        w = self.rep.wake
        self.wake_due = w.cost_s if (w is not None and not self.busy and self.idle_at is not None
                                     and self.loop.now - self.idle_at >= w.after_s) else 0.0
        self.idle_at = None
        self.busy = True
        self.seg = None
        pol = self.policy
        if pol is Policy.STATIC:
            if self.n == 0 and self.waiting:
                return self._static_prefill()
            if self.n:
                return self._decode_run()
            return self._idle()
        if pol is Policy.CHUNKED and self.role is not Role.DECODE:
            return self._chunked()
        new = self._admit(whole_prompts=self.role is not Role.DECODE)
        if new and self.role is Role.DECODE:
            for rid in new:
                self._join(rid)
            return self._decode_run() if self.n else self._idle()
        if new:
            return self._prefill(new, with_decode=pol is Policy.INFLIGHT)
        if self.n:
            return self._decode_run()
        return self._idle()

    def _idle(self) -> None:
        self.busy = False
        self.idle_at = self.loop.now

    def _wake_s(self) -> float:
        """The wake-up cost (Replica.wake) the first iteration after an idle spell of at least its
        `after_s` pays, once (a prefill: only an arrival ends an idle spell); 0 otherwise."""
        due, self.wake_due = self.wake_due, 0.0
        return due

    def _admit(self, whole_prompts: bool) -> list[int]:
        led = self.led
        new: list[int] = []
        tokens = self.n if self.policy is Policy.INFLIGHT else 0
        extra_tok, extra_hold = 0, 0
        while self.waiting:
            rid = self.waiting[0]
            prompt = led.inp[rid] + led.done[rid]
            if self.n + len(new) + 1 > self.max_seqs:
                break
            if whole_prompts and new and tokens + prompt > self.budget:
                break
            need = self._need(rid)
            if self._blocks(extra_tok + need, extra_hold + 1) > self.cap:
                break
            self.waiting.popleft()
            new.append(rid)
            tokens += prompt
            extra_tok += need
            extra_hold += 1
        for rid in new:
            self.alloc[rid] = self._need(rid)
            self.kv_fixed += self.alloc[rid]
            self.holders += 1
        return new

    def _prefill(self, new: list[int], with_decode: bool) -> None:
        led = self.led
        prompts = [led.inp[r] + led.done[r] for r in new]
        tok = sum(prompts)
        units = sum(p * p for p in prompts) / 2.0
        n = self.n if with_decode else 0
        ctx = self.S0 + self.n * self.steps - self.J if with_decode else 0.0
        dur = self.rep.iteration_s(tok + n, self.n + len(new), ctx, units, len(new) + n) + self._wake_s()
        self.gen += 1
        gen = self.gen
        self.loop.at(self.loop.now + dur, lambda: self._end_prefill(gen, new, with_decode))

    def _end_prefill(self, gen: int, new: list[int], advanced: bool) -> None:
        if advanced and self.n:
            self.steps += 1
            self._complete()
        for rid in new:
            self._first_token(rid)
        self._start()

    def _first_token(self, rid: int) -> None:
        led = self.led
        now = self.loop.now
        if math.isnan(led.first[rid]):
            led.first[rid] = now
        led.done[rid] += 1
        if led.done[rid] >= led.out[rid]:
            self._release(rid)
            self._finish(rid)
            return
        if self.role is Role.PREFILL:
            self._release(rid)
            self.outstanding -= 1
            assert self.on_handoff is not None
            self.on_handoff(rid)
            return
        self._join(rid)

    def _join(self, rid: int) -> None:
        """rid starts decoding at the next step (its prompt and generated tokens are cached)."""
        led = self.led
        ctx0 = led.inp[rid] + led.done[rid]
        self.running[rid] = (self.steps, ctx0)
        fin = self.steps + led.out[rid] - led.done[rid]
        self.fin_step[rid] = fin
        heapq.heappush(self.heap, (fin, rid))
        self.n += 1
        self.S0 += ctx0
        self.J += self.steps

    def _static_prefill(self) -> None:
        led = self.led
        batch: list[int] = []
        need = 0
        while self.waiting and len(batch) < self.max_seqs:
            rid = self.waiting[0]
            if self._blocks(need + self._need(rid), len(batch) + 1) > self.cap:
                break
            need += self._need(rid)
            batch.append(self.waiting.popleft())
        if not batch:  # the head alone does not fit (checked at build time; defensive)
            batch.append(self.waiting.popleft())
        for rid in batch:
            self.alloc[rid] = led.inp[rid] + led.out[rid]
            self.kv_fixed += self.alloc[rid]
            self.holders += 1
        self.static_batch = len(batch)
        prompts = [led.inp[r] for r in batch]
        dur = self.rep.iteration_s(sum(prompts), len(batch), 0.0, sum(p * p for p in prompts) / 2.0, len(batch)) \
            + self._wake_s()
        self.gen += 1
        gen = self.gen
        self.loop.at(self.loop.now + dur, lambda: self._end_prefill(gen, batch, False))

    def _chunked(self) -> None:
        led = self.led
        budget = self.budget - self.n
        chunks: list[tuple[int, int, int]] = []  # rid, chunk, prior
        for item in self.prefilling:
            if budget <= 0:
                break
            rid, done = item
            c = min(led.inp[rid] + led.done[rid] - done, budget)
            chunks.append((rid, c, done))
            budget -= c
        while budget > 0 and self.waiting:
            rid = self.waiting[0]
            if not self._fits(rid):
                break
            self.waiting.popleft()
            need = self._need(rid)
            self.alloc[rid] = need
            self.kv_fixed += need
            self.holders += 1
            self.prefilling.append([rid, 0])
            c = min(led.inp[rid] + led.done[rid], budget)
            chunks.append((rid, c, 0))
            budget -= c
        if not chunks:
            if self.n:
                return self._decode_run()
            return self._idle()
        tok = sum(c for _, c, _ in chunks)
        units = sum(c * (p + c / 2.0) for _, c, p in chunks)
        ending = [rid for rid, c, p in chunks if p + c >= led.inp[rid] + led.done[rid]]
        ctx = self.S0 + self.n * self.steps - self.J
        dur = self.rep.iteration_s(tok + self.n, self.n + len(self.prefilling), ctx, units, self.n + len(ending)) \
            + self._wake_s()
        self.gen += 1
        gen = self.gen
        self.loop.at(self.loop.now + dur, lambda: self._end_chunk(gen, chunks, ending))
        return None

    def _end_chunk(self, gen: int, chunks: list[tuple[int, int, int]], ending: list[int]) -> None:
        if self.n:
            self.steps += 1
            self._complete()
        progress = {rid: p + c for rid, c, p in chunks}
        self.prefilling = [[rid, progress.get(rid, d)] for rid, d in self.prefilling if rid not in ending]
        for rid in ending:
            self._first_token(rid)
        self._start()

    # ---------------------------------------------------------------- decode runs
    def _a_of(self, n: int) -> float:
        a = self._a.get(n)
        if a is None:
            a = self._a[n] = self.step.time_s(n, 0.0, 0.0, n)
        return a

    def _seg_time(self, j: int) -> float:
        """Seconds of the first j steps of the current run: step i takes max(a + b·(C0 + n·i), F) + S."""
        assert self.seg is not None
        _, C0, _, a, F, S, bn = self.seg
        g0 = a + self.b_kv * C0
        if g0 >= F:
            i_star = 0
        elif bn <= 0:
            return j * (F + S)
        else:  # floor-bound (launch or overlapped CPU) for the first i* steps
            i_star = min(j, math.ceil((F - g0) / bn))
        m = j - i_star
        return i_star * F + m * (g0 + bn * i_star) + bn * m * (m - 1) / 2.0 + j * S

    def _decode_run(self) -> None:
        n = self.n
        while self.heap and self.heap[0][1] not in self.running:
            heapq.heappop(self.heap)
        K = self.heap[0][0] - self.steps
        if self.policy is Policy.STATIC:
            K = max(f for f, _ in self.heap) - self.steps
        if not self.reserve:
            room = (self.cap - 0.5 * self.holders) * self.bs - self.kv_fixed - (n * self.steps - self.J)
            j_max = int(room // n)
            if j_max < 1:
                self._preempt()
                return self._start()
            K = min(K, j_max)
        if self.k > 1 and self.waiting:
            K = min(K, self.k)
        K = max(K, 1)
        C0 = self.S0 + n * self.steps - self.J
        cpu = self.rep.stack.cpu_s(n)
        floor = self.floor
        F, S = (max(floor, cpu), 0.0) if self.rep.stack.cpu_overlapped else (floor, cpu)
        self.seg = (self.loop.now, C0, K, self._a_of(n), F, S, self.b_kv * n)
        self.gen += 1
        self.loop.at(self.loop.now + self._seg_time(K), self._end_segment_cb(self.gen))
        return None

    def _end_segment_cb(self, gen: int) -> Callable[[], None]:
        return lambda: self._end_segment(gen)

    def _end_segment(self, gen: int) -> None:
        if gen != self.gen or self.seg is None:
            return
        self.steps += self.seg[2]
        self.seg = None
        self._complete()
        self._start()

    def _complete(self) -> None:
        heap, steps = self.heap, self.steps
        static = self.policy is Policy.STATIC
        while heap and heap[0][0] <= steps:
            fin, rid = heapq.heappop(heap)
            if rid not in self.running or self.fin_step.get(rid) != fin:
                continue
            self.led.done[rid] = self.led.out[rid]
            if static:
                self.led.finish[rid] = self.loop.now
                self.outstanding -= 1
                continue
            self._leave(rid)
            self._release(rid)
            self._finish(rid)
        if static and not heap:
            for rid in list(self.running):
                self._leave(rid)
                self._release(rid)
                self.on_finish(rid)

    def _leave(self, rid: int) -> None:
        join, ctx0 = self.running.pop(rid)
        self.n -= 1
        self.S0 -= ctx0
        self.J -= join
        del self.fin_step[rid]

    def _release(self, rid: int) -> None:
        self.kv_fixed -= self.alloc.pop(rid)
        self.holders -= 1

    def _finish(self, rid: int) -> None:
        self.led.finish[rid] = self.loop.now
        self.outstanding -= 1
        self.on_finish(rid)

    def _preempt(self) -> None:
        """Recompute preemption of the most recently admitted running sequence."""
        rid = next(reversed(self.running))
        join, _ = self.running[rid]
        self.led.done[rid] += self.steps - join
        self._leave(rid)
        self._release(rid)
        self.waiting.appendleft(rid)
        self.led.preemptions += 1
