"""Routing flows over a fabric's shortest paths: ECMP, packet spraying, adaptive; Valiant's detour.

Shortest paths minimise the sum of the links' routing costs (`Link.cost`: 1 per hop, except a
dragonfly's global cables) on the flow's plane (scale-up inside a domain, scale-out between domains).
At every node the equal-cost next hops are the links whose cost plus their end's distance equals the
node's distance to the destination; each routing policy picks among them:

- ECMP: per flow, each switch hashes the flow's identity (src, dst, queue pair) with its own seed and
  takes one next hop. Collisions are reproducible for a seed (splitmix64 is the hash). Meta's RoCE fabric
  (SIGCOMM'24, sec. 5) and Alibaba HPN (SIGCOMM'24, sec. 2) describe the collisions that few, large,
  long-lived flows cause under per-flow hashing; more queue pairs per connection (E-ECMP) raise entropy.
- SPRAY: per packet, uniformly over the next hops at every switch: the flow's bytes split evenly down the
  shortest-path DAG (a link carries the fraction of the flow that reaches it).
- ADAPTIVE: per flow, at every hop the next hop whose link carries the least load (bytes per unit
  capacity) of the flows routed before it (congestion-aware placement, in flow order).
- VALIANT: per packet, a shortest path to an intermediate switch drawn uniformly from every switch of the
  plane, then a shortest path on to the destination, packets sprayed on both legs: the flow's bytes split
  evenly over the intermediates (Valiant & Brebner, STOC'81, two-phase randomised routing). On a
  dragonfly this is its non-minimal VAL routing (Kim, Dally, Scott & Abts, ISCA'08, sec. 4.2: a random
  intermediate group, here a random router of it, which may add a local hop): adversarial group-to-group
  traffic spreads over every global cable at the price of crossing two.

A route is a sparse vector: (link index, fraction of the flow's bytes on it).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import shortest_path

from distscope.enums import parse_list
from distscope.errors import DistscopeError
from distscope.fabric.spec import Fabric, Plane

_MASK = (1 << 64) - 1


class Routing(enum.Enum):
    ECMP = "ecmp"
    SPRAY = "spray"
    ADAPTIVE = "adaptive"
    VALIANT = "valiant"


def splitmix64(x: int) -> int:
    """Steele, Lea & Flood 2014 (SplitMix64): a fast, well-mixed 64-bit hash."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


