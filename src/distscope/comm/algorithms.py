"""Collective algorithms as small pure α-β cost functions.

Notation: n ranks, D bytes (nccl-tests size convention, see collective.py), α seconds per step,
B achieved bytes/s per rank per direction on the bottleneck link.

Sources:
- Thakur, Rabenseifner & Gropp 2005, "Optimization of Collective Communication Operations in MPICH"
  (ring, recursive halving/doubling, pairwise exchange).
- Patarasuk & Yuan 2009, "Bandwidth optimal all-reduce algorithms for clusters of workstations" (ring).
- Sanders, Speck & Träff 2009, "Two-tree algorithms for full bandwidth broadcast, reduction and scan"
  (double binary tree), as used by NCCL >= 2.4; NCCL's tuning model (src/graph/tuning.cc) gives tree
  all-reduce algbw = 0.5 * 0.92 * busBw.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

# NCCL tuning.cc: tree all-reduce bandwidth is min(busBw * .92, ...) with ratio 0.5.
NCCL_TREE_BW_FACTOR = 0.92


def ring_all_reduce_s(n: int, D: float, alpha_s: float, B: float) -> float:
    """Ring all-reduce = reduce-scatter + all-gather: 2(n-1)α + 2(n-1)/n · D/B (Patarasuk & Yuan 2009)."""
    if n <= 1:
        return 0.0
    return 2 * (n - 1) * alpha_s + 2 * (n - 1) / n * D / B


def ring_all_gather_s(n: int, D: float, alpha_s: float, B: float) -> float:
    """Ring all-gather (D = output) or reduce-scatter (D = input): (n-1)α + (n-1)/n · D/B (Thakur 2005)."""
    if n <= 1:
        return 0.0
    return (n - 1) * alpha_s + (n - 1) / n * D / B


def ring_broadcast_s(n: int, D: float, alpha_s: float, B: float) -> float:
    """Pipelined ring (chain) broadcast or reduce: (n-1)α + D/B for a long message."""
    if n <= 1:
        return 0.0
    return (n - 1) * alpha_s + D / B


def tree_all_reduce_s(n: int, D: float, alpha_s: float, B: float) -> float:
    """Double binary tree all-reduce (reduce then broadcast, two trees of D/2 each):
    2⌈log2 n⌉α + 2D/(0.92·B) (Sanders et al. 2009; NCCL tuning.cc tree factor)."""
    if n <= 1:
        return 0.0
    return 2 * math.ceil(math.log2(n)) * alpha_s + 2 * D / (NCCL_TREE_BW_FACTOR * B)


def rhd_all_reduce_s(n: int, D: float, alpha_s: float, B: float) -> float:
    """Rabenseifner: recursive-halving reduce-scatter + recursive-doubling all-gather:
    2 log2(n) α + 2(n-1)/n · D/B for n a power of two; otherwise Thakur et al.'s extra first and
    last step (ranks beyond the largest power of two fold in and out) adds 2(α + D/B)."""
    if n <= 1:
        return 0.0
    p2 = 1 << (n.bit_length() - 1)
    extra = 0.0 if p2 == n else 2 * (alpha_s + D / B)
    return 2 * math.log2(p2) * alpha_s + 2 * (p2 - 1) / p2 * D / B + extra


def rhd_all_gather_s(n: int, D: float, alpha_s: float, B: float) -> float:
    """Recursive doubling all-gather (or halving reduce-scatter): ⌈log2 n⌉α + (n-1)/n · D/B."""
    if n <= 1:
        return 0.0
    return math.ceil(math.log2(n)) * alpha_s + (n - 1) / n * D / B


def nvls_all_reduce_s(D: float, latency_s: float, B: float) -> float:
    """NVLink SHARP all-reduce: each GPU pushes D to the switch (multimem reduce) and pulls D back,
    so the bandwidth term is D/B, not 2(n-1)/n · D/B; plus a fixed start-up/fill cost."""
    return latency_s + D / B


def direct_all_to_all_s(n: int, D: float, alpha_s: float, parts: Sequence[tuple[float, float]]) -> float:
    """Pairwise-exchange all-to-all (Thakur 2005): (n-1)α + max_k(f_k · D / B_k).

    parts: (fraction f_k of the D bytes a rank sends that crosses level k, per-rank bandwidth B_k);
    the levels carry their shares concurrently.
    """
    if n <= 1:
        return 0.0
    return (n - 1) * alpha_s + max(f * D / b for f, b in parts)


def p2p_s(D: float, alpha_s: float, B: float) -> float:
    """Point-to-point send/recv: α + D/B."""
    return alpha_s + D / B
