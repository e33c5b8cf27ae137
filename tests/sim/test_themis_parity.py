"""distscope's Themis scheduling (sim/themis.py) reproduces ASTRA-sim 2.0's own Themis finish times.

The reference (data/reference/astra_sim_themis) runs each collective under the baseline scheduler and under
Themis, on 64-NPU 2-D and 3-D networks with unequal dimension bandwidths (its README). Target (issue 23):
within 5% of every row; the test holds each row to 2%. Where ASTRA-sim's own NPUs disagree, the
prediction must fall within 2% of their [first, last] finish range.
"""

from __future__ import annotations

import csv
import re
import subprocess
import sys
from pathlib import Path

import pytest

from distscope.sim.astra_collective import DimSpan, collective_s
from distscope.sim.astra_config import read_network, read_system
from distscope.trace.graph import CollKind

REF = Path(__file__).resolve().parents[2] / "data" / "reference" / "astra_sim_themis"
ROWS = [r for r in csv.DictReader((REF / "themis_reference.csv").open())
        if r["backend"] == "congestion_unaware" and r["inter_dim"] in ("ascending", "themis")]
TOL = 0.02


def _range_ns(row: dict[str, str]) -> tuple[float, float]:
    m = re.search(r"min=(\d+);max=(\d+)", row["status"])
    return (float(m.group(1)), float(m.group(2))) if m else (float(row["finish_ns"]), float(row["finish_ns"]))


def _predict_ns(row: dict[str, str]) -> float:
    net = read_network(REF / "configs" / row["network"])
    system = read_system(REF / "configs" / row["system"], len(net.dims))
    spans = tuple(DimSpan(dim=i, size=d.npus_count) for i, d in enumerate(net.dims))
    return collective_s(CollKind[row["collective"]], int(row["comm_size_bytes"]), spans, net.dims, system, False) * 1e9


def test_reference_covers_the_matrix() -> None:
    themis = [r for r in ROWS if r["inter_dim"] == "themis"]
    assert len(themis) == 234 and len(ROWS) == 351
    assert {r["collective"] for r in themis} == {"ALL_REDUCE", "REDUCE_SCATTER", "ALL_GATHER"}
    assert {r["intra_dim"] for r in themis} == {"SCF", "FIFO"}


@pytest.mark.parametrize("row", ROWS, ids=[r["case"] for r in ROWS])
def test_finish_time_matches_astra_sim(row: dict[str, str]) -> None:
    got = _predict_ns(row)
    lo, hi = _range_ns(row)
    assert lo * (1 - TOL) <= got <= hi * (1 + TOL), f"{row['case']}: {got:.0f} ns vs ASTRA-sim {lo:.0f}..{hi:.0f}"


def test_themis_changes_the_answer_both_ways() -> None:
    """The scheduler is not a constant factor: Themis beats the baseline where the fast dimension comes
    last and loses where dimension 0 is already the fast one, in distscope as in ASTRA-sim."""
    by = {(r["network"], r["collective"], r["comm_size_bytes"], r["splits"], r["inter_dim"], r["intra_dim"]): r
          for r in ROWS}
    for net, faster in (("net_2d_RingRing_bw50-200.yml", True), ("net_2d_RingRing_bw200-50.yml", False)):
        key = (net, "ALL_REDUCE", str(64 << 20), "4")
        base, themis = by[(*key, "ascending", "FIFO")], by[(*key, "themis", "SCF")]
        assert (float(themis["finish_ns"]) < float(base["finish_ns"])) is faster
        assert (_predict_ns(themis) < _predict_ns(base)) is faster


def test_themis_through_simulate(tmp_path: Path) -> None:
    """The option reaches `distscope simulate` from the system JSON, on chakra_generator's traces."""
    row = next(r for r in ROWS if r["case"] == "T_unaware_ALL_REDUCE_64_16777216B_3dRFS_50-100-200_themis_s16")
    subprocess.run(["chakra_generator", "--num_npus", "64", "--default_comm_size", row["comm_size_bytes"]],
                   cwd=tmp_path, check=True, capture_output=True, timeout=120)
    proc = subprocess.run([sys.executable, "-m", "distscope", "simulate", str(tmp_path / "ALL_REDUCE"), "--network",
                           str(REF / "configs" / row["network"]), "--system", str(REF / "configs" / row["system"]),
                           "--network-mode", "unaware", "--json"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    import json

    got_ns = json.loads(proc.stdout)["step_time_s"] * 1e9
    assert got_ns == pytest.approx(float(row["finish_ns"]), rel=TOL)


def test_unmodelled_policy_is_one_line(tmp_path: Path) -> None:
    cfg = (REF / "configs" / "sys_ring_2d_flex_s4.json").read_text()
    (tmp_path / "sys.json").write_text(cfg)
    from distscope.errors import DistscopeError

    with pytest.raises(DistscopeError, match="inter-dimension-scheduling='offlineGreedyFlex' is not one of"):
        read_system(tmp_path / "sys.json", 2)
