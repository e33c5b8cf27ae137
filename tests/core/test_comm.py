"""Collective cost models: textbook formulas, nccl-tests factors, and published nccl-tests busbw."""

import csv
import dataclasses
import math

import pytest

from distscope.comm import Algorithm, Collective, collective_time, group_net
from distscope.comm import algorithms as alg
from distscope.system import get_cluster, get_device

MiB = 2**20


def test_ring_and_rhd_formulas() -> None:
    n, D, a, B = 8, 1e9, 5e-6, 100e9
    # Thakur, Rabenseifner & Gropp 2005 / Patarasuk & Yuan 2009
    assert alg.ring_all_reduce_s(n, D, a, B) == pytest.approx(2 * 7 * a + 2 * 7 / 8 * D / B)
    assert alg.ring_all_gather_s(n, D, a, B) == pytest.approx(7 * a + 7 / 8 * D / B)
    assert alg.rhd_all_reduce_s(n, D, a, B) == pytest.approx(2 * 3 * a + 2 * 7 / 8 * D / B)
    # non power of two: extra fold-in/out steps make it strictly slower than the 8-rank cost
    assert alg.rhd_all_reduce_s(12, D, a, B) > alg.rhd_all_reduce_s(8, D, a, B)
    assert alg.direct_all_to_all_s(n, D, a, [(7 / 8, B)]) == pytest.approx(7 * a + 7 / 8 * D / B)
    assert alg.tree_all_reduce_s(n, D, a, B) == pytest.approx(2 * 3 * a + 2 * D / (0.92 * B))
    assert alg.ring_all_reduce_s(1, D, a, B) == 0.0


@pytest.mark.parametrize(("coll", "n", "factor"), [
    (Collective.ALL_REDUCE, 8, 2 * 7 / 8), (Collective.ALL_GATHER, 8, 7 / 8), (Collective.REDUCE_SCATTER, 4, 3 / 4),
    (Collective.ALL_TO_ALL, 16, 15 / 16), (Collective.BROADCAST, 8, 1.0), (Collective.SEND_RECV, 2, 1.0),
])
def test_nccl_tests_busbw_factors(coll, n, factor) -> None:
    # nccl-tests doc/PERFORMANCE.md
    assert coll.busbw_factor(n) == pytest.approx(factor)


def test_ring_busbw_equals_link_bandwidth_for_large_messages() -> None:
    # the defining property of the bus-bandwidth factor: a bandwidth-optimal ring reaches the link rate
    c = get_cluster("dgx-a100", 8)
    g = group_net(c, 8, 1)
    D = 16 * 2**30
    t, _ = collective_time(Collective.ALL_REDUCE, D, g, Algorithm.RING)
    busbw = D / t * Collective.ALL_REDUCE.busbw_factor(8)
    assert busbw == pytest.approx(c.levels[0].eff_Bps, rel=0.01)


def test_group_fanout_and_rail_bandwidth() -> None:
    c = get_cluster("dgx-a100", 1024)
    assert c.group_fanout(8, 1) == (8, 1)
    assert c.group_fanout(16, 8) == (1, 16)  # DP group of tp=8: one rank per node
    assert c.group_fanout(32, 1) == (8, 4)
    g = group_net(c, 32, 1)
    nic = c.levels[1].eff_Bps
    assert g.bus_Bps == pytest.approx(min(c.levels[0].eff_Bps, 8 * nic))  # 8 rails cross nodes in parallel
    assert group_net(c, 32, 1, rails=False).bus_Bps == pytest.approx(nic)
    assert group_net(c, 16, 8).bus_Bps == pytest.approx(nic)


