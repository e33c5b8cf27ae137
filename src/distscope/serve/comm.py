"""Communication of one serving replica, per iteration: TP all-reduce, PP send/recv, MoE expert parallel.

TP: two all-reduces of the [tokens, hidden] activations per layer (after attention and after the MLP,
Megatron/TRT-LLM/vLLM row-parallel layers). Decode messages are small (tokens·h·2 bytes: 1 MiB for 64
tokens of h = 8192), where latency, not bandwidth, decides; every serving stack therefore ships a
one-shot/two-shot NVLink all-reduce ("custom all-reduce": vLLM#2192, TRT-LLM's allReduce plugin,
SGLang). Its cost is α(n) + 2(n-1)/n · D / B, least-squares fitted to the H100 table of
sglang#2904 (TRT-LLM kernels, sizes 512 B - 1 MiB, tp 2/4/8): α = 2.9 µs + 0.5 µs·n (3.9/4.9/7.0 µs per
tp) and B = 61 GB/s = 0.165 of the NVLink ring bandwidth (369 GB/s), a ratio kept on other NVLink
generations. The stack picks the cheaper of it and NCCL's ring/tree/NVLS (`comm.select`), as vLLM does
by message size.
PP: one send/recv of [tokens, hidden] per stage boundary.
EP: experts sit inside the TP group (layout.py), so an MoE layer's output is combined by the same
all-reduce as a dense MLP's and adds no collective of its own; EP changes what each GPU computes and
reads (cost.py), not what it sends.
"""

from __future__ import annotations

import functools

from distscope.comm.collective import Collective
from distscope.comm.group import group_net
from distscope.comm.select import NCCL_CHOICES, REGISTRY
from distscope.system.topology import Cluster

CAR_ALPHA0_S = 2.9e-6  # custom all-reduce fixed cost (sglang#2904 fit, see module doc)
CAR_ALPHA_PER_RANK_S = 0.5e-6
CAR_BW_FRACTION = 0.165  # of the level's achieved ring bandwidth (61 of 369 GB/s on H100)
_PROBE_BYTES = 1e9


@functools.lru_cache(maxsize=1024)
def all_reduce_lines(cluster: Cluster, n: int, custom: bool) -> tuple[tuple[float, float], ...]:
    """(α_s, s per byte) of every all-reduce algorithm the stack may pick on a group of n consecutive
    GPUs; the cost of D bytes is min over lines of α + β·D (each algorithm is affine in D)."""
    if n <= 1:
        return ((0.0, 0.0),)
    g = group_net(cluster.with_gpus(max(n, cluster.num_gpus)), n, 1)
    lines: list[tuple[float, float]] = []
    for alg in NCCL_CHOICES[Collective.ALL_REDUCE]:
        fn = REGISTRY[(Collective.ALL_REDUCE, alg)]
        t1, t2 = fn(g, 1.0), fn(g, _PROBE_BYTES)
        if t1 is None or t2 is None:
            continue
        beta = (t2 - t1) / (_PROBE_BYTES - 1.0)
        lines.append((t1 - beta, beta))
    if custom and len(g.levels) == 1 and cluster.levels[0].bw_GBps >= 100:  # NVLink/xGMI-class intra-node only
        b = CAR_BW_FRACTION * g.bus_Bps
        lines.append((CAR_ALPHA0_S + CAR_ALPHA_PER_RANK_S * n, 2 * (n - 1) / n / b))
    return tuple(lines)


def all_reduce_s(lines: tuple[tuple[float, float], ...], nbytes: float) -> float:
    """One all-reduce of `nbytes` on the cheapest line."""
    return min(a + b * nbytes for a, b in lines)


@functools.lru_cache(maxsize=1024)
def p2p_line(cluster: Cluster, tp: int, pp: int) -> tuple[float, float]:
    """(α_s, s per byte) of a send/recv between consecutive pipeline stages (ranks tp apart)."""
    if pp <= 1:
        return (0.0, 0.0)
    g = group_net(cluster.with_gpus(max(tp * pp, cluster.num_gpus)), 2, tp)
    return (g.alpha_s, 1.0 / g.bus_Bps)


@functools.lru_cache(maxsize=1024)
def s_per_byte(cluster: Cluster, n: int) -> float:
    """Seconds per byte a rank moves on the ring of n consecutive GPUs (gathers, all-to-all shares)."""
    if n <= 1:
        return 0.0
    return 1.0 / group_net(cluster.with_gpus(max(n, cluster.num_gpus)), n, 1).bus_Bps
