"""`distscope plan` end to end, as users run it (a subprocess on this worktree's src)."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

SRC = pathlib.Path(__file__).resolve().parents[2] / "src"
SMALL = ["--model", "llama3-8b", "--cluster", "dgx-h100", "--gpus", "8", "--global-batch", "16", "--seq", "4096",
         "--max-vp", "2", "--max-micro-batch", "2"]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(SRC), "COLUMNS": "160"}
    return subprocess.run([sys.executable, "-m", "distscope", "plan", *args], capture_output=True, text=True,
                          env=env, timeout=120)


def test_json_contract() -> None:
    r = run(*SMALL, "--json", "--top", "3")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert {"best", "top", "evaluated", "feasible", "search_s"} <= set(d)
    assert d["best"]["step_time_s"] == d["top"][0]["step_time_s"] and 0 < d["best"]["mfu"] < 1
    assert len(d["top"]) == 3 and 0 < d["feasible"] <= d["evaluated"]
    for k in ("tp", "pp", "vp", "cp", "ep", "dp", "micro_batch", "recompute", "zero_stage", "sequence_parallel"):
        assert k in d["best"]
    meg = d["megatron"]
    assert meg["problems"] == [] and "--tensor-model-parallel-size" in meg["text"] and d["why"]
    assert d["torchtitan"]["problems"] or "def distscope_plan" in d["torchtitan"]["text"]
    assert d["compression"]["speedup"] > 0 and d["compression"]["with"]["compression"] != "none"


def test_table_and_megatron_arguments() -> None:
    r = run(*SMALL, "--no-compression")
    assert r.returncode == 0, r.stderr
    assert "why #1 wins" in r.stdout and "--tensor-model-parallel-size" in r.stdout
    assert "torchtitan" in r.stdout and "distscope estimate" in r.stdout


def test_bad_input_is_one_line_exit_2() -> None:
    for args, needle in ((("--model", "llama3-7b"), "llama3-7b"), (("--top", "0"), "--top=0"),
                         (("--tp", "x"), "--tp"), (("--precision", "fp4"), "fp4")):
        r = run(*args, "--json")
        assert r.returncode == 2, (args, r.stderr)
        assert needle in r.stderr and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_nothing_fits_is_a_clear_error() -> None:
    r = run("--model", "llama3.1-405b", "--gpus", "8", "--global-batch", "8", "--json")
    assert r.returncode == 2 and "no plan fits" in r.stderr
