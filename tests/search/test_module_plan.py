"""`plan --model torch:FILE.py:FACTORY`: data-parallel plans of a traced torch module (search/module_plan.py)."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from distscope.search.module_plan import MAX_MICRO_BATCHES, micro_batches

ROOT = Path(__file__).resolve().parents[2]
RN50 = ["--model", "torch:examples/modules/resnet.py:resnet50", "--input", "x:256x3x224x224:fp16", "--cluster",
        "dgx-a100", "--gpus", "8", "--global-batch", "2048"]


def _ds(*args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "distscope", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=600)
    assert (proc.returncode == 0) == ok, proc.stderr
    return proc


def test_micro_batches_are_power_of_two_divisors_and_the_whole_batch() -> None:
    assert micro_batches(256) == (256, 128, 64, 32, 16, 8)
    assert micro_batches(24) == (24, 8, 4, 2, 1)
    assert micro_batches(1) == (1,)
    assert len(micro_batches(1 << 20)) == MAX_MICRO_BATCHES


def test_plan_number_one_is_what_estimate_says_for_its_flags() -> None:
    """The two verbs price the same plan the same way: plan's #1, reproduced with its printed command."""
    out = json.loads(_ds("plan", *RN50, "--json").stdout)
    best = out["best"]
    # DDP, FSDP x recompute x pp 1, 2, 4, 8 (ResNet-50 has 10 top-level children) per micro-batch
    assert out["feasible"] + out["infeasible"] == 16 * len(out["micro_batches_searched"])
    assert [c["step_time_s"] for c in out["top"]] == sorted(c["step_time_s"] for c in out["top"])
    again = shlex.split(out["estimate_command"])
    assert again[:2] == ["distscope", "estimate"]
    est = json.loads(_ds(*again[1:], "--json").stdout)
    assert est["step_time_s"] == pytest.approx(best["step_time_s"], rel=1e-9)
    assert est["zero"] == best["zero"]


def test_a_module_too_big_to_replicate_is_sharded_or_pipelined(tmp_path: Path) -> None:
    """5.4 B parameters: DDP needs them in full on every GPU (weights, gradients, Adam state: > 80 GB), FSDP
    over 8 GPUs an eighth, a 4-stage pipeline a quarter per stage. DDP over 2 replicas of 4 stages
    all-reduces a quarter of the gradients, where FSDP gathers every weight twice per micro-batch: it wins."""
    f = tmp_path / "big.py"
    f.write_text("from torch import nn\n\ndef big():\n    return nn.Sequential(*[nn.Linear(32768, 32768) for _ in range(5)])\n")
    out = json.loads(_ds("plan", "--model", f"torch:{f}:big", "--input", "x:16x32768:bf16", "--cluster", "dgx-a100",
                         "--gpus", "8", "--global-batch", "128", "--json").stdout)
    assert (out["best"]["sharding"], out["best"]["pp"]) == ("ddp", 4)
    assert not any(c["sharding"] == "ddp" and c["pp"] == 1 for c in out["top"]) and out["infeasible"] > 0
    assert "ddp + pp 4" in out["why"] and out["estimate_command"].endswith("--zero 0 --pp 4")
    est = json.loads(_ds(*shlex.split(out["estimate_command"])[1:], "--json").stdout)
    assert est["step_time_s"] == pytest.approx(out["best"]["step_time_s"], rel=1e-9)


@pytest.mark.parametrize("extra, words", [
    (["--tp", "2"], "--tp"),
    (["--fabric", "preset"], "--fabric"),
    (["--global-batch", "1001"], "--global-batch=1001"),
])
def test_bad_module_plans_are_one_line(extra: list[str], words: str) -> None:
    args = [a for a in RN50 if a not in ("--global-batch", "2048")] if "--global-batch" in extra else RN50
    err = _ds("plan", *args, *extra, ok=False).stderr.strip()
    assert "\n" not in err and words in err and "Traceback" not in err


def test_recompute_is_chosen_only_when_nothing_else_fits(tmp_path: Path) -> None:
    """Four conv blocks at 1024x1024, one sample per GPU: 3.5 GiB per GPU without recompute, 2.9 GiB with
    each block checkpointed (its input kept, one block's tensors at a time). Under a 3.3 GiB cap only
    recompute fits; under 8 GiB it is slower and not chosen."""
    f = tmp_path / "convs.py"
    f.write_text("from torch import nn\n\ndef convs():\n    return nn.Sequential(*[nn.Sequential(nn.Conv2d(64, 64, 3, "
                 "padding=1), nn.ReLU(), nn.Conv2d(64, 64, 3, padding=1)) for _ in range(4)])\n")
    args = ["plan", "--model", f"torch:{f}:convs", "--input", "x:1x64x1024x1024:bf16", "--cluster", "dgx-a100",
            "--gpus", "8", "--global-batch", "8", "--json"]
    roomy = json.loads(_ds(*args, "--max-memory", "8").stdout)
    assert roomy["best"]["recompute"] == "none" and roomy["infeasible"] == 0
    tight = json.loads(_ds(*args, "--max-memory", "3.3").stdout)
    assert tight["best"]["recompute"] == "full" and tight["infeasible"] > roomy["infeasible"]
    assert tight["estimate_command"].endswith("--recompute full")
    assert tight["best"]["step_time_s"] > roomy["best"]["step_time_s"]
