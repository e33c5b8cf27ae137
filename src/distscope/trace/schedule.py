"""Pipeline schedules as the per-stage order of micro-batch steps (no costs here).

* GPipe: all forwards, then all backwards.
* 1F1B (PipeDream-Flush, Narayanan et al. 2021 sec. 2.2): stage s runs min(P-s-1, M) warm-up
  forwards, then alternates one forward / one backward, then drains the remaining backwards.
* Interleaved 1F1B (Narayanan et al. 2021 sec. 2.2.1, Megatron-LM `forward_backward_pipelining_with_
  interleaving`): each stage holds v model chunks; forward micro-step k runs chunk (k // P) % v on
  micro-batch (k // (P v)) P + k % P; backward micro-steps visit chunks in reverse; warm-up is
  (P - s - 1) * 2 + (v - 1) * P micro-steps, capped at M v. Needs M % P == 0 (as Megatron).
"""

from __future__ import annotations

from dataclasses import dataclass

from distscope.errors import DistscopeError
from distscope.plan import Schedule

__all__ = ["Schedule", "Step", "stage_order"]


@dataclass(frozen=True, slots=True)
class Step:
    forward: bool
    micro: int
    chunk: int  # virtual-pipeline model chunk on this stage (0 unless interleaved)


def _fwd_id(k: int, p: int, v: int) -> tuple[int, int]:
    """(micro-batch, chunk) of forward micro-step k (Megatron get_model_chunk_id)."""
    chunk = (k // p) % v
    micro = (k // (p * v)) * p + k % p
    return micro, chunk


def stage_order(schedule: Schedule, *, stage: int, stages: int, micro_batches: int, chunks: int = 1) -> list[Step]:
    """The order in which `stage` runs its forward and backward micro-steps."""
    p, m, v = stages, micro_batches, chunks
    if not 0 <= stage < p:
        raise DistscopeError(f"stage={stage} must be in 0..{p - 1}")
    if m < 1:
        raise DistscopeError(f"micro_batches={m} must be >= 1")
    if schedule is Schedule.GPIPE:
        return [Step(True, i, 0) for i in range(m)] + [Step(False, i, 0) for i in range(m)]
    if schedule is Schedule.ONE_F_ONE_B or v == 1:
        warm = min(p - stage - 1, m)
        out = [Step(True, i, 0) for i in range(warm)]
        f, b = warm, 0
        while f < m:
            out.append(Step(True, f, 0))
            f += 1
            out.append(Step(False, b, 0))
            b += 1
        out += [Step(False, i, 0) for i in range(b, m)]
        return out
    if m % p:
        raise DistscopeError(f"interleaved schedule needs micro_batches={m} to be a multiple of pp={p}")
    total = m * v
    warm = min((p - stage - 1) * 2 + (v - 1) * p, total)
    out = []
    f = b = 0

    def fwd(k: int) -> Step:
        micro, chunk = _fwd_id(k, p, v)
        return Step(True, micro, chunk)

    def bwd(k: int) -> Step:
        micro, chunk = _fwd_id(k, p, v)
        return Step(False, micro, v - 1 - chunk)

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
