"""Direct networks for HPC machines: torus and dragonfly, each GPU's NIC on a router of the network.

```yaml
torus:                      # k-ary n-cube (Blue Gene, TPU pods' ICI): routers on a wrap-around grid
  dims: [8, 8, 8]           # routers per dimension; GPUs = product x gpus_per_router
  gpus_per_router: 1
  link_GBps: 50             # each direction of each router-router cable
  nic_GBps: 50              # a GPU's port to its router
  latency_us: 0.5           # per hop
dragonfly:                  # Kim, Dally, Scott & Abts, ISCA'08 (Cray Slingshot, Frontier-class)
  p: 4                      # GPUs (NIC ports) per router
  a: 8                      # routers per group, all-to-all inside the group (local links)
  h: 4                      # global links per router
  groups: 33                # at most a*h + 1; GPUs = p * a * groups
  nic_GBps: 25
  local_GBps: 25
  global_GBps: 25
  latency_us: 0.5
```

Torus: each router cables to its +1 neighbour in every dimension of size > 2 (both neighbours, by the
wrap-around) and once to its single neighbour in a dimension of size 2. Dragonfly: the global links are
spread evenly over group pairs; with g groups every pair gets floor(a·h / (g-1)) of them (1 at the maximum
g = a·h + 1), group i's port k sitting on router k // h, ports in order of the target group (the
"consecutive" arrangement of Camarero, Vallejo & Beivide, ACM TACO 2014). Routing takes shortest paths
(routing.py): dimension-order-like on the torus, minimal on the dragonfly: a global cable counts
GLOBAL_COST hops in the routing metric, so a minimal route takes one global hop (local, global, local),
as the dragonfly's MIN routing does (Kim et al. sec. 4.2), never two global hops through a third group,
which a hop count would prefer where a router's own global link happens to lead there. `--routing
valiant` is its non-minimal answer to adversarial traffic (routing.py).
"""

from __future__ import annotations

import itertools
import math
from typing import Any

from distscope.errors import DistscopeError
from distscope.fabric.spec import Fabric, Link
from distscope.fabric.wiring import Wiring
from distscope.userfile import check_keys, int_field, num_field

TORUS_KEYS = ("dims", "gpus_per_router", "link_GBps", "nic_GBps", "latency_us")
DRAGONFLY_KEYS = ("p", "a", "h", "groups", "nic_GBps", "local_GBps", "global_GBps", "latency_us")
# a global hop's routing cost: above local + local, so one global hop with two local ones (1 + 3 + 1)
# is shorter than two global hops (3 + 3)
GLOBAL_COST = 3


def torus(name: str, gpus: int, domain: int, up_names: list[str], up_links: list[Link], raw: dict[str, Any],
          where: str) -> Fabric:
    """A k-ary n-cube of routers, `gpus_per_router` GPUs on each (module docstring)."""
    check_keys(raw, TORUS_KEYS, where)
    dims = raw.get("dims")
    if not isinstance(dims, list) or not dims or not all(isinstance(d, int) and d >= 1 for d in dims):
        raise DistscopeError(f"{where}: dims={dims!r} (need a list of router counts >= 1, e.g. [8, 8, 8])")
    per = int_field(raw, "gpus_per_router", where, 1)
    routers = math.prod(dims)
    if routers * per != gpus:
        raise DistscopeError(f"{where}: dims {dims} x gpus_per_router {per} = {routers * per} GPUs, but gpus={gpus}")
    link = num_field(raw, "link_GBps", where)
    nic = num_field(raw, "nic_GBps", where, link)
    net = Wiring(gpus, up_names, up_links, nic * 1e9, num_field(raw, "latency_us", where, 0.5, positive=False) * 1e-6)
    coords = list(itertools.product(*(range(d) for d in dims)))
    rid = {c: net.node("r" + "_".join(map(str, c))) for c in coords}
    for g in range(gpus):
        net.cable(g, rid[coords[g // per]])
    for c in coords:
        for axis, size in enumerate(dims):
            if size < 2 or (size == 2 and c[axis] == 1):
                continue  # no neighbour, or the pair's one cable already laid from coordinate 0
            nxt = list(c)
            nxt[axis] = (c[axis] + 1) % size
            net.cable(rid[c], rid[tuple(nxt)], link * 1e9)
    return net.fabric(name, gpus, domain)


def dragonfly(name: str, gpus: int, domain: int, up_names: list[str], up_links: list[Link], raw: dict[str, Any],
              where: str) -> Fabric:
    """Groups of `a` all-to-all routers, `p` GPUs per router, `h` global links per router (module docstring)."""
    check_keys(raw, DRAGONFLY_KEYS, where)
    p, a, h = (int_field(raw, k, where) for k in ("p", "a", "h"))
    g = int_field(raw, "groups", where)
    if g < 2 or g > a * h + 1:
        raise DistscopeError(f"{where}: groups={g} (need 2..a*h+1 = {a * h + 1}: each group has a*h global ports)")
    if p * a * g != gpus:
        raise DistscopeError(f"{where}: p {p} x a {a} x groups {g} = {p * a * g} GPUs, but gpus={gpus}")
    glob = num_field(raw, "global_GBps", where)
    local = num_field(raw, "local_GBps", where, glob)
    nic = num_field(raw, "nic_GBps", where, local)
    net = Wiring(gpus, up_names, up_links, nic * 1e9, num_field(raw, "latency_us", where, 0.5, positive=False) * 1e-6)
    router = [[net.node(f"g{i}.r{j}") for j in range(a)] for i in range(g)]
    for gpu in range(gpus):
        i, rest = divmod(gpu, p * a)
        net.cable(gpu, router[i][rest // p])
    for grp in router:
        for x, y in itertools.combinations(grp, 2):
            net.cable(x, y, local * 1e9)
    replicas = (a * h) // (g - 1)
    for r in range(replicas):
        for i, t in itertools.combinations(range(g), 2):
            port_i = r * (g - 1) + (t - 1)  # t > i: the targets of group i skip i itself
            port_t = r * (g - 1) + i
            net.cable(router[i][port_i // h], router[t][port_t // h], glob * 1e9, cost=GLOBAL_COST)
    return net.fabric(name, gpus, domain)
