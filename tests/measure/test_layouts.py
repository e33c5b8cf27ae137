"""Ground truth: the small GPT (examples/) trained 3 steps on 4 gloo ranks under DDP, FSDP2, TP x DP and
PP x DP, logged with `distscope measure log` (no change to the script). Per rank, the bytes logged in the
last step per (op, dim) must equal distscope's comm_volume prediction exactly.

Steps 0 and 1 also carry one-time traffic that is not per-step volume, so the last step is compared:
DDP's construction-time parameter broadcast and shape check (step 0), DDP's bucket-rebuild index
broadcast (first forward after step 0, i.e. step 1), pipelining's shape-metadata exchange (step 0).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from measure_support import EXAMPLES, ROOT, env, torchrun

from distscope.comm.collective import Collective
from distscope.dtypes import DType
from distscope.measure.calls import load_calls
from distscope.measure.summary import bytes_per_op_dim
from distscope.model.comm_volume import CommDtypes, comm_volume
from distscope.plan import Dim, Plan
from distscope.workload.spec import FfnKind, ModelSpec, NormKind, PositionKind
from distscope.workload.training import TrainingShape

sys.path.insert(0, str(EXAMPLES))
from gpt import GPTConfig

CFG = GPTConfig()
SPEC = ModelSpec(
    name="examples-gpt",
    layers=CFG.layers,
    hidden=CFG.hidden,
    heads=CFG.heads,
    kv_heads=CFG.heads,
    ffn_hidden=CFG.ffn_hidden,
    vocab=CFG.vocab,
    ffn=FfnKind.GELU,
    position=PositionKind.LEARNED,
    max_positions=CFG.seq_len,
    norm=NormKind.LAYERNORM,
    bias=True,
)
FP32 = CommDtypes(param=DType.FP32, grad=DType.FP32, activation=DType.FP32)
MICRO_BATCH, PP_MICROBATCHES, STEPS = 2, 2, 3
# layout -> (plan, micro-batches per step, expected dims, stage of each rank)
LAYOUTS = {
    "ddp": (Plan(dp=4, micro_batch=MICRO_BATCH), 1, {"dp"}, lambda r: 0),
    "fsdp": (Plan(dp=4, zero_stage=3, micro_batch=MICRO_BATCH), 1, {"dp"}, lambda r: 0),
    "tp": (Plan(dp=2, tp=2, micro_batch=MICRO_BATCH), 1, {"dp", "tp"}, lambda r: 0),
    "pp": (Plan(dp=2, pp=2, micro_batch=MICRO_BATCH), PP_MICROBATCHES, {"dp", "pp"}, lambda r: r // 2),
}


@pytest.fixture(scope="module", params=list(LAYOUTS))
def logged(request, tmp_path_factory):
    layout = request.param
    out = tmp_path_factory.mktemp(layout) / "calls.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "distscope",
            "measure",
            "log",
            "--out",
            str(out),
            "--timeout-s",
            "150",
            "--",
            *torchrun(
                str(EXAMPLES / "train_gpt.py"),
                "--layout",
                layout,
                "--steps",
                str(STEPS),
                "--micro-batch",
                str(MICRO_BATCH),
                "--microbatches",
                str(PP_MICROBATCHES),
            ),
        ],
        env=env(),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=170,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return layout, out, proc.stdout


def test_logged_bytes_equal_comm_volume(logged):
    layout, out, stdout = logged
    plan, m, dims, stage_of = LAYOUTS[layout]
    calls = load_calls(out)
    assert {c.rank for c in calls} == {0, 1, 2, 3}
    assert {c.dim for c in calls} == dims
    assert all(c.duration_s is not None and c.duration_s >= 0 for c in calls)
    shape = TrainingShape(seq_len=CFG.seq_len, global_batch=plan.dp * MICRO_BATCH * m)
    for rank in range(4):
        predicted = comm_volume(SPEC, shape, plan, stage=stage_of(rank), dtypes=FP32)
        logged_last = bytes_per_op_dim(calls, rank=rank, step=STEPS - 1)
        assert {(Collective(op.value), Dim(d)): b for (op, d), b in logged_last.items()} == predicted, (layout, rank)
    # the summary table has a total per dim
    for d in dims:
        assert f"{d} total" in stdout


def test_log_file_schema(logged):
    _, out, _ = logged
    row = json.loads(out.read_text())["calls"][0]
    assert {"rank", "op", "bytes", "dtype", "group", "dim", "start_s", "duration_s"} <= row.keys()
