"""The README's accuracy-and-speed figures are rendered from benchmarks/results/*.json (never typed by
hand): the block between the markers must equal what benchmarks/readme_figures.py renders now."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_readme_figures_match_benchmark_results() -> None:
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks/readme_figures.py"), "--check"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
