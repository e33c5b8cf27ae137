"""Fabrics: routing policies, max-min fair flows, collective patterns and the bad-input lines."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from distscope.cli import app, main
from distscope.comm.collective import Collective
from distscope.errors import DistscopeError
from distscope.fabric.build import fabric_for_cluster, parse_fabric
from distscope.fabric.collective import pattern, siblings, step_verdict
from distscope.fabric.flows import max_min_rates, transfer
from distscope.fabric.routing import Router, Routing, route_all
from distscope.system.presets import get_cluster


def clos(gpus: int, **kw: object) -> dict:
    return {"name": "t", "gpus": gpus, "scale_up": {"size": 8, "GBps": 450}, "clos": {"nic_GBps": 50, **kw}}


def verdict(raw: dict, members: tuple[int, ...], kind: Collective, pol: Routing, **kw: object):
    f = parse_fabric(raw, "t")
    return step_verdict(f, Router(f), pattern(f, siblings(members, f.gpus), kind), pol, **kw)


def test_a_non_blocking_rail_clos_gives_every_pattern_its_nic_bandwidth_when_sprayed() -> None:
    f = fabric_for_cluster(get_cluster("dgx-h100", 256))
    r = Router(f)
    for members, kind in ((tuple(range(256)), Collective.ALL_REDUCE), (tuple(range(0, 256, 8)), Collective.ALL_GATHER),
                          (tuple(range(64)), Collective.ALL_TO_ALL)):
        v = step_verdict(f, r, pattern(f, siblings(members, 256), kind), Routing.SPRAY)
        assert v.factor == pytest.approx(1.0, rel=1e-9), (members[:3], kind)


def test_rail_aligned_rings_never_collide_but_tor_rings_do_and_queue_pairs_help() -> None:
    """NCCL's rail-aligned ring sends one flow per rail across each leaf boundary: nothing for ECMP to
    collide. With every NIC of a node on one ToR (rails: 1), the 8 channels' flows leave the ToR together
    and per-flow hashing puts several on one uplink (Meta, SIGCOMM'24: low entropy); more queue pairs
    per connection spread them (E-ECMP)."""
    ring = tuple(range(512))
    rail = [verdict(clos(512), ring, Collective.ALL_REDUCE, Routing.ECMP, seed=s).factor for s in range(5)]
    assert rail == [1.0] * 5
    tor = [verdict(clos(512, rails=1), ring, Collective.ALL_REDUCE, Routing.ECMP, seed=s).factor for s in range(5)]
    assert max(tor) < 0.75
    qp16 = [verdict(clos(512, rails=1), ring, Collective.ALL_REDUCE, Routing.ECMP, seed=s, qps=16).factor
            for s in range(5)]
    assert np.mean(qp16) > np.mean(tor) + 0.1
    assert verdict(clos(512, rails=1), ring, Collective.ALL_REDUCE, Routing.SPRAY).factor == pytest.approx(1.0)
    # reproducible per seed
    assert verdict(clos(512, rails=1), ring, Collective.ALL_REDUCE, Routing.ECMP, seed=3).factor == tor[3]


def test_oversubscribed_leaf_slows_an_all_to_all_by_its_uplink_load() -> None:
    """12 GPUs on 8-port leaves at 3:1 (6 down, 2 up): two leaves; each GPU sends to 11 others, 6 across.
    A leaf's 2 uplinks carry 6 x 6 flows (18 each) while a NIC carries 11: sprayed, 11/18 of NIC speed."""
    raw = {"name": "o", "gpus": 12, "clos": {"nic_GBps": 50, "rails": 1, "radix": 8, "oversubscription": 3}}
    v = verdict(raw, tuple(range(12)), Collective.ALL_TO_ALL, Routing.SPRAY)
    assert v.factor == pytest.approx(11 / 18)
    assert v.hot[0][1] == pytest.approx(1.0)


@st.composite
def random_fabrics(draw: st.DrawFn) -> dict:
    leaves = draw(st.integers(2, 4))
    spines = draw(st.integers(1, 3))
    per = draw(st.integers(1, 3))
    gpus = leaves * per
    links = [{"a": f"gpu{g}", "b": f"leaf{g // per}", "GBps": draw(st.sampled_from([25, 50, 100]))} for g in range(gpus)]
    for lf in range(leaves):
        for sp in range(spines):
            for _ in range(draw(st.integers(1, 2))):
                links.append({"a": f"leaf{lf}", "b": f"spine{sp}", "GBps": draw(st.sampled_from([25, 50, 100]))})
    return {"name": "r", "gpus": gpus, "switches": [f"leaf{i}" for i in range(leaves)] + [f"spine{j}" for j in range(spines)],
            "links": links}


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.data())
def test_fluid_makespan_of_equal_simultaneous_flows_is_the_congestion_bound(data: st.DataObject) -> None:
    """The fast path (max link bytes / capacity) equals the event-by-event max-min fluid run."""
    raw = data.draw(random_fabrics())
    f = parse_fabric(raw, "r")
    n = f.gpus
    pairs = data.draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)).filter(lambda p: p[0] != p[1]),
                               min_size=1, max_size=30))
    pol = data.draw(st.sampled_from(list(Routing)))
    links, flows, fracs = route_all(Router(f), pairs, pol, seed=data.draw(st.integers(0, 9)))
    sizes = np.full(len(pairs), 1e6)
    full = transfer(links, flows, fracs, sizes, f.cap_Bps)
    fast = transfer(links, flows, fracs, sizes, f.cap_Bps, fct=False)
    assert fast.makespan_s == pytest.approx(full.makespan_s, rel=0.011)  # within the fluid run's 1% merging
    np.testing.assert_allclose(fast.link_bytes, full.link_bytes)


