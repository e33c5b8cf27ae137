"""The light main install (`pip install -e .`, no extras) in a fresh virtual environment.

1. Every core module imports there: an import of a package that `[project.dependencies]` does not
   declare fails this test (scipy once passed CI only because CI's environment happened to have it).
2. Every concrete README example runs there and exits 0, except those that need an extra
   (test_readme_examples.EXTRA_FOR): they exit 2 with one line that names the extra to install, never a
   traceback. This is the only run of the examples that need no extra (test_readme_examples runs the others
   in the full install): a README example runs once, in the lightest install that can run it.

The venv is created in a temporary directory on every run; pip installs from the configured index.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.core.test_readme_examples import EXAMPLES, SKIP, SLOW, concrete, extra_for

ROOT = Path(__file__).resolve().parents[2]
# modules that import an extra at module level, and the extra (everything else must import light)
EXTRA_MODULES = {
    "distscope.trace.chakra_io": "chakra",
    "distscope.explore.ray_engine": "ray",
    "distscope.trace.recorder": "torch",  # runs inside the captured job (trace capture), which has torch
}
# the top-level modules each extra provides (mlc-chakra installs `chakra` and needs protobuf's `google`)
EXTRA_TOP_LEVEL = {"chakra": ("chakra", "google"), "ray": ("ray",), "torch": ("torch",)}
# packages whose modules need torch by design (measure/, compress/): their torch-free modules are
# still imported; a torch ImportError there is expected
TORCH_PACKAGES = ("distscope.measure.", "distscope.compress.")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def light_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    venv = tmp_path_factory.mktemp("light") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    r = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "-e", str(ROOT)],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, f"pip install -e . failed:\n{r.stderr[-2000:]}"
    return venv


def _env(venv: Path) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if k.startswith(("PIP_", "LANG", "LC_", "HOME", "TMP"))}
    return {**keep, "PATH": f"{venv / 'bin'}:/usr/bin:/bin", "DISTSCOPE_PROGRESS": "0"}


IMPORT_ALL = """
import importlib, pkgutil, sys, distscope
bad = []
for m in pkgutil.walk_packages(distscope.__path__, "distscope."):
    if m.name.endswith("__main__"):
        continue  # running it is the CLI
    try:
        importlib.import_module(m.name)
    except ImportError as exc:
        bad.append(f"{m.name}\\t{exc.name}")
print("\\n".join(bad))
"""


def test_core_imports_without_extras(light_venv: Path) -> None:
    r = subprocess.run([str(light_venv / "bin" / "python"), "-c", IMPORT_ALL], capture_output=True, text=True,
                       timeout=600, env=_env(light_venv), cwd=light_venv.parent)
    assert r.returncode == 0, r.stderr[-2000:]
    wrong = []
    for line in filter(None, r.stdout.splitlines()):
        module, missing = line.split("\t")
        if module in EXTRA_MODULES and missing.split(".")[0] in EXTRA_TOP_LEVEL[EXTRA_MODULES[module]]:
            continue
        if module.startswith(TORCH_PACKAGES) and missing.split(".")[0] == "torch":
            continue
        wrong.append(f"{module}: No module named {missing!r}")
    assert not wrong, "the light install cannot import:\n" + "\n".join(wrong)


def test_readme_examples_on_the_light_install(light_venv: Path, tmp_path: Path) -> None:
    for d in ("data", "docs", "examples"):
        (tmp_path / d).symlink_to(ROOT / d)
    ran, hinted = 0, 0
    failures = []
    for example in EXAMPLES:
        argv = concrete(example)
        if argv is None or any(example.startswith(s) for s in SKIP):
            continue
        extra = extra_for(example)
        if extra is None and any(example.startswith(s) for s in SLOW) and not os.environ.get("DISTSCOPE_FULL_README"):
            continue
        r = subprocess.run([str(light_venv / "bin" / "distscope"), *argv[1:]], cwd=tmp_path, env=_env(light_venv),
                           capture_output=True, text=True, timeout=600)
        if extra is None:
            ran += 1
            if r.returncode != 0:
                failures.append(f"{example}\n  exit {r.returncode}: {r.stderr.strip()[-600:]}")
        elif r.returncode != 0:
            # one line, exit 2: the install hint naming the extra, or (an example that reads what an earlier
            # one could not write without the extra) the missing input
            lines = r.stderr.strip().splitlines()
            hint = re.search(rf"pip install .*distscope\[(?:{extra})\]", r.stderr)
            hinted += bool(hint)
            if r.returncode != 2 or "Traceback" in r.stderr or len(lines) != 1 or (
                    "not installed" in r.stderr and not hint):
                failures.append(f"{example}\n  needs [{extra}]: exit {r.returncode}, stderr: {r.stderr.strip()[-600:]}")
    assert not failures, "README examples on the light install:\n" + "\n".join(failures)
    assert ran >= 10 and hinted >= 2, (ran, hinted)
