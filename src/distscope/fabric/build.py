"""Fabrics from YAML: an explicit node/link list, a generated rail-optimized Clos, or a torus or dragonfly
(direct.py); presets per cluster.

```yaml
name: my-fabric
gpus: 1024
scale_up: {size: 8, GBps: 450}            # NVLink domains of 8 consecutive ranks (omit: none)
clos:                                     # generated: rail-optimized two-tier leaf/spine
  nic_GBps: 50                            # per GPU, per direction (all planes together)
  rails: 8                                # GPU k of a domain uses rail k % rails
  radix: 64                               # ports per switch
  oversubscription: 1                     # leaf down:up ports
  planes: 1                               # Alibaba HPN dual-plane: 2 (each NIC port to its own plane)
  tiers: 2                                # 3: pods of leaves and spines under a core (default: 2 if it fits)
  latency_us: 1                           # per hop
# or explicit, instead of `clos`:
switches: [leaf0, leaf1, spine0]
links:                                    # each entry is a cable: two directed links
  - {a: gpu0, b: leaf0, GBps: 50}
```

Rail-optimized Clos (NVIDIA DGX SuperPOD reference architecture; Meta's RoCE fabric, SIGCOMM'24, sec. 3):
the NIC of GPU k of every node goes to a leaf of rail k; each leaf splits its radix into down and up ports
by the oversubscription o (down = radix·o/(1+o)); every leaf has one uplink to each spine of its plane.
Two tiers hold at most radix leaves per plane (radix · down GPUs). Three tiers (the fat-tree of Al-Fares
et al., SIGCOMM'08, rail-optimized as in Meta's and NVIDIA's larger fabrics): pods of radix/2 leaves (rails
× leaves per rail) and `up` spines, every leaf cabled to every spine of its pod; each spine has radix/2
down and radix/2 up ports; spine j of every pod goes to core group j (radix/2 cores), one cable per core,
so a core has one port per pod and there are at most radix pods.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from distscope.errors import DistscopeError
from distscope.fabric.direct import dragonfly, torus
from distscope.fabric.spec import Fabric, Link, Plane, node_index
from distscope.fabric.wiring import Wiring
from distscope.system.presets import get_cluster
from distscope.system.topology import Cluster
from distscope.userfile import check_keys as _check_keys
from distscope.userfile import int_field as _int
from distscope.userfile import num_field as _num
from distscope.userfile import read_yaml

_TOP = ("name", "gpus", "scale_up", "clos", "torus", "dragonfly", "switches", "links")
_SHAPES = ("clos", "torus", "dragonfly", "links")
_CLOS = ("nic_GBps", "rails", "radix", "oversubscription", "planes", "tiers", "latency_us")
_SCALE_UP = ("size", "GBps", "latency_us")


def _scale_up(gpus: int, su: dict[str, Any] | None, where: str) -> tuple[int, list[str], list[Link]]:
    """(domain size, switch names, links) of the NVLink domains: one switch node per domain."""
    if not su:
        return 1, [], []
    _check_keys(su, _SCALE_UP, f"{where} scale_up")
    size = _int(su, "size", f"{where} scale_up")
    bw = _num(su, "GBps", f"{where} scale_up") * 1e9
    lat = _num(su, "latency_us", f"{where} scale_up", 0.0, positive=False) * 1e-6
    if size == 1:
        return 1, [], []
    if gpus % size:
        raise DistscopeError(f"{where}: scale_up size={size} does not divide gpus={gpus}")
    names = [f"nvsw{d}" for d in range(gpus // size)]
    links = []
    for g in range(gpus):
        sw = gpus + g // size
        links += [Link(src=g, dst=sw, bw_Bps=bw, latency_s=lat, plane=Plane.UP),
                  Link(src=sw, dst=g, bw_Bps=bw, latency_s=lat, plane=Plane.UP)]
    return size, names, links


def _leaf_split(radix: int, oversubscription: float, where: str) -> tuple[int, int]:
    """(down, up) ports of a leaf."""
    down = max(1, math.floor(radix * oversubscription / (1 + oversubscription)))
    if radix - down < 1:
        raise DistscopeError(f"{where}: oversubscription={oversubscription} leaves no uplink on a {radix}-port leaf")
    return down, radix - down


def clos_tiers(gpus: int, rails: int, radix: int, oversubscription: float) -> int:
    """2 when a two-tier Clos holds `gpus` (module docstring), else 3."""
    down, _ = _leaf_split(radix, oversubscription, "clos")
    per_rail = math.ceil(gpus / rails)
    return 2 if rails * math.ceil(per_rail / down) <= radix else 3


def rail_clos(name: str, gpus: int, domain: int, up_names: list[str], up_links: list[Link], *, nic_GBps: float,
              rails: int, radix: int, oversubscription: float, planes: int, latency_s: float,
              tiers: int = 2) -> Fabric:
    """A rail-optimized two- or three-tier Clos under the scale-up domains (module docstring)."""
    where = f"fabric {name} clos"
    if radix < 2 or planes < 1 or rails < 1 or tiers not in (2, 3):
        raise DistscopeError(f"{where}: radix={radix} planes={planes} rails={rails} tiers={tiers} (need radix >= 2, "
                             "planes >= 1, rails >= 1, tiers 2 or 3)")
    down, up = _leaf_split(radix, oversubscription, where)
    if tiers == 3:
        return _three_tier(name, gpus, domain, up_names, up_links, nic_GBps=nic_GBps, rails=rails, radix=radix,
                           down=down, up=up, planes=planes, latency_s=latency_s)
    per_rail = -(-gpus // rails)
    leaves_per_rail = -(-per_rail // down)
    leaves = rails * leaves_per_rail
    if leaves > radix:
        raise DistscopeError(f"{where}: {leaves} leaves per plane need spines with more than radix={radix} ports "
                             f"(a two-tier Clos of radix {radix} holds {radix * down} GPUs at this oversubscription; "
                             "tiers: 3 holds more)")
    w = Wiring(gpus, up_names, up_links, nic_GBps * 1e9 / planes, latency_s)
    node, cable = w.node, w.cable

    for p in range(planes):
        tag = f"p{p}." if planes > 1 else ""
        leaf = [[node(f"{tag}leaf{r}.{i}") for i in range(leaves_per_rail)] for r in range(rails)]
        spines = [node(f"{tag}spine{j}") for j in range(up)]
        for g in range(gpus):
            r, k = _rail_leaf(g, domain, rails)
            cable(g, leaf[r][min(k // down, leaves_per_rail - 1)])
        for row in leaf:
            for lf in row:
                for sp in spines:
                    cable(lf, sp)
    return w.fabric(name, gpus, domain)


def _rail_leaf(g: int, domain: int, rails: int) -> tuple[int, int]:
    """(rail, position on the rail) of GPU g: GPU k of a domain goes to rail k % rails."""
    r = (g % domain) % rails if domain > 1 else g % rails
    k = (g // domain) * (domain // rails) + (g % domain) // rails if domain >= rails else g // rails
    return r, k


def _three_tier(name: str, gpus: int, domain: int, up_names: list[str], up_links: list[Link], *, nic_GBps: float,
                rails: int, radix: int, down: int, up: int, planes: int, latency_s: float) -> Fabric:
    """Pods of leaves and spines under core groups (module docstring)."""
    where = f"fabric {name} clos"
    half = radix // 2
    per_rail_pod = max(1, half // rails)  # leaves per rail in a pod
    if rails * per_rail_pod > half:
        raise DistscopeError(f"{where}: {rails} rails need more than radix/2={half} leaves per pod")
    pod_rail_gpus = per_rail_pod * down  # GPUs of one rail in one pod
    per_rail = -(-gpus // rails)
    pods = -(-per_rail // pod_rail_gpus)
    if pods > radix:
        raise DistscopeError(f"{where}: {pods} pods need cores with more than radix={radix} ports (a three-tier "
                             f"Clos of radix {radix} holds {radix * rails * pod_rail_gpus} GPUs here)")
    w = Wiring(gpus, up_names, up_links, nic_GBps * 1e9 / planes, latency_s)
    node, cable = w.node, w.cable

    leaves_per_pod = rails * per_rail_pod
    for p in range(planes):
        tag = f"p{p}." if planes > 1 else ""
        cores = [[node(f"{tag}core{j}.{c}") for c in range(half)] for j in range(up)]
        pod_leaves = []
        for pod in range(pods):
            leaf = [[node(f"{tag}pod{pod}.leaf{r}.{i}") for i in range(per_rail_pod)] for r in range(rails)]
            spines = [node(f"{tag}pod{pod}.spine{j}") for j in range(up)]
            for row in leaf:
                for lf in row:
                    for sp in spines:
                        cable(lf, sp)
            for j, sp in enumerate(spines):  # spine j's uplinks: one to each core of group j
                for c in cores[j][:leaves_per_pod]:
                    cable(sp, c)
            pod_leaves.append(leaf)
        for g in range(gpus):
            r, k = _rail_leaf(g, domain, rails)
            pod, i = divmod(k // down, per_rail_pod)
            cable(g, pod_leaves[min(pod, pods - 1)][r][i])
    return w.fabric(name, gpus, domain)


def parse_fabric(raw: Any, where: str) -> Fabric:
    if not isinstance(raw, dict):
        raise DistscopeError(f"{where}: expected a mapping with keys {', '.join(_TOP)}")
    _check_keys(raw, _TOP, where)
    name = str(raw.get("name", Path(where).stem))
    gpus = _int(raw, "gpus", where)
    domain, up_names, up_links = _scale_up(gpus, raw.get("scale_up"), where)
    given = [k for k in _SHAPES if k in raw]
    if len(given) != 1:
        raise DistscopeError(f"{where}: give one of clos, torus, dragonfly (generated) or switches + links (explicit)"
                             + (f"; got {', '.join(given)}" if given else ""))
    if given[0] in ("torus", "dragonfly"):
        body = raw[given[0]]
        if not isinstance(body, dict):
            raise DistscopeError(f"{where} {given[0]}: expected a mapping, got {body!r}")
        build = torus if given[0] == "torus" else dragonfly
        return build(name, gpus, domain, up_names, up_links, body, f"{where} {given[0]}")
    if "clos" in raw:
        c = raw["clos"] or {}
        _check_keys(c, _CLOS, f"{where} clos")
        w = f"{where} clos"
        rails = _int(c, "rails", w, min(domain, 8) if domain > 1 else 1)
        radix, over = _int(c, "radix", w, 64), _num(c, "oversubscription", w, 1.0)
        return rail_clos(name, gpus, domain, up_names, up_links, nic_GBps=_num(c, "nic_GBps", w), rails=rails,
                         radix=radix, oversubscription=over, planes=_int(c, "planes", w, 1),
                         latency_s=_num(c, "latency_us", w, 1.0, positive=False) * 1e-6,
                         tiers=_int(c, "tiers", w) if "tiers" in c else clos_tiers(gpus, rails, radix, over))
    names = [f"gpu{g}" for g in range(gpus)] + up_names + [str(s) for s in raw.get("switches") or []]
    index = {n: i for i, n in enumerate(names)}
    if len(index) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise DistscopeError(f"{where}: node {dup!r} is declared twice")
    links = list(up_links)
    for j, e in enumerate(raw["links"] or []):
        w = f"{where} links[{j}]"
        if not isinstance(e, dict):
            raise DistscopeError(f"{w}: expected {{a, b, GBps}}, got {e!r}")
        _check_keys(e, ("a", "b", "GBps", "latency_us"), w)
        a, b = node_index(index, e.get("a"), w), node_index(index, e.get("b"), w)
        bw = _num(e, "GBps", w, positive=False)
        if not bw > 0:
            raise DistscopeError(f"{w}: link {names[a]}-{names[b]} GBps={e.get('GBps')!r} (need > 0)")
        lat = _num(e, "latency_us", w, 1.0, positive=False) * 1e-6
        links += [Link(src=a, dst=b, bw_Bps=bw * 1e9, latency_s=lat, plane=Plane.OUT),
                  Link(src=b, dst=a, bw_Bps=bw * 1e9, latency_s=lat, plane=Plane.OUT)]
    return Fabric(name=name, gpus=gpus, domain=domain, names=tuple(names), links=tuple(links))


def load_fabric(path: str) -> Fabric:
    return parse_fabric(read_yaml(path, "--fabric"), path)


def fabric_for_cluster(cluster: Cluster, *, radix: int = 64, oversubscription: float = 1.0, planes: int = 1) -> Fabric:
    """The preset fabric of a cluster: its scale-up level as NVLink domains and a rail-optimized two-tier
    Clos at its scale-out level's NIC bandwidth, one rail per GPU of a node (8; an NVL72 tray's 4)."""
    if len(cluster.levels) != 2:
        raise DistscopeError(f"cluster {cluster.name}: a preset fabric needs two levels (scale-up, scale-out), "
                             f"it has {len(cluster.levels)}")
    inner, outer = cluster.levels
    gpus = cluster.num_gpus
    domain = min(inner.size, gpus)
    _, up_names, up_links = _scale_up(gpus, {"size": domain, "GBps": inner.bw_GBps,
                                             "latency_us": inner.latency_s * 1e6}, cluster.name)
    rails = 4 if domain > 8 else min(domain, 8)
    return rail_clos(f"{cluster.name}-{gpus}", gpus, domain, up_names, up_links, nic_GBps=outer.bw_GBps,
                     rails=rails, radix=radix, oversubscription=oversubscription, planes=planes,
                     latency_s=outer.latency_s / 2, tiers=clos_tiers(gpus, rails, radix, oversubscription))


def resolve(fabric: str | None, cluster: str, gpus: int | None) -> tuple[Fabric, Cluster]:
    """The fabric and the cluster it belongs to: the file's GPU count and scale-up domain must be the
    cluster's (one line naming both otherwise)."""
    if fabric is None:
        c = get_cluster(cluster, gpus)
        return fabric_for_cluster(c), c
    f = load_fabric(fabric)
    if gpus is not None and gpus != f.gpus:
        raise DistscopeError(f"--gpus {gpus} does not match fabric {f.name}'s {f.gpus} GPUs")
    c = get_cluster(cluster, f.gpus)
    inner = c.levels[0]
    if len(c.levels) == 2 and f.domain != min(inner.size, f.gpus):
        raise DistscopeError(f"fabric {f.name}: scale_up size={f.domain} but cluster {c.name}'s {inner.name} "
                             f"domain holds {inner.size} GPUs")
    return f, c
