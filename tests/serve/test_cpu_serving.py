"""CPU serving of a torch module as Packrat plans it (serve/cpu_plan.py, cpu_measure.py, `serve plan|measure
--model torch:...`): the optimizer against brute force, a real profile and side-by-side run of a small
CNN on this host's cores, and one-line refusals."""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.cli_run import run_cli

from distscope.errors import DistscopeError
from distscope.serve.cpu_plan import CpuPlan, CpuProfile, baseline, best_plan

CNN = '''
import torch
from torch import nn

def cnn():
    return nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 32, 3, stride=2, padding=1),
                         nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))
'''
CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def _brute(prof: CpuProfile, batch: int, cores: int) -> float:
    """min over every multiset of instances (t, b) with Σt <= cores and Σb = batch of max L(t, b)."""
    kinds = [(t, b) for t in range(1, cores + 1) for b in range(1, batch + 1)]
    best = float("inf")
    for n in range(1, min(cores, batch) + 1):
        for combo in itertools.combinations_with_replacement(kinds, n):
            if sum(t for t, _ in combo) <= cores and sum(b for _, b in combo) == batch:
                best = min(best, max(prof.at(t, b) for t, b in combo))
    return best


@settings(max_examples=60)
@given(cores=st.integers(1, 4), batch=st.integers(1, 6), alpha=st.floats(0.0, 1.0), fixed=st.floats(0.0, 0.01),
       noise=st.lists(st.floats(0.9, 1.1), min_size=24, max_size=24))
def test_dynamic_program_finds_the_brute_force_optimum(cores: int, batch: int, alpha: float, fixed: float,
                                                        noise: list[float]) -> None:
    prof = CpuProfile(tuple(tuple((b * 0.01 / t**alpha + fixed) * noise[(t - 1) * 6 + b - 1] for b in range(1, 7))
                            for t in range(1, 5)))
    plan = best_plan(prof, batch, cores)
    assert plan.batch == batch and plan.threads <= cores
    assert plan.latency_s == pytest.approx(max(prof.at(t, b) for t, b in plan.instances))
    assert plan.latency_s == pytest.approx(_brute(prof, batch, cores))
    assert plan.latency_s <= baseline(prof, batch, cores).latency_s


def test_sublinear_threads_split_the_batch_and_linear_ones_tie_to_one_instance() -> None:
    sub = CpuProfile(tuple(tuple(b * 0.01 / t**0.5 for b in range(1, 9)) for t in range(1, 5)))
    assert best_plan(sub, 8, 4).instances == ((1, 2),) * 4  # four narrow instances beat one wide one
    lin = CpuProfile(tuple(tuple(b * 0.01 / t for b in range(1, 9)) for t in range(1, 5)))
    assert best_plan(lin, 8, 4).instances == ((4, 8),)  # perfect scaling: the tie goes to fewer instances
    assert CpuPlan(((1, 2), (1, 2), (2, 3)), 1.0).label() == "1 x t2 b3 + 2 x t1 b2"


def test_out_of_profile_requests_are_one_line() -> None:
    prof = CpuProfile(((0.1, 0.2),))
    with pytest.raises(DistscopeError, match=r"cores=2: the profile covers 1\.\.1 threads"):
        best_plan(prof, 1, 2)
    with pytest.raises(DistscopeError, match="batch=3"):
        baseline(prof, 3, 1)


def _cli(capsys, *args: str) -> tuple[int, str]:  # type: ignore[no-untyped-def]
    return run_cli(capsys, "serve", *args)


def test_measure_profiles_plans_and_runs_for_real(capsys, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "cnn.py").write_text(CNN)
    code, out = _cli(capsys, "measure", "--model", f"torch:{tmp_path}/cnn.py:cnn", "--input", "x:1x3x32x32:fp32",
                     "--batches", "1,2", "--repeats", "2", "--json")
    assert code == 0, out
    res = json.loads(out)
    prof = res["profile"]["latency_s"]
    assert len(prof) == res["cores"] == CORES and all(len(r) == 2 and min(r) > 0 for r in prof)
    for run in res["runs"]:
        best = run["best"]
        assert best["latency_s"] > 0 and len(best["instance_median_s"]) >= 1
        assert best["predicted_latency_s"] == pytest.approx(
            max(prof[i["threads"] - 1][i["batch"] - 1] for i in best["instances"]))
        assert sum(i["batch"] for i in best["instances"]) == run["batch"]


@pytest.mark.skipif(CORES < 2, reason="two instances need two cores")
def test_two_pinned_instances_run_side_by_side(tmp_path: Path) -> None:
    from distscope.serve.cpu_measure import run_plan
    from distscope.workload.module_graph import parse_inputs

    (tmp_path / "cnn.py").write_text(CNN)
    got = run_plan(f"torch:{tmp_path}/cnn.py:cnn", parse_inputs("x:1x3x32x32:fp32"), CpuPlan(((1, 2), (1, 1)), 0.01), 2)
    assert len(got["instance_median_s"]) == 2 and got["latency_s"] == max(got["instance_median_s"])


@pytest.mark.parametrize(("args", "says"), [
    (("plan", "--input", "x:1x3x32x32:fp32", "--gpus", "4"), "--gpus is for serving catalog models on GPUs"),
    (("plan", "--input", "x:1x3x32x32:bf16"), "CPU serving runs fp32"),
    (("plan", "--input", "x:1x3x32x32:fp32", "--cores", "999"), "--cores=999 must be in 1.."),
    (("plan", "--input", "x:1x3x32x32:fp32", "--batches", "two"), "--batches='two'"),
    (("measure", "--input", "x:1x3x32x32:fp32", "--rate", "3"), "--rate is for serving catalog models"),
])
def test_bad_input_is_one_line(capsys, tmp_path: Path, args: tuple[str, ...], says: str) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "cnn.py").write_text(CNN)
    code, out = _cli(capsys, args[0], "--model", f"torch:{tmp_path}/cnn.py:cnn", *args[1:])
    assert code != 0 and says in out
    assert "Traceback" not in out and len(out.strip().splitlines()) == 1


def test_gpu_serving_refuses_the_cpu_flags(capsys) -> None:  # type: ignore[no-untyped-def]
    code, out = _cli(capsys, "plan", "--model", "llama3-8b", "--cores", "2")
    assert code != 0 and "are for a torch module served on CPU" in out
