"""A measured profile round-trips into `estimate` and `validate`."""

import json
import subprocess
import sys

import pytest

from distscope.comm import Collective, collective_s, group_net
from distscope.measure.calibrate import fit_alpha_beta
from distscope.measure.profile import OpFit, SystemProfile, save_profile
from distscope.system import get_cluster
from distscope.system.calibrated import apply_profile
from tests.conftest import REPO


def _profile(alpha: float, beta: float, nranks: int, level: str = "nvlink") -> SystemProfile:
    sizes = [2**k for k in range(20, 28)]
    fit = fit_alpha_beta(sizes, [alpha + beta * s for s in sizes])
    of = OpFit(alpha_s=fit.alpha_s, beta_s_per_byte=fit.beta_s_per_byte, max_rel_err=0.0, n_points=len(sizes),
               min_bytes=sizes[0], max_bytes=sizes[-1], nranks=nranks, dtype="bf16")
    return SystemProfile(name="measured", levels={level: {Collective.ALL_REDUCE: of}}, source="synthetic sweep")


def test_profiled_allreduce_is_priced_as_measured() -> None:
    alpha, beta = 40e-6, 1 / 150e9
    c = apply_profile(get_cluster("dgx-h100", 8), _profile(alpha, beta, 8))
    g = group_net(c, 8, 1)
    for size in (1e6, 64e6, 1e9):
        assert collective_s(Collective.ALL_REDUCE, size, g) == pytest.approx(alpha + beta * size, rel=1e-6)
    assert g.nvls is None


def test_profile_cli_round_trip(tmp_path, validation_dir) -> None:
    p = tmp_path / "prof.json"
    save_profile(_profile(30e-6, 1 / 100e9, 8, level="intra_node"), p)
    env = {"PYTHONPATH": str(REPO / "src"), "COLUMNS": "200", "PATH": "/usr/bin:/bin"}
    code = "import sys; from distscope.cli import main; sys.argv=['distscope', *sys.argv[1:]]; main()"
    base = [sys.executable, "-c", code, "estimate", "--model", "llama3-8b", "--gpus", "8", "--tp", "8", "--json"]
    a = json.loads(subprocess.run(base, capture_output=True, text=True, env=env, timeout=120, check=True).stdout)
    b = json.loads(subprocess.run([*base, "--profile", str(p)], capture_output=True, text=True, env=env,
                                  timeout=120, check=True).stdout)
    assert b["comm_total_s"]["tp"] > a["comm_total_s"]["tp"]  # measured 100 GB/s bus < modelled NVLink
    r = subprocess.run([sys.executable, "-c", code, "validate", str(validation_dir / "published_runs.csv"),
                        "--json", "--profile", str(p)], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["mape_pct"] > 0
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    r = subprocess.run([*base, "--profile", str(bad)], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 2 and "schema" in r.stderr and "Traceback" not in r.stderr
