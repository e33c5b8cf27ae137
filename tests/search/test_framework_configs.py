"""Emitted configs that real frameworks accept: the planner's top plan for 12 scenarios, per framework.

Megatron-LM arguments are parsed by the argument list of a pinned Megatron-LM commit (dumped from its
real parser) and checked against its validate_args rules; torchtitan recipes are checked against the
config classes of a pinned torchtitan commit (search/megatron_check.py, search/torchtitan_check.py).
The checkers must also reject what the frameworks reject, or passing them would mean nothing.
"""

from __future__ import annotations

import dataclasses

import pytest

from distscope.dtypes import Precision
from distscope.search.cli import framework_configs
from distscope.search.emit import megatron_args, torchtitan_recipe
from distscope.search.frameworks import Framework, restrict
from distscope.search.megatron_check import check as check_megatron
from distscope.search.planner import search
from distscope.search.space import SearchSpace
from distscope.search.torchtitan_check import check as check_titan
from distscope.system.presets import get_cluster
from distscope.workload.catalog import get_model
from distscope.workload.training import TrainingShape

SCENARIOS = [  # (model, cluster, gpus, global batch, seq, precision)
    ("llama3-8b", "dgx-h100", 8, 32, 4096, "bf16"),
    ("llama3-8b", "dgx-h100", 64, 256, 8192, "bf16"),
    ("llama3-70b", "dgx-h100", 64, 128, 4096, "bf16"),
    ("llama3-70b", "dgx-a100", 128, 256, 4096, "bf16"),
    ("llama3.1-405b", "dgx-h100", 1024, 1024, 8192, "bf16"),
    ("llama3.1-70b", "dgx-h200", 64, 256, 8192, "bf16"),
    ("llama3-70b", "dgx-b200", 64, 128, 8192, "bf16"),
    ("llama3-8b", "dgx-h100", 16, 64, 32768, "bf16"),
    ("gpt3-175b", "dgx-a100", 1024, 1536, 2048, "fp16"),
    ("mixtral-8x7b", "dgx-h100", 64, 256, 4096, "bf16"),
    ("deepseek-v3", "dgx-h100", 2048, 4096, 4096, "bf16"),
    ("nemotron4-15b", "dgx-h100", 64, 256, 4096, "fp8"),
    ("nemotron-3-nano-30b-a3b", "dgx-h100", 16, 256, 4096, "bf16"),  # a hybrid: --hybrid-layer-pattern
    ("nemotron-h-56b", "dgx-h100", 64, 256, 8192, "bf16"),
    ("glm-5", "dgx-h100", 256, 256, 32768, "bf16"),  # DSA with CP: --cp-comm-type allgather
]


def _best(model, cluster, gpus, gb, seq, prec, fw):
    spec, shape = get_model(model), TrainingShape(seq_len=seq, global_batch=gb)
    c = get_cluster(cluster, gpus)
    space = restrict(fw, SearchSpace(precision=Precision(prec)), c.device)
    res = search(spec, shape, c, space, top_k=1)
    assert res.best is not None, (model, gpus)
    return spec, shape, c, res.best.plan


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[f"{s[0]}-{s[2]}" for s in SCENARIOS])
def test_megatron_args_of_the_top_plan_pass_the_pinned_parser(scenario) -> None:
    spec, shape, c, plan = _best(*scenario, Framework.MEGATRON)
    cfg = framework_configs(plan, spec, shape, c)["megatron"]
    assert cfg["problems"] == [] and cfg["text"], cfg["problems"]


@pytest.mark.parametrize("scenario", [s for s in SCENARIOS if s[0].startswith(("llama3", "deepseek")) and s[5] != "fp8"],
                         ids=lambda s: f"{s[0]}-{s[2]}")
def test_torchtitan_recipe_of_the_top_plan_passes_the_pinned_config(scenario) -> None:
    spec, shape, c, plan = _best(*scenario, Framework.TORCHTITAN)
    cfg = framework_configs(plan, spec, shape, c)["torchtitan"]
    assert cfg["problems"] == [] and "def distscope_plan" in cfg["text"], cfg["problems"]


def test_the_megatron_check_rejects_what_megatron_rejects() -> None:
    spec, shape, _c, plan = _best("llama3-70b", "dgx-h100", 64, 128, 4096, "bf16", Framework.MEGATRON)
    args = megatron_args(plan, spec, shape)
    assert check_megatron([*args, "--no-such-flag"], {}, True)[0].startswith("Megatron-LM@")
    assert any("choice" in p for p in check_megatron([*args, "--recompute-method", "some"], {}, True))
    assert "tensor/context parallelism needs CUDA_DEVICE_MAX_CONNECTIONS=1 before Blackwell" in check_megatron(args, {}, True)
    assert "--tp-comm-overlap needs --sequence-parallel" in check_megatron(
        ["--tensor-model-parallel-size", "2", "--tp-comm-overlap"], {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}, True)
    fsdp = ["--tensor-model-parallel-size", "4", "--use-megatron-fsdp", "--use-distributed-optimizer",
            "--ckpt-format", "fsdp_dtensor"]
    assert any("warns against Megatron-FSDP" in p for p in check_megatron(fsdp, {}, True))


def test_the_torchtitan_check_rejects_what_torchtitan_rejects() -> None:
    spec, shape, _c, plan = _best("llama3-70b", "dgx-h100", 64, 128, 4096, "bf16", Framework.TORCHTITAN)
    plan = dataclasses.replace(plan, tp=4, pp=2, vp=2, dp=plan.dp * plan.tp * plan.pp // 8, cp=1,
                               schedule=plan.schedule.__class__("interleaved-1f1b"), stage_layers=())
    src = torchtitan_recipe(plan, spec, shape, 8)
    assert check_titan(src, gpus=64, layers=spec.layers) == []
    assert any("disable_cuda_graphs" in p for p in
               check_titan(src.replace("config.training.disable_cuda_graphs = True", ""), gpus=64, layers=spec.layers))
    assert any("async TP" in p for p in check_titan(src.replace("config.compile.enable = True", ""), gpus=64,
                                                    layers=spec.layers))
    assert any("not a field" in p for p in check_titan(src + "\nconfig.parallelism.enable_async_tensor_parallel = True\n",
                                                       gpus=64, layers=spec.layers))
    assert any("model parts" in p for p in check_titan(src.replace('"Interleaved1F1B"', '"1F1B"').replace(
        "'Interleaved1F1B'", "'1F1B'"), gpus=64, layers=spec.layers))
    assert any("GPUs" in p for p in check_titan(src, gpus=128, layers=spec.layers))
