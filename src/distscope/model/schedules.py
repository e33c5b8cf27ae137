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

import dataclasses
from collections.abc import Sequence

from distscope.plan import Schedule


@dataclasses.dataclass(frozen=True, slots=True)
class StagePass:
    """One rank's work for one micro-batch, seconds (for two-chunk schedules: both chunks)."""

    f_s: float
    b_s: float
    w_s: float

    @property
    def total_s(self) -> float:
        return self.f_s + self.b_s + self.w_s


def flush_1f1b_s(stage_t: Sequence[float], m: int, vp: int) -> float:
    """GPipe, 1F1B and interleaved 1F1B: m·t_max + (Σ_i t_i − t_max)/vp.

    For uniform stages this is (m + (p−1)/vp)·t (Narayanan et al. 2021, SC'21, sec. 2.2); GPipe has
    the same time as 1F1B (Huang et al. 2019), only more memory. t_i = F_i + B_i + W_i."""
    t_max = max(stage_t)
    return m * t_max + (sum(stage_t) - t_max) / vp


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


def pipedream_2bw_s(stages: Sequence[StagePass], m: int) -> float:
    """PipeDream-2BW (Narayanan et al. 2021, ICML, sec. 3): 1F1B without a flush; the pipeline is
    filled once per run, not per step, so a step in steady state is m·t_max (the weight update uses
    a one-step-stale version, double-buffered)."""
    return m * max(s.total_s for s in stages)


def pipeline_s(schedule: Schedule, stages: Sequence[StagePass], m: int, vp: int, c_s: float) -> float:
    """Step time of the pipeline part for any schedule (see the functions above)."""
    if len(stages) == 1:
        return m * stages[0].total_s
    if schedule is Schedule.ZB_H1:
        return zb_h1_s(stages, m, c_s)
    if schedule is Schedule.ZB_V:
        return zb_v_s(stages, m, c_s)
    if schedule is Schedule.DUALPIPE:
        return dualpipe_s(stages, m, c_s)
    if schedule is Schedule.PIPEDREAM_2BW:
        return pipedream_2bw_s(stages, m)
    p = len(stages)
    return flush_1f1b_s([s.total_s for s in stages], m, vp) + 2 * c_s * (p - 1)


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
