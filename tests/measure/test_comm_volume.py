"""comm_volume arithmetic (torch-free): consistency with the foundation's parameter counts, FSDP padding,
per-stage p2p, TP terms, unsupported plans, and `estimate --comm-volume --json`."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from measure_support import env

from distscope.comm.collective import Collective
from distscope.dtypes import DType
from distscope.errors import DistscopeError
from distscope.model.comm_volume import (
    CommDtypes,
    ParamTensor,
    comm_volume,
    embedding_tensors,
    head_tensors,
    layer_tensors,
)
from distscope.plan import Dim, Plan
from distscope.workload.catalog import get_model
from distscope.workload.params import total_params
from distscope.workload.spec import FfnKind, ModelSpec, NormKind, PositionKind
from distscope.workload.training import TrainingShape

FP32 = CommDtypes(param=DType.FP32, grad=DType.FP32, activation=DType.FP32)
GPT = ModelSpec(
    name="t",
    layers=4,
    hidden=32,
    heads=4,
    kv_heads=4,
    ffn_hidden=128,
    vocab=126,
    ffn=FfnKind.GELU,
    position=PositionKind.LEARNED,
    max_positions=16,
    norm=NormKind.LAYERNORM,
    bias=True,
)


@pytest.mark.parametrize("name", ["gpt3-175b", "llama3-8b", "llama3-70b"])
def test_tensor_enumeration_matches_foundation_param_count(name):
    spec = get_model(name)
    n = spec.layers * sum(t.numel for t in layer_tensors(spec, 1))
    n += sum(t.numel for t in embedding_tensors(spec) + head_tensors(spec))
    assert n == total_params(spec)


def test_ddp_all_reduce_is_the_gradient_bytes():
    v = comm_volume(GPT, TrainingShape(seq_len=16, global_batch=8), Plan(dp=4, micro_batch=2), dtypes=FP32)
    assert v == {(Collective.ALL_REDUCE, Dim.DP): total_params(GPT) * 4}
    bf16_grads = CommDtypes(param=DType.BF16, grad=DType.BF16, activation=DType.BF16)
    v2 = comm_volume(GPT, TrainingShape(seq_len=16, global_batch=8), Plan(dp=4, micro_batch=2), dtypes=bf16_grads)
    assert v2[(Collective.ALL_REDUCE, Dim.DP)] == total_params(GPT) * 2


def test_fsdp_padding_is_per_tensor_dim0():
    assert ParamTensor(name="w", shape=(126, 32)).padded_numel(4) == 128 * 32
    assert ParamTensor(name="b", shape=(5,)).padded_numel(4) == 8
    plan = Plan(dp=4, zero_stage=3, micro_batch=2)
    v = comm_volume(GPT, TrainingShape(seq_len=16, global_batch=8), plan, dtypes=FP32)
    pad = 2 * 2 * 32  # the embedding and head each gain 2 rows of 32 (126 -> 128)
    assert v[(Collective.REDUCE_SCATTER, Dim.DP)] == (total_params(GPT) + pad) * 4
    layer = sum(t.numel for t in layer_tensors(GPT, 1))
    # layers gathered forward and backward, the root unit once
    assert v[(Collective.ALL_GATHER, Dim.DP)] == (total_params(GPT) + pad + 4 * layer) * 4
    # two micro-batches: gathers double, the reduce-scatter stays once per step
    v2 = comm_volume(GPT, TrainingShape(seq_len=16, global_batch=16), plan, dtypes=FP32)
    assert v2[(Collective.ALL_GATHER, Dim.DP)] == 2 * v[(Collective.ALL_GATHER, Dim.DP)]
    assert v2[(Collective.REDUCE_SCATTER, Dim.DP)] == v[(Collective.REDUCE_SCATTER, Dim.DP)]


def test_pipeline_stages_send_and_receive_per_micro_batch():
    plan = Plan(dp=1, pp=4, micro_batch=2)
    shape = TrainingShape(seq_len=16, global_batch=6)  # 3 micro-batches
    a = 2 * 16 * 32 * 4
    vols = [comm_volume(GPT, shape, plan, stage=s, dtypes=FP32) for s in range(4)]
    assert [v[(Collective.SEND, Dim.PP)] for v in vols] == [3 * a, 6 * a, 6 * a, 3 * a]
    assert all(v[(Collective.SEND, Dim.PP)] == v[(Collective.RECV, Dim.PP)] for v in vols)
    with pytest.raises(DistscopeError, match="stage=4"):
        comm_volume(GPT, shape, plan, stage=4)


def test_tp_all_reduce_terms():
    plan = Plan(dp=1, tp=2, micro_batch=2)
    v = comm_volume(GPT, TrainingShape(seq_len=16, global_batch=2), plan, dtypes=FP32)
    a = 2 * 16 * 32 * 4
    assert v == {(Collective.ALL_REDUCE, Dim.TP): (4 * 4 + 2) * a + 3 * 2 * 16 * 4}


@pytest.mark.parametrize(
    ("plan", "match"),
    [
        (Plan(dp=4, zero_stage=1), "zero_stage=1"),
        (Plan(dp=2, tp=2, zero_stage=3), "FSDP combined"),
        (Plan(dp=2, tp=2, sequence_parallel=True), "sequence parallelism"),
    ],
)
def test_unmodelled_plans_are_refused(plan, match):
    with pytest.raises(DistscopeError, match=match):
        comm_volume(GPT, TrainingShape(seq_len=16, global_batch=8), plan)


def test_estimate_cli_comm_volume_json():
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "distscope",
            "estimate",
            "--model",
            "llama3-8b",
            "--gpus",
            "16",
            "--tp",
            "2",
            "--pp",
            "2",
            "--zero",
            "0",
            "--micro-batch",
            "1",
            "--no-sequence-parallel",
            "--global-batch",
            "32",
            "--seq",
            "2048",
            "--comm-volume",
            "--json",
        ],
        env=env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    rep = json.loads(proc.stdout)
    assert [s["stage"] for s in rep["stages"]] == [0, 1]
    spec = get_model("llama3-8b")
    a = 1 * 2048 * spec.hidden * 2  # bf16 activations, micro_batch 1
    assert rep["stages"][0]["bytes"]["pp"] == {"recv": 8 * a, "send": 8 * a}
    assert set(rep["stages"][1]["bytes"]) == {"dp", "pp", "tp"}
