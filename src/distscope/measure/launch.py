"""Run a command (typically torchrun ...) with the comm logger switched on in every rank, then merge logs."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

import distscope
from distscope.errors import DistscopeError
from distscope.measure.calls import CommCall, load_calls

SHIM_DIR = Path(__file__).parent / "_shim"
SRC_DIR = Path(distscope.__file__).resolve().parent.parent


@dataclasses.dataclass(frozen=True, kw_only=True)
class LoggedRun:
    returncode: int
    calls: list[CommCall]
    stdout: str
    stderr: str


def logging_env(log_dir: Path, *, dims: str = "", watchdog_timeout_s: float | None = None) -> dict[str, str]:
    """The environment that makes every torchrun worker below it log (see `distscope.measure.autolog`)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(SHIM_DIR), str(SRC_DIR), *filter(None, [env.get("PYTHONPATH", "")])]
    )
    env["DISTSCOPE_COMMLOG_DIR"] = str(log_dir)
    env["DISTSCOPE_COMMLOG_DIMS"] = dims
    if watchdog_timeout_s is not None:
        env["DISTSCOPE_COMMLOG_WATCHDOG_S"] = str(watchdog_timeout_s)
    return env


def run_logged(
    command: Sequence[str],
    *,
    dims: str = "",
    watchdog_timeout_s: float | None = None,
    timeout_s: float = 600.0,
    capture: bool = True,
) -> LoggedRun:
    """Run `command`; return its exit code and the calls every rank logged (sorted by rank, start)."""
    if not command:
        raise DistscopeError(
            "command is empty: give it after '--', e.g. -- torchrun --nproc-per-node 4 train.py"
        )
    with tempfile.TemporaryDirectory(prefix="distscope-commlog-") as tmp:
        env = logging_env(Path(tmp), dims=dims, watchdog_timeout_s=watchdog_timeout_s)
        try:
            proc = subprocess.run(
                list(command),
                env=env,
                timeout=timeout_s,
                text=True,
                stdout=subprocess.PIPE if capture else None,
                stderr=subprocess.PIPE if capture else None,
            )
        except FileNotFoundError:
            raise DistscopeError(f"command={command[0]!r} was not found") from None
        except subprocess.TimeoutExpired:
            raise DistscopeError(f"command={' '.join(command)!r} ran past timeout_s={timeout_s}") from None
        calls: list[CommCall] = []
        for f in sorted(Path(tmp).glob("rank*.json")):
            calls.extend(load_calls(f))
    calls.sort(key=lambda c: (c.rank, c.start_s))
    return LoggedRun(
        returncode=proc.returncode, calls=calls, stdout=proc.stdout or "", stderr=proc.stderr or ""
    )
