"""The comm logger's exit waits for the c10d worker threads to drop its future callbacks: a callback
dropped after the interpreter has begun finalizing aborts the process (SIGABRT, "terminate called without
an active exception"). Seen once in CI (2026-11-27, rank 2 of a 4-rank fp16-hook capture on a loaded 2-core
host). scripts/late_callback.py delays the drops while the program waits on a `then` of the future, as a
DDP comm hook does: 0.3 s (the logger must wait), or until finalization (the control, which must abort; a
fixed delay there let the process finish exiting first in 1 run of 4)."""

from __future__ import annotations

import subprocess

import pytest
from measure_support import SCRIPTS, env, torchrun


def _run(mode: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(torchrun(str(SCRIPTS / "late_callback.py"), mode, nproc=2), env=env(),
                          capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_exit_waits_for_late_callbacks() -> None:
    proc = _run("drain")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.count("done") == 2


@pytest.mark.slow
def test_without_the_wait_the_job_aborts() -> None:
    """The control: the job with the logger's wait switched off and its drops held until finalization dies
    of SIGABRT."""
    proc = _run("no-drain")
    assert proc.returncode != 0
    assert "terminate called without an active exception" in proc.stderr, proc.stderr[-2000:]