def test_algorithm_choice_like_nccl() -> None:
    c = get_cluster("dgx-h100", 8)
    g = group_net(c, 8, 1)
    assert collective_time(Collective.ALL_REDUCE, 4 * 2**30, g)[1] is Algorithm.NVLS
    assert collective_time(Collective.ALL_REDUCE, 4096, g)[1] in (Algorithm.TREE, Algorithm.RING)
    multi = group_net(get_cluster("dgx-h100", 64), 64, 1)
    assert multi.nvls is None  # NVLS needs all ranks in one NVLink domain
    big = collective_time(Collective.ALL_REDUCE, 2**30, multi)
    assert big[1] is Algorithm.RING
    # the hierarchical composition is priced on request; with 4 NICs per node (12.5 GB/s per GPU) it
    # beats the ring across 2 nodes because it sends 1/8 of the data across nodes per GPU
    two = group_net(get_cluster("dgx-a100", 16).with_bandwidths({"ib": 12.5}), 16, 1)
    hier = collective_time(Collective.ALL_REDUCE, 2**30, two, Algorithm.HIERARCHICAL)[0]
    assert hier < collective_time(Collective.ALL_REDUCE, 2**30, two, Algorithm.RING)[0]


def _busbw(cluster, D: float) -> float:
    g = group_net(cluster, 8, 1)
    t, _ = collective_time(Collective.ALL_REDUCE, D, g)
    return D / t * Collective.ALL_REDUCE.busbw_factor(8) / 1e9


def test_dgx_h100_allreduce_sweep_within_15pct(validation_dir) -> None:
    """8-GPU all_reduce busbw vs data/validation/nccl_collectives.csv for messages >= 64 MiB.

    NVLS treatment: H100/H200/B200 NVLink levels carry an NVLink-SHARP all-reduce whose per-GPU traffic
    is D each way (not 2(n-1)/n·D), at 61% of line rate (nccl-tests#212: ~480 GB/s busbw ceiling on 450
    GB/s links) plus a fixed start-up/fill cost. NCCL picks it when cheaper, as the model does; ring-only
    figures (~370 GB/s) follow from the ring's 0.82 NVLink efficiency.
    """
    rows = list(csv.DictReader((validation_dir / "nccl_collectives.csv").open()))
    checked = 0
    c = get_cluster("dgx-h100", 8)
    for r in rows:
        if r["op"] != "all_reduce" or r["num_gpus"] != "8" or not r["msg_bytes"].isdigit() or not r["busbw_GBps"]:
            continue
        size = int(r["msg_bytes"])
        if size < 64 * MiB:
            continue
        measured = float(r["busbw_GBps"])
        assert _busbw(c, size) == pytest.approx(measured, rel=0.15), (r["run_id"], _busbw(c, size), measured)
        checked += 1
    assert checked >= 5


@pytest.mark.parametrize(("preset", "device", "nvlink_GBps", "measured"), [
    ("dgx-a100", "a100-sxm4-80gb", 300, 232.54),  # nccl-tests#175 peak, 8x A100 NVSwitch (ring)
    ("dgx-h200", "h200-sxm-141gb", 450, 475.0),  # nccl-tests#272 peak, H200 (NVLS)
    ("dgx-h100", "h800-sxm5-80gb", 200, 215.0),  # nccl#1374, H800 at 200 GB/s per direction (NVLS)
])
def test_peak_busbw_other_devices_within_15pct(preset, device, nvlink_GBps, measured) -> None:
    c = get_cluster(preset, 8).with_bandwidths({"nvlink": nvlink_GBps})
    c = dataclasses.replace(c, device=get_device(device))
    assert _busbw(c, 4 * 2**30) == pytest.approx(measured, rel=0.15)


def test_alltoall_and_p2p_levels() -> None:
    c = get_cluster("dgx-h100", 16)
    inside = group_net(c, 8, 1)
    across = group_net(c, 2, 8)
    t_in = collective_time(Collective.SEND_RECV, 1e9, inside)[0]
    t_out = collective_time(Collective.SEND_RECV, 1e9, across)[0]
    assert t_out / t_in == pytest.approx(c.levels[0].eff_Bps / c.levels[1].eff_Bps, rel=0.01)
    a2a = collective_time(Collective.ALL_TO_ALL, 1e9, group_net(c, 16, 1))[0]
    # half of each rank's data leaves the node through its own NIC
    assert a2a == pytest.approx(15 * c.levels[1].latency_s + 0.5e9 / c.levels[1].eff_Bps, rel=1e-6)
    assert math.isfinite(a2a)
