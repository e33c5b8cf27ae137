"""Training steps simulated with the scale-out on a fabric (`simulate --fabric`, `plan --fabric`):
fabric/network.py prices each process group's collectives at the NIC share its SPMD step gets."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from distscope.fabric.build import fabric_for_cluster
from distscope.fabric.network import FabricChoice, FabricNetwork
from distscope.fabric.routing import Routing
from distscope.sim.cluster_network import ClusterNetwork
from distscope.system.presets import get_cluster
from distscope.trace.graph import CollKind

ROOT = Path(__file__).resolve().parents[2]
MOE = ["--model", "mixtral-8x7b", "--cluster", "dgx-h100", "--gpus", "256", "--tp", "2", "--ep", "8", "--pp", "2",
       "--global-batch", "512", "--micro-batch", "1", "--seq", "4096"]


def _ds(*args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "distscope", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=600)
    assert (proc.returncode == 0) == ok, proc.stderr
    return proc


@pytest.fixture(scope="module")
def moe_traces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("moe")
    _ds("trace", "generate", "--out", str(out), "--symmetric", *MOE)
    return out


def _step(traces: Path, *extra: str) -> dict:
    return json.loads(_ds("simulate", str(traces), "--cluster", "dgx-h100", "--gpus", "256", "--json", *extra).stdout)


def test_ecmp_collisions_slow_the_cross_node_all_to_all_and_spraying_removes_them(moe_traces: Path) -> None:
    levels = _step(moe_traces)["step_time_s"]
    ecmp = _step(moe_traces, "--fabric", "preset")
    spray = _step(moe_traces, "--fabric", "preset", "--routing", "spray")
    assert ecmp["step_time_s"] > 1.05 * levels  # EP 8 over 2 nodes (tp 2): its all-to-all crosses the spines
    assert spray["step_time_s"] == pytest.approx(levels, rel=1e-6)  # the preset Clos is 1:1: sprayed, non-blocking
    slow = [t for t in ecmp["fabric"]["traffic"] if t["factor"] < 0.999]
    assert [t["collective"] for t in slow] == ["all_to_all"] and slow[0]["group"].startswith("ep")
    assert slow[0]["hot"] and all(u > 0.5 for _, u in slow[0]["hot"])
    assert all(t["factor"] > 0.999 for t in spray["fabric"]["traffic"])


def test_dcqcn_prices_the_colliding_all_to_all_at_or_below_the_ideal_share(moe_traces: Path) -> None:
    ideal = _step(moe_traces, "--fabric", "preset")
    dcqcn = _step(moe_traces, "--fabric", "preset", "--cc", "dcqcn")
    assert dcqcn["fabric"]["cc"] == "dcqcn"
    assert dcqcn["step_time_s"] >= ideal["step_time_s"] * (1 - 1e-9)
    worst = min(t["factor"] for t in dcqcn["fabric"]["traffic"])
    assert worst <= min(t["factor"] for t in ideal["fabric"]["traffic"]) + 1e-9


def test_rail_aligned_data_parallel_ring_never_reaches_the_spines() -> None:
    """On a rail-optimized Clos a DP group of one GPU per node (stride = node size) stays on its rail's
    leaf: full NIC bandwidth under ECMP, and the level model's price."""
    c = get_cluster("dgx-h100", 256)
    net = FabricNetwork(c, FabricChoice(fabric=fabric_for_cluster(c), routing=Routing.ECMP, seed=3))
    dp = tuple(range(0, 256, 8))
    assert net.collective_s(CollKind.ALL_REDUCE, 1 << 28, dp, "dp") == pytest.approx(
        ClusterNetwork(c).collective_s(CollKind.ALL_REDUCE, 1 << 28, dp, "dp"), rel=1e-9)
    assert net.worst() == []


def test_plan_reranks_on_the_fabric_and_says_which_traffic_suffered() -> None:
    out = json.loads(_ds("plan", "--model", "mixtral-8x7b", "--cluster", "dgx-h100", "--gpus", "256", "--global-batch",
                         "512", "--seq", "4096", "--ep", "8", "--tp", "2", "--simulate-top", "2", "--top", "3",
                         "--fabric", "preset", "--json").stdout)
    assert out["fabric"] == {"name": "dgx-h100-256", "routing": "ecmp", "seed": 0, "cc": "none"}
    assert out["simulated"] and all("fabric" in s for s in out["simulated"])
    assert any(t["collective"] == "all_to_all" for s in out["simulated"] for t in s["fabric"])


@pytest.mark.parametrize("args, words", [
    (["simulate", "x", "--profile", "p.json", "--fabric", "preset"], "--fabric"),
    (["plan", "--fabric", "preset", "--simulate-top", "0"], "--simulate-top"),
    (["plan", "--fabric", "preset", "--routing", "ecmpp"], "ecmp"),
    (["plan", "--fabric", "no/such/fabric.yml"], "fabric.yml"),
])
def test_bad_fabric_flags_are_one_line(args: list[str], words: str) -> None:
    err = _ds(*args, ok=False).stderr.strip()
    assert "\n" not in err and words in err and "Traceback" not in err
