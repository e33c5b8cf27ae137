"""Apply a measured system profile (`distscope measure calibrate`) to a cluster's topology levels.

A profile holds, per topology level and op, a fit t(S) = α + β·S measured at `nranks` ranks. The
collective model prices a level by its bus bandwidth and per-hop latency, so each profiled level is
set from its all-reduce fit (the op the model leans on most; the first fitted op otherwise), read
through the same ring formula the model uses:
    bus bandwidth  B = factor(op, n) / β          (nccl-tests busbw; efficiency becomes 1)
    per-hop α_hop  = α / steps(op, n)             (ring: 2(n-1) for all-reduce, n-1 for AG/RS/A2A)
so an all-reduce of S bytes on n ranks of that level is priced α + β·S again, exactly. NVLS is turned
off on a profiled level and the algorithm is not re-chosen there: the measured fit already contains
whatever algorithm the library chose.

A `kernels` section (measure/kernel_profile.py) is attached to the cluster's device, where the
efficiency model (model/efficiency.py) prefers it over its analytic curve.

Profile level names map to cluster levels by name, or `intra_node`/`default` -> the innermost level,
`inter_node` -> the outermost.
"""

from __future__ import annotations

import dataclasses

from distscope.comm.collective import Collective
from distscope.errors import DistscopeError
from distscope.measure.profile import OpFit, SystemProfile
from distscope.system.topology import Cluster, Level

RING_STEPS = {
    Collective.ALL_REDUCE: lambda n: 2 * (n - 1),
    Collective.ALL_GATHER: lambda n: n - 1,
    Collective.REDUCE_SCATTER: lambda n: n - 1,
    Collective.ALL_TO_ALL: lambda n: n - 1,
    Collective.BROADCAST: lambda n: n - 1,
    Collective.SEND_RECV: lambda n: 1,
}


def _level_index(cluster: Cluster, name: str) -> int:
    names = [lv.name for lv in cluster.levels]
    if name in names:
        return names.index(name)
    if name in ("intra_node", "default"):
        return 0
    if name == "inter_node":
        return len(cluster.levels) - 1
    raise DistscopeError(
        f"profile level {name!r} matches no level of cluster {cluster.name}; use one of: "
        f"{', '.join(names)}, intra_node, inter_node, default"
    )


def _pick(fits: dict[Collective, OpFit]) -> tuple[Collective, OpFit]:
    for op in (Collective.ALL_REDUCE, *RING_STEPS):
        if op in fits and fits[op].nranks > 1 and fits[op].beta_s_per_byte > 0:
            return op, fits[op]
    raise DistscopeError(f"profile level has no usable fit among {', '.join(o.value for o in fits)}")


def calibrated_level(level: Level, fits: dict[Collective, OpFit]) -> Level:
    op, fit = _pick(fits)
    n = fit.nranks
    bus_Bps = op.busbw_factor(n) / fit.beta_s_per_byte
    return dataclasses.replace(
        level, bw_GBps=bus_Bps / 1e9, efficiency=1.0, latency_s=fit.alpha_s / RING_STEPS[op](n),
        nvls_efficiency=0.0, nvls_latency_s=0.0, profiled=True,
    )


def apply_profile(cluster: Cluster, profile: SystemProfile) -> Cluster:
    """Measured links replace the profiled levels; measured kernel tables ride on the device."""
    levels = list(cluster.levels)
    for name, fits in profile.levels.items():
        k = _level_index(cluster, name)
        levels[k] = calibrated_level(levels[k], fits)
    device = cluster.device
    if profile.kernels is not None:
        device = dataclasses.replace(device, kernels=profile.kernels)
    return dataclasses.replace(cluster, name=f"{cluster.name}+{profile.name}", levels=tuple(levels), device=device)
