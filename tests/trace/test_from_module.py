"""`trace generate --model torch:...`: a traced module's data-parallel step as Chakra traces, which
`simulate` prices as `estimate` does (trace/from_module.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.cli_run import run_subprocess

pytest.importorskip("torch")

MODEL = ["--model", "torch:examples/modules/resnet.py:resnet50", "--cluster", "dgx-a100"]


@pytest.mark.parametrize(("gpus", "batch", "zero", "recompute", "pp", "rel"), [
    (1, "x:32x3x224x224:bf16", 0, "none", 1, 0.01), (64, "x:8x3x224x224:bf16", 0, "none", 1, 0.01),
    (64, "x:8x3x224x224:bf16", 3, "none", 1, 0.01), (64, "x:8x3x224x224:bf16", 0, "full", 1, 0.01),
    # a pipeline split over the children: the estimate adds the DDP exposure the trace overlaps (<= 2%)
    (2, "x:32x3x224x224:bf16", 0, "none", 2, 0.02), (16, "x:8x3x224x224:bf16", 0, "none", 2, 0.02),
    (64, "x:8x3x224x224:bf16", 3, "none", 4, 0.02)])
def test_simulate_of_the_traces_equals_the_estimate(tmp_path: Path, gpus: int, batch: str, zero: int,
                                                     recompute: str, pp: int, rel: float) -> None:
    flags = [*MODEL, "--gpus", str(gpus), "--input", batch, "--global-batch", "1024", "--zero", str(zero),
             "--recompute", recompute, "--pp", str(pp)]
    gen = json.loads(run_subprocess("trace", "generate", *flags, "--out", str(tmp_path), "--symmetric", "--json").stdout)
    dp = gpus // pp
    assert gen["plan_fields"] == {"dp": dp, "zero": zero, "micro_batches": 1024 // dp // int(batch[2:].split("x")[0]),
                                  "recompute": recompute, "pp": pp}
    sim = json.loads(run_subprocess("simulate", str(tmp_path), "--cluster", "dgx-a100", "--gpus", str(gpus), "--json").stdout)
    est = json.loads(run_subprocess("estimate", *flags, "--json").stdout)
    assert sim["step_time_s"] == pytest.approx(est["step_time_s"], rel=rel)
    if dp > 1 and zero == 0:  # the DDP gradient all-reduce is in the trace, and partly exposed
        assert est["breakdown_s"]["dp"] > 0
    if pp > 1:  # the boundaries' sends are in the trace, and the estimate prices them
        assert est["breakdown_s"]["pp"] > 0


@pytest.mark.parametrize(("extra", "match"), [
    (["--steps", "2"], "--steps=2"),
    (["--tp", "2"], "--tp=2: a torch module is planned data parallel"),
    (["--pp", "3"], "--pp=3 x --dp=None must be --gpus=8"),
    (["--pp", "32", "--gpus", "64"], "--pp=32: the module has"),
    (["--zero", "2"], "--zero=2"),
    (["--global-batch", "100"], "--global-batch=100 is not a multiple"),
])
def test_bad_flags_are_one_line(tmp_path: Path, extra: list[str], match: str) -> None:
    flags = [*MODEL, "--gpus", "8", "--input", "x:8x3x224x224:bf16", "--global-batch", "1024"]
    proc = run_subprocess("trace", "generate", *flags, *extra, "--out", str(tmp_path), ok=False)
    assert match in proc.stderr and "Traceback" not in proc.stderr