def test_max_min_rates_are_feasible_and_every_flow_has_a_saturated_bottleneck() -> None:
    from scipy.sparse import csr_matrix

    # link 0 (cap 1): flows 0, 1; link 1 (cap 1): flows 1, 2, 3; link 2 (cap 10): flow 0
    a = csr_matrix(np.array([[1, 1, 0, 0], [0, 1, 1, 1], [1, 0, 0, 0]], dtype=float))
    cap = np.array([1.0, 1.0, 10.0])
    r = max_min_rates(a, csr_matrix(a.T), cap, np.ones(4, dtype=bool), tol=0.0)
    np.testing.assert_allclose(r, [2 / 3, 1 / 3, 1 / 3, 1 / 3])
    assert (a @ r <= cap + 1e-12).all()


@pytest.mark.parametrize(("raw", "needle"), [
    ({"name": "z", "gpus": 2, "switches": ["s"], "links": [{"a": "gpu0", "b": "s", "GBps": 0},
                                                           {"a": "gpu1", "b": "s", "GBps": 50}]}, "GBps=0"),
    ({"name": "d", "gpus": 3, "switches": ["s"], "links": [{"a": "gpu0", "b": "s", "GBps": 50},
                                                           {"a": "gpu1", "b": "s", "GBps": 50}]}, "gpu2 is disconnected"),
    ({"name": "u", "gpus": 2, "switches": ["s"], "links": [{"a": "gpu0", "b": "sw", "GBps": 50}]}, "endpoint 'sw'"),
    ({"name": "k", "gpus": 2, "clos": {"nic_GBps": 50, "radixx": 4}}, "unknown key 'radixx'"),
    ({"name": "c", "gpus": 4096, "clos": {"nic_GBps": 50, "radix": 16, "tiers": 2}}, "leaves per plane"),
    ({"name": "c3", "gpus": 4096, "clos": {"nic_GBps": 50, "radix": 16}}, "64 pods need cores"),
    ({"name": "t", "gpus": 8, "clos": {"nic_GBps": 50, "tiers": 4}}, "tiers=4"),
    ({"name": "s", "gpus": 12, "scale_up": {"size": 8, "GBps": 450}, "clos": {"nic_GBps": 50}}, "does not divide"),
])
def test_bad_fabrics_are_one_line_naming_the_element(raw: dict, needle: str) -> None:
    with pytest.raises(DistscopeError, match=needle):
        parse_fabric(raw, "f.yml")


