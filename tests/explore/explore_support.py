"""Helpers for the explore tests: run the real CLI in-process or as a subprocess."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import sys
from pathlib import Path

from distscope.cli import main

REPO = Path(__file__).resolve().parents[2]
# Six cheap points (Llama 3 8B on 8 H100s, ~0.1-0.2 s of planning each).
SMALL = ["--model", "llama3-8b", "--gpus", "8", "--global-batch", "32",
         "--vary", "nic_GBps=25,50,100", "--vary", "hbm_GBps=2000,3000"]


def cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(["explore", *argv])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 0
    return code, out.getvalue(), err.getvalue()


def _default_sigint() -> None:
    # A shell without job control starts background commands with SIGINT ignored, and a Python started
    # with SIGINT ignored never turns Ctrl-C into KeyboardInterrupt: give the child the default, as a
    # terminal would, whatever ran the tests.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def spawn(argv: list[str]) -> subprocess.Popen[bytes]:
    """`python -m distscope explore ...` in its own session (so a test can kill it and its workers)."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.Popen([sys.executable, "-m", "distscope", "explore", *argv], env=env, cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                            preexec_fn=_default_sigint)
