"""Ready-to-run output (Megatron-LM, torchtitan, distscope estimate) and the why-it-wins sentence."""

from __future__ import annotations

import ast
import dataclasses
import json
import shlex

from distscope.dtypes import Precision
from distscope.model.estimate import estimate
from distscope.plan import Dim, Plan, Recompute, Schedule
from distscope.report.estimate_table import plan_dict
from distscope.scenario import SystemFlags, WorkloadFlags
from distscope.scenario.argv import command, plan_flags
from distscope.search.emit import megatron_args, pipeline_layout, torchtitan_recipe
from distscope.search.explain import explain, field_diffs
from distscope.search.planner import Candidate
from distscope.system.presets import get_cluster
from distscope.workload.catalog import get_model
from distscope.workload.training import TrainingShape

SPEC = get_model("llama3-70b")
SHAPE = TrainingShape(seq_len=8192, global_batch=128)
CLUSTER = get_cluster("dgx-h100", 64)
ALL = frozenset({Dim.DP, Dim.TP, Dim.PP})
# flags checked against NVIDIA/Megatron-LM megatron/training/arguments.py
MEGATRON_FLAGS = {
    "--tensor-model-parallel-size", "--pipeline-model-parallel-size", "--context-parallel-size",
    "--expert-model-parallel-size", "--num-layers-per-virtual-pipeline-stage", "--pipeline-model-parallel-layout",
    "--sequence-parallel", "--use-distributed-optimizer", "--use-megatron-fsdp", "--data-parallel-sharding-strategy",
    "--no-gradient-accumulation-fusion", "--ckpt-format", "--micro-batch-size", "--global-batch-size", "--seq-length",
    "--num-layers", "--recompute-granularity", "--recompute-method", "--recompute-num-layers", "--overlap-grad-reduce",
    "--overlap-param-gather", "--tp-comm-overlap", "--bf16", "--fp16", "--fp8-format",
}


def _args(plan: Plan) -> dict[str, str | None]:
    a = megatron_args(plan, SPEC, SHAPE)
    out: dict[str, str | None] = {}
    for i, x in enumerate(a):
        if x.startswith("--"):
            nxt = a[i + 1] if i + 1 < len(a) and not a[i + 1].startswith("--") else None
            out[x] = nxt
    return out


def parse_layout(layout: str) -> list[int]:
    return [int(chunk.strip("EL").split("*")[1]) for chunk in layout.split("|")]


def test_megatron_interleaved_block_recompute_fp8() -> None:
    p = Plan(dp=4, tp=4, pp=4, vp=5, schedule=Schedule.INTERLEAVED, sequence_parallel=True, distributed_optimizer=True,
             micro_batch=1, recompute=Recompute.FULL, recompute_layers=2, precision=Precision.FP8, overlap=ALL)
    a = _args(p)
    assert set(a) <= MEGATRON_FLAGS
    assert a["--tensor-model-parallel-size"] == "4" and a["--pipeline-model-parallel-size"] == "4"
    assert a["--num-layers-per-virtual-pipeline-stage"] == "4"  # 80 / (4*5)
    assert a["--recompute-method"] == "block" and a["--recompute-num-layers"] == "2"
    assert a["--fp8-format"] == "hybrid" and "--sequence-parallel" in a and "--tp-comm-overlap" in a
    assert "--use-distributed-optimizer" in a and "--overlap-param-gather" in a


def test_megatron_uneven_split_uses_layout_that_round_trips() -> None:
    sizes = (19, 21, 21, 19)
    p = Plan(dp=16, tp=4, pp=4, stage_layers=sizes, zero_stage=3)
    a = _args(p)
    assert set(a) <= MEGATRON_FLAGS
    layout = a["--pipeline-model-parallel-layout"]
    assert layout is not None and layout.startswith("E") and layout.endswith("L")
    assert parse_layout(layout) == list(sizes) and layout == pipeline_layout(sizes)
    assert a["--data-parallel-sharding-strategy"] == "optim_grads_params"


def test_torchtitan_recipe_sets_the_plan() -> None:
    spec = get_model("llama3-70b")
    p = Plan(dp=8, tp=2, pp=2, vp=2, cp=2, schedule=Schedule.INTERLEAVED, zero_stage=3, micro_batch=2,
             recompute=Recompute.SELECTIVE_OP, overlap=ALL)
    src = torchtitan_recipe(p, spec, SHAPE, 8)
    ns: dict = {}
    body = src.split("def distscope_plan():")[1].replace("    ", "")
    for line in body.splitlines():
        if line.startswith("config.") and "Config()" not in line and "model_registry" not in line:
            key, _, value = line.partition(" = ")
            ns[key[len("config."):]] = ast.literal_eval(value.split("  #")[0])
    assert ns["parallelism.data_parallel_shard_degree"] == 8 and ns["parallelism.data_parallel_replicate_degree"] == 1
    assert ns["parallelism.tensor_parallel_degree"] == 2 and ns["parallelism.pipeline_parallel_degree"] == 2
    assert ns["parallelism.pipeline_parallel_schedule"] == "Interleaved1F1B"
    assert len(ns["parallelism.module_fqns_per_model_part"]) == 4  # pp * vp parts
    assert ns["parallelism.num_pp_microbatches"] * 2 * 8 == SHAPE.global_batch
    assert ns["training.num_tokens_per_train_step"] == SHAPE.global_batch * SHAPE.seq_len
    assert "SelectiveAC.Config()" in src and ns["compile.enable_async_tensor_parallel"] is True


def test_estimate_command_reproduces_the_prediction() -> None:
    p = Plan(dp=8, tp=4, pp=2, stage_layers=(41, 39), sequence_parallel=True, distributed_optimizer=True,
             micro_batch=1, recompute=Recompute.FULL, recompute_layers=3, overlap=ALL)
    cmd = shlex.split(command("estimate", WorkloadFlags(model="llama3-70b", seq=SHAPE.seq_len,
                                                     global_batch=SHAPE.global_batch),
                              SystemFlags(cluster="dgx-h100", gpus=64), plan_flags(p)))
    assert cmd[:2] == ["distscope", "estimate"]
    from typer.testing import CliRunner

    from distscope.cli import app

    r = CliRunner().invoke(app, [*cmd[1:], "--json"])
    assert r.exit_code == 0, r.output
    got = json.loads(r.stdout)
    assert got["plan"] == plan_dict(p)
    assert got["step_time_s"] == estimate(SPEC, SHAPE, CLUSTER, p).step_time_s


def test_explain_names_changed_fields_and_signed_terms() -> None:
    a = Plan(dp=4, tp=8, pp=2, sequence_parallel=True, distributed_optimizer=True, overlap=ALL)
    b = dataclasses.replace(a, dp=8, pp=1)
    ca = Candidate(a, estimate(SPEC, SHAPE, CLUSTER, a))
    cb = Candidate(b, estimate(SPEC, SHAPE, CLUSTER, b))
    best, other = (ca, cb) if ca.step_time_s < cb.step_time_s else (cb, ca)
    text = explain(best, other, SPEC.layers)
    assert text.startswith(", ".join(field_diffs(best.plan, other.plan, SPEC.layers)))
    assert "pp=" in text and "dp=" in text and "net −" in text
    for k in ("bubble", "dp"):
        d = best.estimate.breakdown_s[k] - other.estimate.breakdown_s[k]
        if abs(d) >= 1e-3:
            assert f"{k} {'+' if d > 0 else '−'}{abs(d):.3f} s" in text
