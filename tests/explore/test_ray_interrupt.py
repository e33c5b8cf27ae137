"""Ctrl-C on `explore --ray local` leaves no Ray process behind: interrupted while ray.init is still
starting the node (the raylet's agents are up), or while tasks run. Before the fix, an interrupt inside
ray.init left the DashboardAgent and RuntimeEnvAgent running for ~60 s.

Each case starts a real local Ray instance (15-40 s on the 2-core CI machine), hence `slow`."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from tests.explore.explore_support import spawn

pytest.importorskip("ray")
pytestmark = [pytest.mark.slow, pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")]

# 64 points of about a second each: minutes of work, so the sweep is still running when it is interrupted
# (8 points once finished before the interrupt arrived); an interrupted sweep stops early, so the size costs
# nothing when the fix works.
SLOW = ["--model", "llama3-70b", "--gpus", "1024", "--global-batch", "1024", "--vary", "hbm_GBps=2000:8000:8",
        "--vary", "nic_GBps=25:100:8", "--ray", "local", "--ray-cpus", "2", "--fresh"]


def _session(sid: int) -> dict[int, str]:
    """{pid: command line} of the live (non-zombie) processes of session `sid`."""
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_bytes()
            cmd = Path(f"/proc/{name}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        state, _ppid, _pgrp, session = stat[stat.rfind(b")") + 2 :].split()[:4]
        if int(session) == sid and state != b"Z":
            out[int(name)] = cmd.strip()
    return out


def _wait_for(sid: int, needles: tuple[str, ...], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if any(n in cmd for cmd in _session(sid).values() for n in needles):
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize(("phase", "needles"), [
    ("ray.init", ("ray::DashboardAgent", "ray::RuntimeEnvAgent", "dashboard/agent.py", "runtime_env/agent/main.py")),
    ("tasks running", ("ray::run_batch",)),
])
def test_ctrl_c_leaves_no_ray_process(tmp_path: Path, phase: str, needles: tuple[str, ...]) -> None:
    proc = spawn([*SLOW, "--out", str(tmp_path / "out.json")])
    sid = proc.pid  # spawn starts a new session: the driver leads it, Ray's processes stay in it
    try:
        assert _wait_for(sid, needles, 180), f"no {needles[0]} within 180 s: {_session(sid)}"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=90)
        assert proc.returncode == 130, (proc.returncode, err.decode()[-2000:])
        deadline = time.monotonic() + 10
        while (left := _session(sid)) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not left, f"interrupted during {phase}, still running 10 s after the driver exited: {left}"
    finally:
        for pid in _session(sid):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
