"""The CLI's entry point as a user runs it, in-process: (exit code, stdout + stderr)."""

from __future__ import annotations

from typing import Any

from distscope.cli import main


def run_cli(capsys: Any, *argv: str) -> tuple[int, str]:
    try:
        main(list(argv))
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out + err
