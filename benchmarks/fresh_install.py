"""The README's first command on a fresh virtual environment: `pip install -e . && distscope plan`.
Times the install and the plan separately and lists what the light install pulled in (no torch, no
Chakra). Needs the package index (PyPI) to be reachable; pip's cache, if warm, makes it faster.

    python benchmarks/fresh_install.py
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _results import save

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    with tempfile.TemporaryDirectory() as d:
        venv = Path(d) / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
        py, cli = venv / "bin" / "python", venv / "bin" / "distscope"
        t0 = time.perf_counter()
        subprocess.run([str(py), "-m", "pip", "install", "-q", "-e", str(ROOT)], check=True, timeout=900,
                       cwd=d)
        t1 = time.perf_counter()
        r = subprocess.run([str(cli), "plan"], capture_output=True, text=True, timeout=600, cwd=d,
                           env={"PATH": str(venv / "bin"), "DISTSCOPE_PROGRESS": "0"})
        t2 = time.perf_counter()
        if r.returncode:
            raise SystemExit(f"distscope plan failed ({r.returncode}): {r.stderr[-500:]}")
        pkgs = subprocess.run([str(py), "-m", "pip", "list", "--format=freeze"], capture_output=True,
                              text=True, check=True, timeout=120).stdout.split()
        size_mb = sum(f.stat().st_size for f in venv.rglob("*") if f.is_file()) / 1e6
    names = sorted(p.split("==")[0].lower() for p in pkgs)
    save("fresh_install", {
        "install_s": round(t1 - t0, 1), "plan_s": round(t2 - t1, 1), "total_s": round(t2 - t0, 1),
        "target_s": 60, "meets_target": t2 - t0 < 60, "packages": len(names), "venv_MB": round(size_mb),
        "torch_installed": "torch" in names, "chakra_installed": any("chakra" in n for n in names),
    })


if __name__ == "__main__":
    main()