class Router:
    """Next hops toward a GPU on a fabric's planes; distances from scipy's BFS over the switches."""

    def __init__(self, fabric: Fabric) -> None:
        self.f = fabric
        self._dist: dict[Plane, np.ndarray] = {}
        self._cands: dict[tuple[int, int, Plane], list[int]] = {}
        self._switches: dict[Plane, list[int]] = {}

    def switches(self, plane: Plane) -> list[int]:
        """The switches (and routers) that forward on `plane`: Valiant's intermediates."""
        hit = self._switches.get(plane)
        if hit is None:
            f = self.f
            hit = self._switches[plane] = sorted({ln.src for ln in f.links if ln.plane is plane and ln.src >= f.gpus})
        return hit

    def _switch_dist(self, plane: Plane) -> np.ndarray:
        """Routing distances (sums of Link.cost) between every pair of nodes over `plane`, GPUs not
        forwarding (their out-links are left out of the graph: a GPU can only end a path; the first hop is
        added by the caller). Unit costs: a BFS; otherwise Dijkstra."""
        d = self._dist.get(plane)
        if d is None:
            f = self.f
            keep = [k for k, ln in enumerate(f.links) if ln.plane is plane and ln.src >= f.gpus]
            n = len(f.names)
            cost = np.array([f.links[k].cost for k in keep], dtype=float)
            g = csr_matrix((cost, (f.src[keep], f.dst[keep])), shape=(n, n))
            d = self._dist[plane] = shortest_path(g, unweighted=bool((cost == 1).all()), directed=True)
        return d

    def plane(self, src: int, dst: int) -> Plane:
        f = self.f
        return Plane.UP if f.domain > 1 and f.domain_of(src) == f.domain_of(dst) else Plane.OUT

    def candidates(self, node: int, dst: int, plane: Plane) -> list[int]:
        """Equal-cost next-hop links from `node` toward GPU `dst`."""
        key = (node, dst, plane)
        hit = self._cands.get(key)
        if hit is None:
            hit = self._cands[key] = self._candidates(node, dst, plane)
        return hit

    def _candidates(self, node: int, dst: int, plane: Plane) -> list[int]:
        d = self._switch_dist(plane)[:, dst]
        links = self.f.links
        outs = self.f.out_links(node, plane)
        via = {k: links[k].cost + d[links[k].dst] for k in outs}
        best = min(via.values(), default=np.inf)
        if not np.isfinite(best):
            return []
        return [k for k in outs if via[k] == best]

    def route(self, src: int, dst: int, policy: Routing, *, key: int = 0, seed: int = 0,
              load: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(link indices, byte fractions) of one flow. `key` tells apart flows of one pair (queue pairs);
        `load` (bytes per capacity, per link) guides ADAPTIVE and is not changed here."""
        plane = self.plane(src, dst)
        links = self.f.links
        if policy in (Routing.SPRAY, Routing.VALIANT):
            out: dict[int, float] = {}
            if policy is Routing.SPRAY:
                self._spray(src, dst, plane, 1.0, out, src, dst)
            else:
                via = self.switches(plane)
                for m in via:
                    self._spray(src, m, plane, 1.0 / len(via), out, src, dst)
                    self._spray(m, dst, plane, 1.0 / len(via), out, src, dst)
            ks = np.fromiter(out, dtype=np.int64, count=len(out))
            return ks, np.fromiter(out.values(), dtype=float, count=len(out))
        path: list[int] = []
        u = src
        h = splitmix64((seed << 40) ^ (src << 20) ^ dst ^ (key << 52))
        while u != dst:
            cands = self.candidates(u, dst, plane)
            if not cands:
                raise _no_path(self.f, src, dst)
            if len(cands) == 1:
                k = cands[0]
            elif policy is Routing.ADAPTIVE and load is not None:
                k = min(cands, key=lambda c: (load[c], splitmix64(h ^ c) & 0xFFFF))
            else:
                k = cands[splitmix64(h ^ (u * 0x9E37)) % len(cands)]
            path.append(k)
            u = links[k].dst
            if len(path) > len(self.f.names):
                raise _no_path(self.f, src, dst)
        return np.array(path, dtype=np.int64), np.ones(len(path))


    def _spray(self, start: int, target: int, plane: Plane, frac: float, out: dict[int, float], src: int,
               dst: int) -> None:
        """Add to `out` the fractions `frac` of a flow puts on each link when sprayed from `start` to
        `target` down the shortest-path DAG (src, dst: the flow's ends, for the error)."""
        links = self.f.links
        share = {start: frac}
        while share:
            nxt: dict[int, float] = {}
            for u, part in share.items():
                if u == target:
                    continue
                cands = self.candidates(u, target, plane)
                if not cands:
                    raise _no_path(self.f, src, dst)
                each = part / len(cands)
                for k in cands:
                    out[k] = out.get(k, 0.0) + each
                    v = links[k].dst
                    nxt[v] = nxt.get(v, 0.0) + each
            share = nxt


def _no_path(f: Fabric, src: int, dst: int) -> DistscopeError:
    return DistscopeError(f"fabric {f.name}: no route from {f.names[src]} to {f.names[dst]}")


def route_all(router: Router, pairs: Sequence[tuple[int, int]], policy: Routing, *, qps: int = 1,
              seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Route every (src, dst) pair as `qps` sub-flows of equal size (NCCL_IB_QPS_PER_CONNECTION): COO
    triplets (link, sub-flow, fraction). Sub-flow j of pair i is column i*qps + j."""
    rows: list[np.ndarray] = []
    cols: list[np.ndarray] = []
    vals: list[np.ndarray] = []
    load = np.zeros(len(router.f.links)) if policy is Routing.ADAPTIVE else None
    inv_cap = 1.0 / router.f.cap_Bps
    for i, (s, d) in enumerate(pairs):
        for j in range(qps):
            ks, fr = router.route(s, d, policy, key=j, seed=seed, load=load)
            rows.append(ks)
            cols.append(np.full(len(ks), i * qps + j, dtype=np.int64))
            vals.append(fr)
            if load is not None:
                load[ks] += fr * inv_cap[ks]
    if not rows:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, np.zeros(0)
    return np.concatenate(rows), np.concatenate(cols), np.concatenate(vals)


def policies(text: str) -> list[Routing]:
    """--routing's comma list of policies."""
    return parse_list(Routing, text, "--routing", "policy")
