"""`distscope simulate` end to end: symmetric directories, timeline, bad flags."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from distscope.trace.builder import CommOp, Group, LayerCost, StepSpec, build_traces
from distscope.trace.chakra_io import write_symmetric
from distscope.trace.graph import CollKind

SRC = Path(__file__).resolve().parents[2] / "src"
ASTRA = Path(__file__).resolve().parents[2] / "data" / "validation" / "astra_sim"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "distscope", "simulate", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(SRC)},
    )


def test_symmetric_directory_and_timeline(tmp_path: Path) -> None:
    tp = CommOp(group=Group.TP, kind=CollKind.ALL_REDUCE, size_bytes=1 << 20)
    layer = LayerCost(
        name="blk",
        fwd_s=1e-3,
        bwd_s=2e-3,
        fwd_comm=(tp,),
        bwd_comm=(tp,),
        grad_comm=(CommOp(group=Group.DP, kind=CollKind.ALL_REDUCE, size_bytes=1 << 24),),
    )
    spec = StepSpec(tp=8, dp=4, pp=2, micro_batches=4, stages=((layer,) * 2,) * 2, pp_bytes=1 << 22)
    write_symmetric(tmp_path / "sym", build_traces(spec, symmetric=True))
    timeline = tmp_path / "tl.json"
    proc = _run(
        str(tmp_path / "sym"),
        "--network",
        str(ASTRA / "net_2d_RingRing_64.yml"),
        "--system",
        str(ASTRA / "sys_ring_2d.json"),
        "--json",
        "--timeline",
        str(timeline),
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert len(out["ranks"]) == 64 and out["simulated_ranks"] == 2
    assert out["step_time_s"] > (4 + 1) * 2 * 3e-3  # at least the 1F1B compute critical path
    ev = json.loads(timeline.read_text())["traceEvents"]
    assert {e["pid"] for e in ev} == {0, 32}


def test_bad_flags_are_one_line(tmp_path: Path) -> None:
    proc = _run(
        str(tmp_path),
        "--network",
        str(ASTRA / "net_1d_Ring_64.yml"),
        "--system",
        str(ASTRA / "sys_ring_1d.json"),
        "--network-mode",
        "sharde",
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        "distscope: error: --network-mode='sharde' is not one of ['unaware', 'shared']; closest: shared, unaware"
    )
    proc = _run(str(tmp_path), "--network", str(tmp_path / "none.yml"), "--system", str(ASTRA / "sys_ring_1d.json"))
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1 and "none.yml" in proc.stderr
    bad = tmp_path / "bad.yml"
    bad.write_text("topology: [ Torus ]\nnpus_count: [ 4 ]\nbandwidth: [ 50 ]\nlatency: [ 1 ]\n")
    proc = _run(str(tmp_path), "--network", str(bad), "--system", str(ASTRA / "sys_ring_1d.json"))
    assert proc.returncode == 2 and "topology[0]='Torus'" in proc.stderr
