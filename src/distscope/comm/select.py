"""Price a collective on a group, choosing the algorithm the way NCCL does: the cheapest per size.

Each (collective, algorithm) pair is registered next to its cost; `NCCL_CHOICES` lists what NCCL's
tuner picks from (ring, tree, NVLS for all-reduce; ring for all-gather/reduce-scatter/broadcast).
Recursive halving-doubling and hierarchical variants are priced on request (MPI, DeepSpeed hpZ,
ASTRA-sim style), not picked automatically.
"""

from __future__ import annotations

from collections.abc import Callable

from distscope.comm import algorithms as alg
from distscope.comm.collective import Algorithm, Collective
from distscope.comm.group import GroupNet
from distscope.errors import DistscopeError

CostFn = Callable[[GroupNet, float], "float | None"]


def _hier_all_reduce(g: GroupNet, D: float) -> float | None:
    """RS on each inner level (D, D/p0, ...), AR (cheaper of ring/tree) on the outermost, AG back down."""
    if len(g.levels) < 2:
        return None
    t, d = 0.0, D
    for p, a, b in g.levels[:-1]:
        t += 2 * alg.ring_all_gather_s(p, d, a, b)  # reduce-scatter down, all-gather up: same cost
        d /= p
    p, a, b = g.levels[-1]
    return t + min(alg.ring_all_reduce_s(p, d, a, b), alg.tree_all_reduce_s(p, d, a, b))


def _hier_all_gather(g: GroupNet, D: float) -> float | None:
    """Outer levels first on D/Π(p inner), then inner levels (output D at level 0)."""
    if len(g.levels) < 2:
        return None
    t, d = 0.0, D
    for p, a, b in g.levels:
        t += alg.ring_all_gather_s(p, d, a, b)
        d /= p
    return t


REGISTRY: dict[tuple[Collective, Algorithm], CostFn] = {
    (Collective.ALL_REDUCE, Algorithm.RING): lambda g, D: alg.ring_all_reduce_s(g.n, D, g.alpha_s, g.bus_Bps),
    (Collective.ALL_REDUCE, Algorithm.TREE): lambda g, D: alg.tree_all_reduce_s(g.n, D, g.alpha_s, g.bus_Bps),
    (Collective.ALL_REDUCE, Algorithm.RHD): lambda g, D: alg.rhd_all_reduce_s(g.n, D, g.alpha_s, g.bus_Bps),
    (Collective.ALL_REDUCE, Algorithm.NVLS): lambda g, D: (
        None if g.nvls is None else alg.nvls_all_reduce_s(D, g.nvls[0], g.nvls[1])
    ),
    (Collective.ALL_REDUCE, Algorithm.HIERARCHICAL): _hier_all_reduce,
    (Collective.ALL_GATHER, Algorithm.RING): lambda g, D: alg.ring_all_gather_s(g.n, D, g.alpha_s, g.bus_Bps),
    (Collective.ALL_GATHER, Algorithm.RHD): lambda g, D: alg.rhd_all_gather_s(g.n, D, g.alpha_s, g.bus_Bps),
    (Collective.ALL_GATHER, Algorithm.HIERARCHICAL): _hier_all_gather,
    (Collective.REDUCE_SCATTER, Algorithm.RING): lambda g, D: alg.ring_all_gather_s(g.n, D, g.alpha_s, g.bus_Bps),
    (Collective.REDUCE_SCATTER, Algorithm.RHD): lambda g, D: alg.rhd_all_gather_s(g.n, D, g.alpha_s, g.bus_Bps),
    (Collective.REDUCE_SCATTER, Algorithm.HIERARCHICAL): _hier_all_gather,
    (Collective.ALL_TO_ALL, Algorithm.DIRECT): lambda g, D: (
        alg.direct_all_to_all_s(g.n, D, g.alpha_s, g.a2a_parts) if g.a2a_parts else 0.0
    ),
    (Collective.BROADCAST, Algorithm.RING): lambda g, D: alg.ring_broadcast_s(g.n, D, g.alpha_s, g.bus_Bps),
    (Collective.REDUCE, Algorithm.RING): lambda g, D: alg.ring_broadcast_s(g.n, D, g.alpha_s, g.bus_Bps),
    (Collective.SEND_RECV, Algorithm.P2P): lambda g, D: alg.p2p_s(D, g.alpha_s, g.bus_Bps),
}

NCCL_CHOICES: dict[Collective, tuple[Algorithm, ...]] = {
    Collective.ALL_REDUCE: (Algorithm.RING, Algorithm.TREE, Algorithm.NVLS),
    Collective.ALL_GATHER: (Algorithm.RING,),
    Collective.REDUCE_SCATTER: (Algorithm.RING,),
    Collective.ALL_TO_ALL: (Algorithm.DIRECT,),
    Collective.BROADCAST: (Algorithm.RING,),
    Collective.REDUCE: (Algorithm.RING,),
    Collective.SEND_RECV: (Algorithm.P2P,),
}


def collective_time(
    coll: Collective, D: float, g: GroupNet, algorithm: Algorithm | None = None
) -> tuple[float, Algorithm]:
    """Seconds for one collective of D bytes on group g, and the algorithm that achieves it."""
    if g.n <= 1 or D <= 0:
        return 0.0, algorithm or NCCL_CHOICES[coll][0]
    if algorithm is not None:
        fn = REGISTRY.get((coll, algorithm))
        t = fn(g, D) if fn else None
        if t is None:
            raise DistscopeError(f"algorithm={algorithm.value} does not apply to {coll.value} on this group")
        return t, algorithm
    best: tuple[float, Algorithm] | None = None
    for a in NCCL_CHOICES[coll]:
        t = REGISTRY[(coll, a)](g, D)
        if t is not None and (best is None or t < best[0]):
            best = (t, a)
    assert best is not None
    return best


def collective_s(coll: Collective, D: float, g: GroupNet) -> float:
    return collective_time(coll, D, g)[0]
