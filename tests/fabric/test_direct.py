"""Torus and dragonfly fabrics (fabric/direct.py): their wiring, their shortest paths, and bad input."""

from __future__ import annotations

import collections
import subprocess
import sys
from pathlib import Path

import pytest

from distscope.errors import DistscopeError
from distscope.fabric.build import parse_fabric
from distscope.fabric.routing import Router, Routing
from distscope.fabric.spec import Plane

ROOT = Path(__file__).resolve().parents[2]


def _torus(dims: list[int], per: int = 1) -> dict:
    n = per
    for d in dims:
        n *= d
    return {"name": "t", "gpus": n, "torus": {"dims": dims, "gpus_per_router": per, "link_GBps": 100, "nic_GBps": 50}}


def _router_degree(f) -> collections.Counter:  # type: ignore[no-untyped-def]
    return collections.Counter(ln.src for ln in f.links if ln.src >= f.gpus and ln.dst >= f.gpus)


@pytest.mark.parametrize("dims", [[4, 4, 4], [8, 2], [3, 5], [2, 2, 2]])
def test_torus_wiring(dims: list[int]) -> None:
    f = parse_fabric(_torus(dims), "t.yaml")
    want = sum(2 if d > 2 else (1 if d == 2 else 0) for d in dims)
    assert set(_router_degree(f).values()) == {want}  # every router: both neighbours per dimension (one if 2)
    assert all(f.nic_Bps(g) == 50e9 for g in range(f.gpus))


def test_torus_shortest_paths_take_the_wrap_around() -> None:
    f = parse_fabric(_torus([8, 8]), "t.yaml")
    router = Router(f)
    for dst, hops in ((7, 1), (4, 4), (8 * 3 + 5, 3 + 3), (8 * 7 + 7, 2)):
        links, _ = router.route(0, dst, Routing.ECMP)
        assert len(links) == hops + 2  # NIC up, router hops, NIC down


def _dragonfly(p: int, a: int, h: int, g: int) -> dict:
    return {"name": "d", "gpus": p * a * g, "dragonfly": {"p": p, "a": a, "h": h, "groups": g, "nic_GBps": 25,
                                                          "local_GBps": 50, "global_GBps": 25}}


