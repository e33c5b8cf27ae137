"""What a collective's scale-out traffic does on a fabric: its flows, their completion, the hot links.

A process group's collective runs in every group of its kind at once (an SPMD step: all DP groups reduce
together), so the pattern is the union over the group's siblings: the groups {b + i*stride} that tile the
ranks. Per group, members are grouped by scale-up domain (c per domain, D domains):

- ring collectives (all-reduce, reduce-scatter, all-gather): NCCL runs one ring per channel and crosses
  each domain boundary on a rail-aligned NIC, so every step member j of domain i sends to member j of
  domain i+1 (mod D): c·D flows per group, all of one size, the same flows in each of the ring's steps
  (Thakur, Rabenseifner & Gropp 2005: 2(n-1) steps of D/n for an all-reduce);
- all-to-all: every member to every member of another domain, D/n bytes each.

The fabric's verdict is the slowdown of that step against a non-blocking fabric of the same NICs (the hose
model: each GPU limited only by its own injection and ejection bandwidth): factor = T_hose / T_fabric <= 1.
A ring step ends with its slowest flow, so one ECMP collision halves a ring's bandwidth.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence

import numpy as np

from distscope.comm.collective import Collective
from distscope.fabric.dcqcn import CongestionControl, dcqcn_transfer
from distscope.fabric.flows import transfer
from distscope.fabric.routing import Router, Routing, route_all
from distscope.fabric.spec import Fabric

PATTERN_BYTES = 1 << 20  # the pattern's flow size: max-min completion scales with it, so the factor does not


def tiling_shape(members: Sequence[int], world: int) -> tuple[int, int] | None:
    """(size, stride) of an evenly spaced group whose shape tiles the `world` ranks (megatron-style
    strided groups); None for any other group, or one of fewer than two ranks."""
    ms = sorted(members)
    if len(ms) < 2:
        return None
    stride = ms[1] - ms[0]
    if any(b - a != stride for a, b in itertools.pairwise(ms)) or world % (len(ms) * stride):
        return None
    return len(ms), stride


def siblings(members: Sequence[int], world: int) -> list[tuple[int, ...]]:
    """The groups of the same shape that tile the ranks, or the group alone when its shape does not tile
    `world` (tiling_shape)."""
    shape = tiling_shape(members, world)
    if shape is None:
        return [tuple(sorted(members))]
    n, stride = shape
    return [tuple(blk + r + i * stride for i in range(n)) for blk in range(0, world, n * stride) for r in range(stride)]


def pattern(fabric: Fabric, groups: Sequence[tuple[int, ...]], kind: Collective) -> list[tuple[int, int]]:
    """(src, dst) of one step's scale-out flows of `kind` over `groups` (module docstring)."""
    pairs: list[tuple[int, int]] = []
    for g in groups:
        by_dom: dict[int, list[int]] = {}
        for r in g:
            by_dom.setdefault(fabric.domain_of(r), []).append(r)
        doms = sorted(by_dom)
        if len(doms) < 2:
            continue
        if kind is Collective.ALL_TO_ALL:
            pairs += [(s, d) for s in g for d in g if fabric.domain_of(s) != fabric.domain_of(d)]
            continue
        c = min(len(v) for v in by_dom.values())
        for i, dm in enumerate(doms):
            nxt = by_dom[doms[(i + 1) % len(doms)]]
            pairs += [(by_dom[dm][j], nxt[j]) for j in range(c)]
    return pairs


@dataclasses.dataclass(frozen=True, kw_only=True)
class StepVerdict:
    """One step of the pattern under one routing policy."""

    routing: Routing
    flows: int
    factor: float  # T_hose / T_fabric: the share of NIC bandwidth the step achieves
    fabric_s: float
    hose_s: float
    fct_s: np.ndarray  # per flow (sub-flows of a pair merged: the pair ends with its last queue pair)
    hot: tuple[tuple[str, float], ...]  # (link, utilization over the step), hottest first
    events: int
    cc: CongestionControl = CongestionControl.NONE
    max_queue_bytes: float = 0.0  # DCQCN: the deepest switch queue
    pause_s: float = 0.0  # DCQCN: the longest a queue held its senders at PFC's X_off
    marked_fraction: float = 0.0  # DCQCN: bytes sent while ECN-marked, over bytes sent


def hose_s(fabric: Fabric, pairs: Sequence[tuple[int, int]], nbytes: float) -> float:
    """Time of the pattern on a non-blocking fabric: the busiest NIC's bytes over its bandwidth."""
    out: dict[int, float] = {}
    inn: dict[int, float] = {}
    for s, d in pairs:
        out[s] = out.get(s, 0.0) + nbytes
        inn[d] = inn.get(d, 0.0) + nbytes
    return max([b / fabric.nic_Bps(g) for g, b in out.items()] + [b / fabric.nic_Bps(g) for g, b in inn.items()],
               default=0.0)


def step_verdict(fabric: Fabric, router: Router, pairs: Sequence[tuple[int, int]], routing: Routing, *,
                 qps: int = 1, seed: int = 0, top: int = 5, fct: bool = False,
                 cc: CongestionControl = CongestionControl.NONE, flow_bytes: float = PATTERN_BYTES) -> StepVerdict:
    """The pattern's step under `routing`: its slowdown against the hose model, its hottest links and,
    with fct (always under DCQCN), every flow's completion time (else NaN). Without congestion control
    the rates are max-min fair and the slowdown does not depend on the flows' size; under DCQCN it does,
    so `flow_bytes` is each flow's real size (times scale with it in both)."""
    if not pairs:
        return StepVerdict(routing=routing, flows=0, factor=1.0, fabric_s=0.0, hose_s=0.0, fct_s=np.zeros(0), hot=(),
                           events=0, cc=cc)
    links, flows, fracs = route_all(router, pairs, routing, qps=qps, seed=seed)
    sizes = np.full(len(pairs) * qps, flow_bytes / qps, dtype=float)
    extra: dict[str, float] = {}
    if cc is CongestionControl.DCQCN:
        run = dcqcn_transfer(links, flows, fracs, sizes, fabric.cap_Bps, fabric.src < fabric.gpus)
        res = run.flows
        extra = {"max_queue_bytes": float(run.max_queue_bytes.max(initial=0.0)),
                 "pause_s": float(run.pause_s.max(initial=0.0)), "marked_fraction": run.marked_fraction}
    else:
        res = transfer(links, flows, fracs, sizes, fabric.cap_Bps, fct=fct)
    ideal = hose_s(fabric, pairs, flow_bytes)
    util = res.link_bytes / (fabric.cap_Bps * res.makespan_s)
    order = np.argsort(-util)[:top]
    hot = tuple((fabric.link_name(fabric.links[k]), float(util[k])) for k in order if util[k] > 0)
    per_pair = res.finish_s.reshape(len(pairs), qps).max(axis=1)
    return StepVerdict(routing=routing, flows=len(pairs), factor=min(1.0, ideal / res.makespan_s),
                       fabric_s=res.makespan_s, hose_s=ideal, fct_s=per_pair, hot=hot, events=res.events, cc=cc,
                       **extra)
