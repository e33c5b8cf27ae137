"""Pipeline schedules as the per-rank order of micro-batch passes (no costs here).

A pass is F (forward), B (backward; with `split` only the input gradient, its weight gradient W
following as a step of its own) or W. `chunk` is the model chunk on the rank (plan.Placement maps it
to a position in the model).

* GPipe: all forwards, then all backwards.
* 1F1B (PipeDream-Flush, Narayanan et al. 2021 sec. 2.2): stage s runs min(P-s-1, M) warm-up
  forwards, then alternates one forward / one backward, then drains the remaining backwards.
* Interleaved 1F1B (Narayanan et al. 2021 sec. 2.2.1, Megatron-LM `forward_backward_pipelining_with_
  interleaving`): each stage holds v model chunks; forward micro-step k runs chunk (k // P) % v on
  micro-batch (k // (P v)) P + k % P; backward micro-steps visit chunks in reverse; warm-up is
  (P - s - 1) * 2 + (v - 1) * P micro-steps, capped at M v. Needs M % P == 0 (as Megatron).
* ZB-H1 (Qi et al. 2023, sec. 2.1, Figure 3 top): 1F1B's order with B split from W and every W of
  stage s delayed by s micro-batches (the first s backward passes of a stage leave their W for the
  tail, where they fill the drain bubble).
* ZB-V (Qi et al. 2023, arXiv 2401.10241v2 sec. 6): two chunks per rank in a V; the handcrafted
  order of the authors' handcrafted_zb_v (PyTorch's ScheduleZBVZeroBubble): warm-up 2(P-s)-1 chunk-0
  forwards, s (F1, F0) pairs, P-s (F1, B1, W1), then (F0, B0, W0, F1, B1, W1) until done, and a
  cool-down of B passes whose W fill the tail. Needs M >= 2P - 1.
* DualPipe (DeepSeek-V3 report sec. 3.2.1, deepseek-ai/DualPipe `DualPipe.step`): P even; rank r
  holds stage r (chunk 0, micro-batches entering at rank 0) and stage P-1-r (chunk 1, entering at rank
  P-1); M/2 micro-batches each way. Eight phases per rank (nF0, nF0F1, nB1W1F1, nF0B1F1B0, nB1F1B0,
  nB1B0, nWB0, nW), in which overlapped forward/backward pairs wait for both inputs and send both
  outputs together (`pair`); W passes are taken FIFO from the split B passes. Needs M >= 2P, even.
* PipeDream-2BW (Narayanan et al. 2021, ICML): no flush: consecutive steps run as one 1F1B order
  over all their micro-batches (call with micro_batches = steps x M; the builder places each step's
  gradient reduction and weight update, which the micro-batches two steps later wait for).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from distscope.errors import DistscopeError
from distscope.plan import Schedule

__all__ = ["Pass", "Schedule", "Step", "stage_order"]


class Pass(enum.Enum):
    F = "F"
    B = "B"
    W = "W"


@dataclass(frozen=True, slots=True)
class Step:
    kind: Pass
    micro: int
    chunk: int  # model chunk on this rank (0 unless the schedule places several per rank)
    split: bool = False  # B only: its W runs later as a step of its own
    pair: bool = False  # F only: overlapped with the next step (a B): both inputs first, both outputs after

    @property
    def forward(self) -> bool:
        return self.kind is Pass.F


def _f(micro: int, chunk: int = 0, pair: bool = False) -> Step:
    return Step(Pass.F, micro, chunk, pair=pair)


def _b(micro: int, chunk: int = 0, split: bool = False) -> Step:
    return Step(Pass.B, micro, chunk, split=split)


def _w(micro: int, chunk: int = 0) -> Step:
    return Step(Pass.W, micro, chunk)


def _fwd_id(k: int, p: int, v: int) -> tuple[int, int]:
    """(micro-batch, chunk) of forward micro-step k (Megatron get_model_chunk_id)."""
    chunk = (k // p) % v
    micro = (k // (p * v)) * p + k % p
    return micro, chunk


def stage_order(schedule: Schedule, *, stage: int, stages: int, micro_batches: int, chunks: int = 1) -> list[Step]:
    """The order in which `stage` runs its forward, backward and weight-gradient passes."""
    p, m, v = stages, micro_batches, chunks
    if not 0 <= stage < p:
        raise DistscopeError(f"stage={stage} must be in 0..{p - 1}")
    if m < 1:
        raise DistscopeError(f"micro_batches={m} must be >= 1")
    if schedule is Schedule.GPIPE:
        return [_f(i) for i in range(m)] + [_b(i) for i in range(m)]
    if schedule is Schedule.ZB_H1:
        return _zb_h1(stage, p, m)
    if schedule is Schedule.ZB_V:
        return _zb_v(stage, p, m)
    if schedule is Schedule.DUALPIPE:
        return _dualpipe(stage, p, m)
    if schedule in (Schedule.ONE_F_ONE_B, Schedule.PIPEDREAM_2BW) or v == 1:
        warm = min(p - stage - 1, m)
        out = [_f(i) for i in range(warm)]
        f, b = warm, 0
        while f < m:
            out.append(_f(f))
            f += 1
            out.append(_b(b))
            b += 1
        out += [_b(i) for i in range(b, m)]
        return out
    if m % p:
        raise DistscopeError(f"interleaved schedule needs micro_batches={m} to be a multiple of pp={p}")
    total = m * v
    warm = min((p - stage - 1) * 2 + (v - 1) * p, total)
    out = []
    f = b = 0

    def fwd(k: int) -> Step:
        micro, chunk = _fwd_id(k, p, v)
        return _f(micro, chunk)

    def bwd(k: int) -> Step:
        micro, chunk = _fwd_id(k, p, v)
        return _b(micro, v - 1 - chunk)

    for _ in range(warm):
        out.append(fwd(f))
        f += 1
    while f < total:
        out.append(fwd(f))
        f += 1
        out.append(bwd(b))
        b += 1
    while b < total:
        out.append(bwd(b))
        b += 1
    return out


def _zb_h1(s: int, p: int, m: int) -> list[Step]:
    warm = min(p - s - 1, m)
    out = [_f(i) for i in range(warm)]
    f = b = w = 0
    f = warm
    while b < m:
        if f < m:
            out.append(_f(f))
            f += 1
        out.append(_b(b, split=True))
        b += 1
        if b > s:  # W delayed by the stage index
            out.append(_w(w))
            w += 1
    out += [_w(i) for i in range(w, m)]
    return out


def _zb_v(s: int, p: int, m: int) -> list[Step]:
    if m < 2 * p - 1:
        raise DistscopeError(f"schedule=zb-v needs micro_batches={m} >= 2*pp-1={2 * p - 1}")
    out: list[Step] = []
    f0 = f1 = b0 = b1 = 0
    for _ in range(2 * (p - s) - 1):
        out.append(_f(f0, 0))
        f0 += 1
    for _ in range(s):
        out += [_f(f1, 1), _f(f0, 0)]
        f1 += 1
        f0 += 1
    for _ in range(p - s):
        out += [_f(f1, 1), _b(b1, 1, split=True), _w(b1, 1)]
        f1 += 1
        b1 += 1
    while f1 < f0 or f0 < m:
        if f0 < m:
            out.append(_f(f0, 0))
            f0 += 1
        out += [_b(b0, 0, split=True), _w(b0, 0), _f(f1, 1), _b(b1, 1, split=True), _w(b1, 1)]
        b0 += 1
        f1 += 1
        b1 += 1
    w0, w1 = b0, b1
    for _ in range(s):
        out += [_b(b0, 0, split=True), _b(b1, 1, split=True)]
        b0 += 1
        b1 += 1
    for _ in range(p - s):
        out += [_b(b0, 0, split=True), _w(w0, 0)]
        b0 += 1
        w0 += 1
    out += [_w(i, 1) for i in range(w1, b1)] + [_w(i, 0) for i in range(w0, b0)]
    return out


def _dualpipe(r: int, p: int, m: int) -> list[Step]:
    if p % 2 or m % 2 or m < 2 * p:
        raise DistscopeError(f"schedule=dualpipe needs an even pp and an even micro_batches >= 2*pp (pp={p}, micro_batches={m})")
    h = p // 2
    half = min(r, p - 1 - r)
    second = r >= h
    mid = half == h - 1
    n2 = m // 2
    fc = [0, 0]
    bc = [0, 0]
    wq: list[tuple[int, int]] = []
    out: list[Step] = []

    def chunk(phase: int) -> int:  # DualPipe's relative phase -> this rank's module (absolute phase)
        return phase ^ int(second)

    def micro(c: int, i: int) -> int:  # micro-batches entering at rank 0: 0..M/2-1, at rank P-1: M/2..M-1
        return i + (n2 if c == 1 else 0)

    def fwd(phase: int, pair: bool = False) -> None:
        c = chunk(phase)
        out.append(_f(micro(c, fc[c]), c, pair=pair))
        fc[c] += 1

    def bwd(phase: int, zb: bool) -> None:
        c = chunk(phase)
        out.append(_b(micro(c, bc[c]), c, split=zb))
        if zb:
            wq.append((micro(c, bc[c]), c))
        bc[c] += 1

    def weight() -> None:
        mb, c = wq.pop(0)
        out.append(_w(mb, c))

    for _ in range((h - half - 1) * 2):  # 1: nF0
        fwd(0)
    for _ in range(half + 1):  # 2: nF0F1
        fwd(0)
        fwd(1)
    for _ in range(h - half - 1):  # 3: nB1W1F1 (zero bubble)
        bwd(1, True)
        weight()
        fwd(1)
    for i in range(n2 - p + half + 1):  # 4: nF0B1F1B0 (main)
        if i == 0 and mid:  # not overlapped, to shrink the bubble (DualPipe's note)
            fwd(0)
            bwd(1, False)
        else:
            fwd(0, pair=True)
            bwd(1, False)
        fwd(1, pair=True)
        bwd(0, False)
    for _ in range(h - half - 1):  # 5: nB1F1B0
        bwd(1, False)
        fwd(1, pair=True)
        bwd(0, False)
    zb = False
    steps6 = half + 1
    for i in range(steps6):  # 6: nB1B0, the second half with zero bubble
        if i == steps6 // 2 and half % 2 == 1:
            zb = True
        bwd(1, zb)
        if i == steps6 // 2 and half % 2 == 0:
            zb = True
        bwd(0, zb)
    for _ in range(h - half - 1):  # 7: nWB0
        weight()
        bwd(0, True)
    for _ in range(half + 1):  # 8: nW
        weight()
    if wq:
        raise AssertionError(f"dualpipe order left weight passes {wq} on rank {r}")
    return out
