"""The entry point turns every kind of bad input into one line on stderr and exit code 2."""

from __future__ import annotations

import pytest

from distscope import __version__
from tests.cli_run import run_cli_parts


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    return run_cli_parts(capsys, *argv)


def test_version(capsys) -> None:
    code, out, _ = _run(capsys, "--version")
    assert code == 0 and out.strip() == f"distscope {__version__}"


@pytest.mark.parametrize(("argv", "needle"), [
    (("estimate", "--gpus", "abc"), "'abc'"),
    (("estimate", "--nope"), "--nope"),
    (("bogus",), "bogus"),
    (("validate",), "csv_file"),
    (("validate", "/nonexistent/runs.csv"), "/nonexistent/runs.csv"),
])
def test_usage_errors_are_one_line(capsys, argv, needle) -> None:
    code, _, err = _run(capsys, *argv)
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("distscope: error: ") and needle in err, err
    assert "Traceback" not in err
