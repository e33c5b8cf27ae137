"""Diffusion inference under patch parallelism (model/patch_parallel.py, `serve diffusion`): the pricing
rules on a small plain-torch denoiser, and one-line refusals."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from tests.cli_run import run_cli

from distscope.comm import Collective, collective_s, group_net
from distscope.errors import DistscopeError
from distscope.model.module_estimate import infer_module
from distscope.model.patch_parallel import (
    COMM_CHECKPOINT,
    PatchMode,
    PatchPlan,
    kv_rows,
    patch_inputs,
    patch_step,
    sweep,
)
from distscope.system import get_cluster
from distscope.workload.module_graph import OpKind, load_factory, parse_inputs, trace_module

ROOT = Path(__file__).resolve().parents[2]
REF = f"torch:{ROOT}/examples/modules/tiny_denoiser.py:denoiser"
INPUTS = parse_inputs("x:2x4x64x64:fp16,ctx:2x77x768:fp16")
CLUSTER = get_cluster("dgx-a100", 8)
FACTORY, NAME = load_factory(REF)


def _trace(x):  # type: ignore[no-untyped-def]
    return trace_module(FACTORY, x, NAME, inference=True)


def _run(plans):  # type: ignore[no-untyped-def]
    return sweep(_trace, INPUTS, CLUSTER, plans)


def test_one_gpu_is_steps_times_the_forward() -> None:
    one = _run([PatchPlan(1, steps=20, cuda_graph=False)])[0]
    fwd = infer_module(_trace(INPUTS), CLUSTER.device)  # eager: max(GPU, host), as without a CUDA graph
    assert one.latency_s == pytest.approx(20 * fwd.latency_s)
    assert one.speedup == 1.0 and one.step.exchange_bytes == 0


def test_patch_inputs_split_rows_and_cfg_halves() -> None:
    x, ctx = patch_inputs(INPUTS, PatchPlan(8))
    assert x.shape == (1, 4, 16, 64) and ctx.shape == (1, 77, 768)
    x, _ = patch_inputs(INPUTS, PatchPlan(4, cfg_split=False))
    assert x.shape == (2, 4, 16, 64)
    with pytest.raises(DistscopeError, match="do not split into 3 patches"):
        patch_inputs(INPUTS, PatchPlan(3, cfg_split=False))
    with pytest.raises(DistscopeError, match="even batch"):
        patch_inputs(parse_inputs("x:1x4x64x64:fp16,ctx:1x77x768:fp16"), PatchPlan(2))


def test_exchange_is_every_self_attention_kv_conv_boundary_and_group_norm_statistic() -> None:
    """Per GPU and step, as distrifuser queues them: K and V of each self-attention (not the text's), both
    padding rows of each 3x3 convolution after conv_in, each group norm's statistics."""
    plan = PatchPlan(8)
    g = _trace(patch_inputs(INPUTS, plan))  # batch 1, 16 of 64 rows, 128 channels
    step = patch_step(g, CLUSTER, plan, out_bytes=0.0)
    kv = 2 * (1 * 16 * 64) * 128 * 2  # 2 blocks · 1 self-attention, K and V of 1024 tokens · 128 ch, fp16
    convs = (4 + 1) * 2 * (1 * 128 * 64 * 2)  # 4 block convs + conv_out, two 1-row boundaries of 128 ch · 64
    stats = 5 * 2 * 1 * 32 * 2  # 5 group norms, mean and mean-square of 32 groups
    assert step.exchange_bytes == 2 * kv + convs + stats
    tensors = 2 + 5 + 5
    assert tensors < COMM_CHECKPOINT  # one chunk: the overlapped exchange is one all-gather of it all
    g4 = group_net(CLUSTER, plan.patches)
    assert step.async_comm_s == pytest.approx(collective_s(Collective.ALL_GATHER, 4 * step.exchange_bytes, g4))
    assert step.sync_comm_s > step.async_comm_s  # one blocking collective per layer pays α each


def test_self_attention_keys_cover_the_whole_image_cross_attention_the_text() -> None:
    plan = PatchPlan(8)
    assert kv_rows(1024, plan) == 4096
    assert kv_rows(1024, dataclasses.replace(plan, mode=PatchMode.PCPP, pcpp_ratio=0.5)) == 1024 + 1024
    assert kv_rows(1024, dataclasses.replace(plan, mode=PatchMode.NAIVE)) == 1024
    g = _trace(patch_inputs(INPUTS, plan))
    kvs = sorted({o.attn.seq_kv for o in g.ops if o.kind is OpKind.ATTENTION and o.attn})
    assert kvs == [77, 1024]  # the trace sees its patch; patch_step re-prices the 1024 self-attention at 4096
    naive = patch_step(g, CLUSTER, dataclasses.replace(plan, mode=PatchMode.NAIVE), 0.0)
    full = patch_step(g, CLUSTER, plan, 0.0)
    assert full.compute_s > naive.compute_s and naive.exchange_bytes == 0


def test_modes_order_and_warm_up() -> None:
    runs = {(r.plan.mode, r.plan.gpus): r for r in _run([PatchPlan(8, m) for m in PatchMode])}
    d, s = runs[PatchMode.DISPLACED, 8], runs[PatchMode.SYNC, 8]
    assert d.plan.sync_steps == 5 and s.plan.sync_steps == 50  # distrifuser: counter <= warmup_steps
    assert d.latency_s == pytest.approx(5 * d.step.sync_step_s + 45 * d.step.async_step_s)
    assert runs[PatchMode.NAIVE, 8].latency_s < runs[PatchMode.PCPP, 8].latency_s < d.latency_s < s.latency_s


def test_two_gpus_with_the_cfg_split_exchange_nothing_inside_a_step() -> None:
    r = _run([PatchPlan(2)])[0]
    assert r.plan.patches == 1 and r.step.exchange_bytes == 0 and r.plan.sync_steps == 0
    assert r.step.gather_s > 0  # the step's output is still gathered from both GPUs


def _cli(capsys, *args: str) -> tuple[int, str]:  # type: ignore[no-untyped-def]
    return run_cli(capsys, "serve", "diffusion", *args)


def test_cli_json_has_one_run_per_mode_and_gpu_count(capsys) -> None:  # type: ignore[no-untyped-def]
    code, out = _cli(capsys, "--model", REF, "--input", "x:2x4x64x64:fp16,ctx:2x77x768:fp16", "--gpus", "1,4",
                     "--mode", "displaced,naive", "--json")
    assert code == 0
    runs = json.loads(out)["runs"]
    assert [(r["mode"], r["gpus"]) for r in runs] == [("displaced", 1), ("displaced", 4), ("naive", 1), ("naive", 4)]
    assert runs[0]["speedup"] == 1.0 and runs[1]["exchange_bytes_per_step"] > 0


def test_eager_output_says_what_the_host_floor_leaves_out(capsys) -> None:  # type: ignore[no-untyped-def]
    """--eager prices each step at least at its ops' bare host time; the table says that eager diffusers UNets
    measured several times more per op, and a CUDA-graph run says nothing of the host."""
    flags = ("--model", REF, "--input", "x:2x4x64x64:fp16,ctx:2x77x768:fp16", "--gpus", "1")
    code, eager = _cli(capsys, *flags, "--eager")
    assert code == 0 and "--eager: eager host time is priced at" in " ".join(eager.split())
    code, graph = _cli(capsys, *flags)
    assert code == 0 and "--eager:" not in graph


def test_a_decode_is_added_whole_at_every_gpu_count(capsys) -> None:  # type: ignore[no-untyped-def]
    """--vae: one decode after the loop on every GPU, not split: it adds the same seconds at each count and
    caps the speed-up (Amdahl), as DistriFusion's pipeline runs it."""
    flags = ("--model", REF, "--input", "x:2x4x64x64:fp16,ctx:2x77x768:fp16", "--gpus", "1,4", "--json")
    code, out = _cli(capsys, *flags)
    plain = json.loads(out)["runs"]
    code, out = _cli(capsys, *flags, "--vae", f"torch:{ROOT}/examples/modules/tiny_denoiser.py:denoiser",
                     "--vae-input", "z:1x4x64x64:fp16,ctx:1x77x768:fp16")
    res = json.loads(out)
    assert code == 0 and res["decode_s"] > 0
    for a, b in zip(plain, res["runs"], strict=True):
        assert b["latency_s"] == pytest.approx(a["latency_s"] + res["decode_s"]) and b["decode_s"] == res["decode_s"]
    assert 1.0 < res["runs"][1]["speedup"] < plain[1]["speedup"]


@pytest.mark.parametrize(("args", "says"), [
    (("--vae-input", "z:1x4x64x64:fp16"), "give --vae too"),
    (("--vae", "sdxl"), "torch:FILE.py:FACTORY"),
    (("--model", "llama3-8b"), "torch:FILE.py:FACTORY"),
    (("--gpus", "1,3"), "even GPU count"),
    (("--gpus", "two"), "comma list of positive integers"),
    (("--mode", "displacd"), "closest: displaced"),
    (("--pcpp-ratio", "0"), "pcpp_ratio=0.0"),
    (("--steps", "0"), "steps=0"),
    (("--input", "x:2x4x64:fp16,ctx:2x77x768:fp16"), "4-d latent"),
])
def test_bad_input_is_one_line(capsys, args: tuple[str, ...], says: str) -> None:  # type: ignore[no-untyped-def]
    base = {"--model": REF, "--input": "x:2x4x64x64:fp16,ctx:2x77x768:fp16"}
    for k, v in zip(args[::2], args[1::2], strict=True):
        base[k] = v
    code, out = _cli(capsys, *[x for kv in base.items() for x in kv])
    assert code != 0
    assert says in out
    assert "Traceback" not in out and len(out.strip().splitlines()) == 1

