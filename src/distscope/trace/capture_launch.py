"""Run a job (typically `torchrun ... train.py`) with the step capture switched on in every worker.

The job runs in its own process group and session; on timeout the whole group is killed (torchrun and
its workers), so nothing is left hanging. The job's own exit code is returned: a failed job leaves
whatever its ranks wrote in the output folder.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Sequence
from pathlib import Path

import distscope
from distscope.errors import DistscopeError

SHIM_DIR = Path(__file__).parents[1] / "measure" / "_shim"  # one shim serves measure log and trace capture
SRC_DIR = Path(distscope.__file__).resolve().parent.parent


def capture_env(out_dir: Path, step: int, dims: str = "", warmup: int = 0, profiled: int = 1) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(SHIM_DIR), str(SRC_DIR), *filter(None, [env.get("PYTHONPATH", "")])])
    env["DISTSCOPE_CAPTURE_DIR"] = str(out_dir.resolve())
    env["DISTSCOPE_CAPTURE_STEP"] = str(step)
    env["DISTSCOPE_CAPTURE_WARMUP"] = str(warmup)
    env["DISTSCOPE_CAPTURE_PROFILED"] = str(profiled)
    env["DISTSCOPE_COMMLOG_DIMS"] = dims
    # a rank that crashes in native code (SIGABRT, SIGSEGV) prints its Python stack before it dies
    env.setdefault("PYTHONFAULTHANDLER", "1")
    return env


def run_job(command: Sequence[str], env: dict[str, str], timeout_s: float) -> int:
    """The job's exit code; DistscopeError when it cannot start or runs past `timeout_s`."""
    if not command:
        raise DistscopeError("command is empty: give it after '--', e.g. -- torchrun --nproc-per-node 4 train.py")
    try:
        proc = subprocess.Popen(list(command), env=env, start_new_session=True)
    except FileNotFoundError:
        raise DistscopeError(f"command={command[0]!r} was not found") from None
    try:
        return proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        raise DistscopeError(f"command={' '.join(command)!r} ran past --timeout-s={timeout_s:g}; killed") from None
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        raise
