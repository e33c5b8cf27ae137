"""distscope simulate reproduces ASTRA-sim's own finish times (astra_sim_reference.csv) within 1%.

Workloads are made by mlc-chakra's `chakra_generator`, exactly as the reference README describes.
congestion_unaware rows run with --network-mode unaware, congestion_aware rows with --network-mode shared.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from astra_reference import read_cases

from distscope.sim.api import simulate_traces
from distscope.sim.astra_config import read_network, read_system
from distscope.sim.network import AstraNetwork, NetworkMode
from distscope.trace.chakra_io import read_traces

SRC = Path(__file__).resolve().parents[2] / "src"
CASES = read_cases()


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[int, int], Path]:
    out = {}
    for npus, size in sorted({(c.npus, c.size_bytes) for c in CASES}):
        d = tmp_path_factory.mktemp(f"gen_{npus}npus_{size}B")
        subprocess.run(
            ["chakra_generator", "--num_npus", str(npus), "--default_comm_size", str(size)],
            cwd=d,
            check=True,
            capture_output=True,
            timeout=120,
        )
        out[npus, size] = d
    return out


def _mode(backend: str) -> NetworkMode:
    return NetworkMode.UNAWARE if backend == "congestion_unaware" else NetworkMode.SHARED


def test_reference_has_all_shapes() -> None:
    assert len(CASES) == 20
    assert {c.collective for c in CASES} == {"ALL_REDUCE", "ALL_TO_ALL"}
    assert {c.size_bytes for c in CASES} == {1 << 20, 64 << 20}


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_parity(case, generated) -> None:  # type: ignore[no-untyped-def]
    traces = read_traces(generated[case.npus, case.size_bytes] / case.collective)
    net = read_network(case.network)
    system = read_system(case.system, len(net.dims))
    mode = _mode(case.backend)
    result = simulate_traces(traces, AstraNetwork(net, system, mode), mode=mode)
    got_ns = result.step_time_s * 1e9
    assert got_ns == pytest.approx(case.finish_ns, rel=0.01), f"{case.name}: {got_ns:.0f} vs {case.finish_ns:.0f}"
    assert all(r.finish_s == result.step_time_s for r in result.ranks)  # same on all NPUs, as ASTRA-sim


@pytest.mark.parametrize(
    "name", ["L_unaware_ALL_REDUCE_64_67108864B_3dRingFCSw", "L_aware_ALL_TO_ALL_64_1048576B_1dSwitch"]
)
def test_parity_through_cli(name, generated) -> None:  # type: ignore[no-untyped-def]
    case = next(c for c in CASES if c.name == name)
    prefix = generated[case.npus, case.size_bytes] / case.collective
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "distscope",
            "simulate",
            str(prefix),
            "--network",
            str(case.network),
            "--system",
            str(case.system),
            "--network-mode",
            _mode(case.backend).value,
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(SRC)},
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert {"step_time_s", "ranks", "events", "wall_s"} <= set(out)
    assert out["step_time_s"] * 1e9 == pytest.approx(case.finish_ns, rel=0.01)
    assert len(out["ranks"]) == case.npus
    assert {"rank", "finish_s", "compute_s", "exposed_comm_s"} <= set(out["ranks"][0])
