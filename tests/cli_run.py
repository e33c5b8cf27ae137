"""The CLI's entry point as a user runs it, in-process: (exit code, stdout + stderr), or the two apart."""

from __future__ import annotations

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
