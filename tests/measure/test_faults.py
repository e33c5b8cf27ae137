"""Hung collective -> named error within the watchdog timeout; slow rank -> named by arrival skew."""

from __future__ import annotations

import subprocess
import sys
import time

from measure_support import ROOT, SCRIPTS, env, torchrun

from distscope.measure.calls import load_calls
from distscope.measure.straggler import find_stragglers


def test_hung_collective_names_op_group_and_missing_rank(tmp_path):
    out = tmp_path / "log.json"
    t0 = time.monotonic()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "distscope",
            "measure",
            "log",
            "--out",
            str(out),
            "--watchdog-s",
            "3",
            "--timeout-s",
            "90",
            "--",
            *torchrun(str(SCRIPTS / "hang.py")),
        ],
        env=env(),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    elapsed = time.monotonic() - t0
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "distscope: error: command exited with code" in proc.stderr
    msgs = [ln for ln in (proc.stdout + proc.stderr).splitlines() if "hung collective" in ln]
    assert msgs, proc.stderr[-3000:]
    # every waiting rank (0, 1, 2) that reported names the all_reduce, the group and rank 3 as missing
    for m in msgs:
        assert "all_reduce of 4096 bytes (seq 2)" in m
        assert "ranks [0, 1, 2, 3]" in m and "did not complete within 3 s" in m
        assert m.endswith("ranks that did not arrive: [3]")
    assert elapsed < 40  # 60 s sleep on rank 3 and a 60 s gloo timeout: only the watchdog ends it early
    # the logs the waiting ranks dumped before exiting show the two completed all_reduces and the hung one
    calls = load_calls(out)
    assert {c.rank for c in calls} <= {0, 1, 2}
    hung = [c for c in calls if c.seq == 2]
    # (still open, or failed once the first rank that gave up closed its connections)
    assert hung and all(c.duration_s is None or c.error for c in hung)


def test_slow_rank_is_named_by_arrival_skew(tmp_path):
    proc = subprocess.run(
        torchrun(str(SCRIPTS / "slow_rank.py"), str(tmp_path), "2", "0.03"),
        env=env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    calls = [c for f in sorted(tmp_path.glob("rank*.json")) for c in load_calls(f)]
    assert {c.rank for c in calls} == {0, 1, 2, 3}
    report = find_stragglers(calls, threshold_s=0.01)
    assert report.stragglers == [2], report
    slow = next(r for r in report.ranks if r.rank == 2)
    assert slow.median_skew_s > 0.02 and slow.last_fraction > 0.8
    # the other ranks wait for rank 2, so their collectives last about as long as its sleep
    waiting = [c.duration_s for c in calls if c.rank != 2 and c.duration_s is not None]
    assert sorted(waiting)[len(waiting) // 2] > 0.015
