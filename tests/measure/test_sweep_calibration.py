"""`distscope measure collectives --nproc 4` end to end on gloo, then calibration on that sweep."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from measure_support import ROOT, env

from distscope.comm.collective import Collective
from distscope.measure.calibrate import calibrate
from distscope.measure.profile import alpha_beta, load_profile
from distscope.measure.result import load_results

SMALL = [2**k for k in range(10, 17, 2)]  # 1 KiB .. 64 KiB, factor 4: the all-ops CLI check
# 2 .. 14 MiB in linear steps of 2 MiB (one regime of this host: below ~1 MiB gloo's time is flat, latency
# bound); 7 points, alternate ones held out.
SIZES = [(k + 1) << 21 for k in range(7)]


def _sweep(out, ops, sizes, iters, step_option):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "distscope",
            "measure",
            "collectives",
            "--nproc",
            "4",
            "--ops",
            ops,
            "--min-bytes",
            str(sizes[0]),
            "--max-bytes",
            str(sizes[-1]),
            *step_option,
            "--warmup",
            "2",
            "--iters",
            str(iters),
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


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    ops = "all_reduce,all_gather,reduce_scatter,all_to_all,broadcast,send_recv"
    return _sweep(tmp_path_factory.mktemp("sweep") / "gloo.json", ops, SMALL, 5, ["--steps", "4"])


def _held_out_errors(results):
    """Per op: relative errors of the fit (even-indexed sizes) on the odd-indexed sizes."""
    errors = {}
    for op in (Collective.ALL_REDUCE, Collective.ALL_GATHER):
        pts = sorted((r for r in results if r.op is op), key=lambda r: r.bytes)
        fitted, held = pts[::2], pts[1::2]
        a, b = alpha_beta(calibrate(fitted, name="ci-gloo"), "default")[op]
        errors[op] = [abs(a + b * r.bytes - r.time_s) / r.time_s for r in held]
    return errors


def _repeat_spread(a, b):
    """Per op: the largest relative difference between two sweeps' median times at one size."""
    tb = {(r.op, r.bytes): r.time_s for r in b}
    spread: dict[Collective, float] = {}
    for r in a:
        other = tb[(r.op, r.bytes)]
        spread[r.op] = max(spread.get(r.op, 0.0), abs(r.time_s - other) / min(r.time_s, other))
    return spread


# What the α-β line itself may miss by in this linear regime; everything above it is the host's noise,
# measured by the test. 2026-11-25 on this 2-core host under a load of ~6: held-out errors 2-3% (all-reduce)
# in the less disturbed sweep; 2-28% in all, with the two sweeps 17% (all-gather) and 33% (all-reduce) apart.
MODEL_TOLERANCE = 0.10


@pytest.fixture(scope="module")
def big_sweep(tmp_path_factory):
    """Two identical sweeps (medians over 30 iterations, interleaved across sizes so that interference from
    other processes spreads over all sizes). How far the two differ at one size is this host's noise right
    now: a shared host's load from other jobs moves a median by tens of percent (a fresh-clone run missed
    the fixed 25% bound this test had, with 25.7%), a quiet one by a few percent."""
    step = ["--step-bytes", str(SIZES[1] - SIZES[0])]
    runs = [
        load_results(_sweep(tmp_path_factory.mktemp("sweep") / f"gloo_big{i}.json", "all_reduce,all_gather", SIZES,
                            30, step)[0])
        for i in range(2)
    ]
    return runs, _repeat_spread(*runs)


def test_sweep_json_and_table(sweep):
    out, stdout = sweep
    assert "busbw GB/s" in stdout and "gloo, 4 ranks" in stdout
    rows = json.loads(out.read_text())["results"]
    assert {"op", "bytes", "dtype", "nranks", "time_s", "algbw_GBps", "busbw_GBps"} <= rows[0].keys()
    ops = {r["op"] for r in rows}
    assert ops == {"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "send_recv"}
    for r in rows:
        assert r["nranks"] == 4 and r["dtype"] == "float32" and r["bytes"] in SMALL
        assert r["time_min_s"] <= r["time_s"] <= r["time_max_s"]
        assert r["algbw_GBps"] == pytest.approx(r["bytes"] / r["time_s"] / 1e9)
        assert r["busbw_GBps"] == pytest.approx(r["algbw_GBps"] * Collective(r["op"]).busbw_factor(4))


def test_calibration_predicts_held_out_sizes(big_sweep, sweep, tmp_path):
    """Fitted on every other size, the line predicts the sizes in between: the median held-out error of each
    op and sweep within MODEL_TOLERANCE plus twice the repeat spread measured in the same session (one
    spread in the fitted points, one in the held-out point), and every held-out size within twice that.
    (A single size can sit off the line in both sweeps alike, which the spread does not see: gloo's
    all-gather at 4 MiB was 33% off with the sweeps 8% apart, fresh-clone CI on 2026-11-25.)"""
    import statistics

    runs, spread = big_sweep
    for i, results in enumerate(runs):
        for op, errs in _held_out_errors(results).items():
            bound = MODEL_TOLERANCE + 2 * spread[op]
            print(f"sweep {i} {op.value}: held-out errors {[round(e, 3) for e in errs]}, repeat spread "
                  f"{spread[op]:.3f}, bound {bound:.3f}")
            assert statistics.median(errs) < bound and max(errs) < 2 * bound, (i, op.value, errs, spread[op])
    # the CLI writes a profile that round-trips through the loader estimate uses
    prof_path = tmp_path / "profile.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "distscope",
            "measure",
            "calibrate",
            str(sweep[0]),
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
        Collective(o) for o in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "send_recv")
    }
    assert prof.device == "cpu"