@pytest.mark.parametrize(("a", "h", "g"), [(4, 2, 9), (4, 2, 5), (8, 4, 8), (2, 1, 3)])
def test_dragonfly_wiring(a: int, h: int, g: int) -> None:
    f = parse_fabric(_dragonfly(2, a, h, g), "d.yaml")
    group = {i: f.names[i].split(".")[0] for i in range(f.gpus, len(f.names))}
    pairs: collections.Counter = collections.Counter()
    per_router: collections.Counter = collections.Counter()
    for ln in f.links:
        if ln.src >= f.gpus and ln.dst >= f.gpus and group[ln.src] != group[ln.dst]:
            pairs[frozenset((group[ln.src], group[ln.dst]))] += 1
            per_router[ln.src] += 1
    assert len(pairs) == g * (g - 1) // 2  # every pair of groups is joined
    assert set(pairs.values()) == {2 * ((a * h) // (g - 1))}  # evenly (two directed links per cable)
    assert max(per_router.values()) <= h  # no router has more global ports than it has
    assert all(f.nic_Bps(x) == 25e9 for x in range(f.gpus))


def test_dragonfly_minimal_route_is_local_global_local() -> None:
    f = parse_fabric(_dragonfly(2, 4, 2, 9), "d.yaml")
    router = Router(f)
    worst = max(len(router.route(0, dst, Routing.ECMP)[0]) for dst in range(8, f.gpus, 3))
    assert worst == 2 + 3  # NIC up, local, global, local, NIC down
    assert all(f.links[k].plane is Plane.OUT for k in router.route(0, f.gpus - 1, Routing.SPRAY)[0])


def _bound_share(f, pairs, policy: Routing) -> float:  # type: ignore[no-untyped-def]
    """Each flow's rate under the congestion bound of equal flows, as a share of its 25 GB/s NIC."""
    import numpy as np

    from distscope.fabric.flows import transfer
    from distscope.fabric.routing import route_all

    links, flows, fracs = route_all(Router(f), pairs, policy)
    res = transfer(links, flows, fracs, np.full(len(pairs), 1e9), f.cap_Bps, fct=False)
    return 1e9 / res.makespan_s / 25e9


@pytest.mark.parametrize(("p", "a", "h", "g"), [(2, 4, 2, 9), (3, 6, 3, 10)])
def test_dragonfly_adversarial_traffic_min_vs_valiant(p: int, a: int, h: int, g: int) -> None:
    """Kim, Dally, Scott & Abts (ISCA'08, sec. 4.2): when every GPU of group i sends to group i+1, minimal
    routing crowds a group's p*a GPUs onto the global cables to the next group (1 of them at g = a*h+1,
    a*h // (g-1) = 2 here at g = 10): 1/8 and 2/18 of a NIC each; Valiant's detour through a random
    router spreads them over every global cable at the price of crossing two: about half a NIC (all links
    at the NIC's rate; a 33-group, 1,056-GPU dragonfly gives 0.508, too slow for a unit test)."""
    f = parse_fabric(_dragonfly(p, a, h, g) | {"dragonfly": _dragonfly(p, a, h, g)["dragonfly"] | {"local_GBps": 25}},
                     "d.yaml")
    shift = [(x, (x + p * a) % f.gpus) for x in range(f.gpus)]
    cables = (a * h) // (g - 1)  # global cables between two groups
    assert _bound_share(f, shift, Routing.SPRAY) == pytest.approx(cables / (p * a))  # spread evenly over them
    assert _bound_share(f, shift, Routing.ECMP) <= cables / (p * a) * (1 + 1e-9)  # hashing can only do worse
    assert 0.45 <= _bound_share(f, shift, Routing.VALIANT) <= 0.6


def test_dragonfly_minimal_routes_never_take_two_global_hops() -> None:
    """A hop count would send some flows global-global through a third group (2 hops < local-global-local's 3)."""
    f = parse_fabric(_dragonfly(2, 4, 2, 9), "d.yaml")
    router = Router(f)
    group = {i: f.names[i].split(".")[0] for i in range(f.gpus, len(f.names))}
    for dst in range(8, f.gpus):
        links, _ = router.route(0, dst, Routing.ECMP)
        ends = [(f.links[k].src, f.links[k].dst) for k in links if f.links[k].src >= f.gpus and f.links[k].dst >= f.gpus]
        assert sum(group[u] != group[v] for u, v in ends) == 1


@pytest.mark.parametrize(("raw", "match"), [
    (_torus([4, 4]) | {"gpus": 15}, "dims \\[4, 4\\] x gpus_per_router 1 = 16 GPUs, but gpus=15"),
    ({"gpus": 4, "torus": {"dims": [2, 0], "link_GBps": 1}}, "dims=\\[2, 0\\]"),
    ({"gpus": 4, "torus": {"dims": [4], "link_GBps": 0}}, "link_GBps"),
    ({"gpus": 4, "torus": {"dims": [4], "link_GBps": 1, "wrap": 1}}, "wrap"),
    (_dragonfly(2, 4, 2, 10), "groups=10 \\(need 2..a\\*h\\+1 = 9"),
    (_dragonfly(2, 4, 2, 9) | {"gpus": 70}, "= 72 GPUs, but gpus=70"),
    (_torus([4]) | {"clos": {"nic_GBps": 50}}, "give one of clos, torus, dragonfly .*got clos, torus"),
    ({"gpus": 4, "dragonfly": [1, 2]}, "dragonfly: expected a mapping"),
])
def test_bad_direct_fabric_is_one_line(raw: dict, match: str) -> None:
    with pytest.raises(DistscopeError, match=match):
        parse_fabric(raw, "x.yaml")


@pytest.mark.parametrize(("example", "cluster"), [("torus.yaml", "dgx-h100"), ("dragonfly.yaml", "frontier")])
def test_examples_route_a_collective(example: str, cluster: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "distscope", "fabric", "collective", "--fabric",
                           str(ROOT / "examples" / "fabrics" / example), "--cluster", cluster, "--op", "all-to-all",
                           "--ranks", "0:64", "--bytes", "1e8", "--routing", "ecmp,spray"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "spray" in proc.stdout and "ecmp" in proc.stdout
