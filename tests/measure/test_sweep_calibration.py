"""`distscope measure collectives --nproc 4` end to end on gloo, then calibration on that sweep."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import ROOT, env
from distscope.measure.calibrate import calibrate
from distscope.measure.ops import CollectiveOp, busbw_factor
from distscope.measure.profile import alpha_beta, load_profile
from distscope.measure.result import load_results

SIZES = [2**k for k in range(18, 25)]  # 256 KiB .. 16 MiB, factor 2: 7 points, alternate ones held out


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep") / "gloo.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "distscope",
            "measure",
            "collectives",
            "--nproc",
            "4",
            "--min-bytes",
            str(SIZES[0]),
            "--max-bytes",
            str(SIZES[-1]),
            "--steps",
            "2",
            "--warmup",
            "2",
            "--iters",
            "20",
            "--out",
            str(out),
            "--timeout-s",
            "170",
        ],
        env=env(),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out, proc.stdout


def test_sweep_json_and_table(sweep):
    out, stdout = sweep
    assert "busbw GB/s" in stdout and "gloo, 4 ranks" in stdout
    rows = json.loads(out.read_text())["results"]
    assert {"op", "bytes", "dtype", "nranks", "time_s", "algbw_GBps", "busbw_GBps"} <= rows[0].keys()
    ops = {r["op"] for r in rows}
    assert ops == {"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "send_recv"}
    for r in rows:
        assert r["nranks"] == 4 and r["dtype"] == "float32" and r["bytes"] in SIZES
        assert r["time_min_s"] <= r["time_s"] <= r["time_max_s"]
        assert r["algbw_GBps"] == pytest.approx(r["bytes"] / r["time_s"] / 1e9)
        assert r["busbw_GBps"] == pytest.approx(r["algbw_GBps"] * busbw_factor(CollectiveOp(r["op"]), 4))


def test_calibration_predicts_held_out_sizes_within_25_percent(sweep, tmp_path):
    out, _ = sweep
    results = load_results(out)
    for op in (CollectiveOp.ALL_REDUCE, CollectiveOp.ALL_GATHER):
        pts = sorted((r for r in results if r.op is op), key=lambda r: r.bytes)
        fitted, held = pts[::2], pts[1::2]
        prof = calibrate(fitted, name="ci-gloo", stat="min")
        a, b = alpha_beta(prof, "default")[op]
        errs = [abs(a + b * r.bytes - r.time_min_s) / r.time_min_s for r in held]
        assert max(errs) < 0.25, (op, errs, a, b)
    # the CLI writes a profile that round-trips through the loader estimate uses
    prof_path = tmp_path / "profile.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "distscope",
            "measure",
            "calibrate",
            str(out),
            "--out",
            str(prof_path),
            "--name",
            "ci-gloo",
            "--stat",
            "min",
        ],
        env=env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert "max_rel_err" in proc.stdout
    prof = load_profile(prof_path)
    assert set(alpha_beta(prof, "default")) == {
        CollectiveOp(o) for o in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "send_recv")
    }
    assert prof.device == "cpu"