def test_cli_collective_and_bad_input(tmp_path, capsys) -> None:
    r = CliRunner().invoke(app, ["fabric", "collective", "--cluster", "dgx-h100", "--gpus", "64", "--op", "all-to-all",
                                 "--bytes", "1e8", "--json"], env={"DISTSCOPE_PROGRESS": "0"})
    assert r.exit_code == 0, r.output
    f = tmp_path / "f.yml"
    f.write_text("name: f\ngpus: 16\nscale_up: {size: 8, GBps: 450}\nclos: {nic_GBps: 50}\n")
    for argv, needle in ((["fabric", "show", "--fabric", str(f), "--gpus", "32"], "does not match"),
                         (["fabric", "collective", "--fabric", str(f), "--routing", "ecmpp"], "closest: ecmp"),
                         (["fabric", "collective", "--fabric", str(f), "--ranks", "0:99"], "rank 16 is outside"),
                         (["fabric", "show", "--fabric", str(tmp_path / "none.yml")], "does not exist"),
                         (["fabric", "show", "--fabric", str(tmp_path)], "is a directory"),
                         (["fabric", "collective", "--gpus", "2048", "--op", "all-to-all"], "routes; the limit")):
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == 2, argv
        err = capsys.readouterr().err.strip()
        assert needle in err and "\n" not in err, err


def test_published_ecmp_vs_multipath_gaps_within_ten_points() -> None:
    """Issue 23's target on the evidence rows that publish both shares (UCCL, OCI GB300): the model's
    multipath-minus-ECMP gap in NIC-share points, ECMP averaged over 20 hash seeds, within 10 points.
    Meta's row publishes only an 'up to 1.4' ratio, which the model misses (3.0; benchmarks/fabric_routing.py)."""
    import csv
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "data/evidence/fabric_routing.csv"
    with open(path, newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r["ecmp_nic_share"]]
    assert len(rows) >= 2
    for r in rows:
        raw = {"name": r["id"], "gpus": int(r["gpus"]), "scale_up": {"size": int(r["gpus_per_node"]), "GBps": 450},
               "clos": {"nic_GBps": float(r["nic_GBps"]), "rails": int(r["rails"]), "radix": int(r["radix"]),
                        "oversubscription": float(r["oversubscription"])}}
        f = parse_fabric(raw, r["id"])
        router, pairs = Router(f), pattern(f, siblings(tuple(range(f.gpus)), f.gpus), Collective.ALL_REDUCE)
        ecmp = np.mean([step_verdict(f, router, pairs, Routing.ECMP, qps=int(r["qps_ecmp"]), seed=s).factor
                        for s in range(20)])
        pol = Routing(r["multipath"])
        multi = np.mean([step_verdict(f, router, pairs, pol, qps=int(r["qps_multipath"]), seed=s).factor
                         for s in range(1 if pol is Routing.SPRAY else 20)])
        published = float(r["multipath_nic_share"]) - float(r["ecmp_nic_share"])
        assert abs((multi - ecmp) - published) <= 0.10, (r["id"], multi, ecmp, published)


def test_three_tier_clos_routes_through_the_core_and_holds_what_two_tiers_cannot() -> None:
    """16,384 H100s exceed a radix-64 two-tier Clos (2,048 GPUs): the preset grows a core tier. A rail's
    ring inside one pod stays on its leaf; across pods it crosses spine and core (4 switch hops)."""
    from distscope.fabric.build import clos_tiers

    assert clos_tiers(2048, 8, 64, 1.0) == 2 and clos_tiers(4096, 8, 64, 1.0) == 3
    c = get_cluster("dgx-h100", 4096)
    f = fabric_for_cluster(c)
    assert sum(n.startswith("core") for n in f.names) == 32 * 32  # up spines per pod x radix/2 cores per group
    r = Router(f)
    hops = {}
    for dst in (8, 4096 - 8):  # same rail: the next node (same pod) and the last node (another pod)
        links, _, _ = route_all(r, [(0, dst)], Routing.ECMP)
        hops[dst] = len(links)
    assert hops[8] == 2 and hops[4096 - 8] == 6  # gpu-leaf-gpu; gpu-leaf-spine-core-spine-leaf-gpu
    v = step_verdict(f, r, pattern(f, siblings(tuple(range(0, 4096, 8)), 4096), Collective.ALL_REDUCE), Routing.SPRAY)
    assert v.factor == pytest.approx(1.0, abs=1e-6)  # 1:1 at every tier: sprayed, non-blocking
