import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"


def run_cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "distscope", *args], capture_output=True, text=True,
                          timeout=timeout, env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"})


def test_help_lists_bench() -> None:
    out = run_cli("compress", "--help")
    assert out.returncode == 0 and "bench" in out.stdout


def test_bad_numel_is_one_line_error() -> None:
    out = run_cli("compress", "bench", "--numel", "1000")
    assert out.returncode == 2
    assert out.stderr.strip().count("\n") == 0 and "numel=1000" in out.stderr
