"""The CLI's entry point as a user runs it: in-process, (exit code, stdout + stderr) or the two apart; or as a
subprocess in the repository root."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from distscope.cli import main


def run_cli_parts(capsys: Any, *argv: str) -> tuple[int, str, str]:
    """(exit code, stdout, stderr)."""
    try:
        main(list(argv))
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def run_cli(capsys: Any, *argv: str) -> tuple[int, str]:
    code, out, err = run_cli_parts(capsys, *argv)
    return code, out + err


def run_subprocess(*args: str, ok: bool = True, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """`python -m distscope ARGS` in the repository root, as a user runs it; asserts the exit status."""
    proc = subprocess.run([sys.executable, "-m", "distscope", *args], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[1], timeout=timeout)
    assert (proc.returncode == 0) == ok, proc.stderr
    return proc
