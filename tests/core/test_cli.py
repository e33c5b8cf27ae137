"""The command line: JSON contracts, one-line errors, and a core that runs without torch."""

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO

ENV = {**os.environ, "PYTHONPATH": str(REPO / "src"), "COLUMNS": "200"}


def run(*args: str, block_torch: bool = False) -> subprocess.CompletedProcess:
    code = "import sys\n"
    if block_torch:
        code += "sys.modules['torch'] = None  # any import of torch now fails\n"
    code += "from distscope.cli import main\nsys.argv = ['distscope', *sys.argv[1:]]\nmain()\n"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=ENV, timeout=120)


def test_estimate_json_issue_example() -> None:
    r = run("estimate", "--model", "llama3-70b", "--cluster", "dgx-h100", "--gpus", "64", "--tp", "4", "--pp", "4",
            "--vp", "5", "--cp", "2", "--global-batch", "128", "--seq", "8192", "--precision", "bf16", "--json",
            block_torch=True)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    for k in ("step_time_s", "tokens_per_s", "mfu", "memory_per_gpu_bytes", "breakdown_s"):
        assert k in d
    assert d["plan"]["dp"] == 2 and d["plan"]["schedule"] == "interleaved-1f1b"


def test_defaults_and_tables_without_torch() -> None:
    r = run("estimate", block_torch=True)
    assert r.returncode == 0, r.stderr
    assert "step time" in r.stdout and "Where the step goes" in r.stdout


def test_validate_json_without_torch(validation_dir) -> None:
    r = run("validate", str(validation_dir / "published_runs.csv"), "--json", block_torch=True)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert set(d["rows"][0]) >= {"run_id", "predicted_step_time_s", "measured_step_time_s", "error_pct"}
    assert d["mape_pct"] <= 10


@pytest.mark.parametrize(("args", "needle"), [
    (["estimate", "--model", "llama3-7b"], "model='llama3-7b' is not in the catalog; closest: llama3-70b"),
    (["estimate", "--cluster", "dgx-h10"], "cluster='dgx-h10' is not a preset; closest: dgx-h100"),
    (["estimate", "--tp", "3"], "gpus=8 not divisible by tp*pp*cp=3"),
    (["estimate", "--recompute", "some"], "--recompute='some' is not valid"),
    (["estimate", "--link", "nvlnk=300"], "link 'nvlnk' is not a level"),
    (["validate", "/nonexistent.csv"], "does not exist"),
    (["estimate", "--model", "gpt3-175b", "--seq", "4096"], "--seq=4096 exceeds model gpt3-175b's learned position table"),
])
def test_bad_input_is_one_line(args, needle) -> None:
    r = run(*args)
    assert r.returncode == 2
    assert needle in r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_listings() -> None:
    assert "llama3.1-405b" in run("models").stdout
    out = run("clusters").stdout
    assert "frontier" in out and "mi250x-gcd" in out


def test_validate_exits_1_after_the_summary_when_a_row_fails(tmp_path, validation_dir) -> None:
    lines = (validation_dir / "published_runs.csv").read_text().splitlines()
    header, good, bad = lines[0], lines[1], lines[2].replace(",auto,2,1,1,32,", ",auto,3,1,1,32,", 1)
    assert bad != lines[2]
    (tmp_path / "runs.csv").write_text("\n".join([header, good, bad]) + "\n")
    r = run("validate", str(tmp_path / "runs.csv"), block_torch=True)
    assert r.returncode == 1
    assert "rows predicted: 1, failed: 1" in r.stdout
