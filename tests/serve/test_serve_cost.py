"""The serving cost model: the physics it must get right, each checked against a hand derivation."""

import math

import pytest

from distscope.dtypes import DType
from distscope.errors import DistscopeError
from distscope.serve.cost import kv_bytes_per_token_layer, step_model
from distscope.serve.layout import Layout
from distscope.serve.memory import replica_memory, weights_per_gpu_bytes
from distscope.serve.precision import ServePrecision, parse_dtype, weight_bytes
from distscope.serve.stack import get_stack, stack_from_framework
from distscope.system.presets import get_cluster
from distscope.workload import get_model

H100 = get_cluster("dgx-h100", 8)
BF16 = ServePrecision()
FP8 = ServePrecision(weights=DType.FP8, activations=DType.FP8, kv=DType.FP8)


def test_decode_is_memory_bound_then_compute_bound() -> None:
    m = step_model(get_model("llama3-8b"), H100, Layout(), BF16)
    t1, t16, t1024 = (m.time_s(n, 0.0, 0.0, n) for n in (1, 16, 1024))
    assert t16 / t1 < 1.25  # reading 16 GB of weights dominates: batch 16 costs about batch 1
    assert t1024 / t1 > 3  # far past the crossover the GEMMs are compute-bound
    # the crossover sits near peak·η·w_B / (2·BW·η_mem): a few hundred tokens for bf16 on H100
    assert 100 < m.decode_crossover_tokens() < 600


def test_weight_read_sets_the_small_batch_step() -> None:
    spec = get_model("llama3-70b")
    m = step_model(spec, H100, Layout(tp=8), FP8)
    weights_gpu = weights_per_gpu_bytes(spec, Layout(tp=8), FP8)
    read_s = weights_gpu / (H100.device.hbm_Bps * 0.8)
    t = m.time_s(1, 0.0, 0.0, 1)
    assert read_s < t < read_s + 4e-3  # + kernels and 160 small all-reduces


def test_kv_read_is_linear_in_context_and_scales_with_kv_dtype() -> None:
    spec = get_model("llama3-8b")
    m16 = step_model(spec, H100, Layout(), BF16)
    m8 = step_model(spec, H100, Layout(), ServePrecision(kv=DType.FP8))
    d16 = m16.time_s(64, 64 * 4000) - m16.time_s(64, 64 * 2000)
    assert d16 == pytest.approx(m16.kv_s_per_ctx_token * 64 * 2000, rel=1e-9)
    # 32 layers · 2 · 8 kv heads · 128 · 2 bytes per token, read at 0.8 of 3.35 TB/s
    assert m16.kv_s_per_ctx_token == pytest.approx(32 * 2 * 8 * 128 * 2 / (3.35e12 * 0.8), rel=1e-6)
    assert m8.kv_s_per_ctx_token == pytest.approx(m16.kv_s_per_ctx_token / 2, rel=1e-6)
    assert kv_bytes_per_token_layer(spec, 16, DType.BF16) == 2 * 1 * 128 * 2  # kv heads replicated beyond tp=8


def test_per_query_head_kv_reads_cost_a_over_g() -> None:
    from distscope.serve import calibration
    from distscope.serve.calibration import ServeCalibration

    spec = get_model("llama2-70b")  # 64 heads, 8 kv heads
    with calibration.using(ServeCalibration(mmha_l2_hit=0.0)):
        grouped = step_model(spec, H100, Layout(tp=2), FP8, True, True).kv_s_per_ctx_token
        per_head = step_model(spec, H100, Layout(tp=2), FP8, True, False).kv_s_per_ctx_token
    assert per_head / grouped == pytest.approx(8.0, rel=1e-6)


def test_fp8_and_tp_make_decode_faster() -> None:
    spec = get_model("llama3-70b")
    bf = step_model(spec, H100, Layout(tp=4), BF16).time_s(8, 8 * 1000, 0, 8)
    f8 = step_model(spec, H100, Layout(tp=4), FP8).time_s(8, 8 * 1000, 0, 8)
    tp8 = step_model(spec, H100, Layout(tp=8), FP8).time_s(8, 8 * 1000, 0, 8)
    assert f8 < 0.7 * bf and tp8 < 0.75 * f8


def test_moe_reads_only_the_experts_it_hits() -> None:
    spec = get_model("mixtral-8x7b")  # 8 experts, top-2
    m = step_model(spec, H100, Layout(tp=2), BF16)
    assert m.experts is not None
    e = m.experts
    one = e.time_s(1)  # batch 1 hits 2 of 8 experts
    many = e.time_s(256)  # batch 256 hits all 8
    assert e.local * (1 - e.miss ** 1) == pytest.approx(2.0)
    assert 2.5 < many / one < 6  # four times the weights, and some compute


def test_prefill_is_compute_bound_and_attention_quadratic() -> None:
    spec = get_model("llama3-8b")
    m = step_model(spec, H100, Layout(), BF16)
    t = m.time_s(8192, 0.0, 8192 * 8192 / 2, 1)
    flops = 2 * 8192 * 8.03e9
    assert flops / 989.4e12 < t < flops / (0.35 * 989.4e12)
    short = m.time_s(2048, 0.0, 2048 * 2048 / 2, 1)
    assert 4 < t / short < 5.5  # 4x the tokens, plus a growing attention share


def test_every_csv_dtype_parses_and_bad_ones_name_the_field() -> None:
    for v in ("fp16", "bf16", "fp8", "bf16(auto)", "fp8(assumed)", "int8", "int4", "fp4", "nvfp4", "bfloat16"):
        parse_dtype(v, "--kv")
    with pytest.raises(DistscopeError, match=r"--weights='fp6' is not a serving dtype"):
        parse_dtype("fp6", "--weights")
    assert weight_bytes(DType.FP4) == pytest.approx(0.5625) and weight_bytes(DType.INT4) == pytest.approx(0.53125)


def test_gemm_dtype_follows_the_hardware() -> None:
    a100 = get_cluster("dgx-a100", 8).device
    w8a16 = ServePrecision(weights=DType.FP8, activations=DType.FP8, kv=DType.BF16)
    assert w8a16.gemm_dtype(a100) is DType.BF16  # no FP8 tensor cores: Marlin W8A16
    assert w8a16.gemm_dtype(H100.device) is DType.FP8
    fp4 = ServePrecision(weights=DType.FP4, activations=DType.FP4, kv=DType.FP8)
    assert fp4.gemm_dtype(get_cluster("dgx-b200", 8).device) is DType.FP4
    with pytest.raises(DistscopeError, match="has no fp4 tensor cores"):
        fp4.check(H100.device)


def test_memory_kv_capacity_by_hand() -> None:
    spec = get_model("llama3-8b")
    st = get_stack("vllm")
    mem = replica_memory(spec, H100.device, Layout(), BF16, st)
    w = 8_030_261_248 * 2  # every parameter in bf16
    assert mem.weights_bytes == pytest.approx(w, rel=2e-3)
    budget = 0.9 * 81559 * 2**20 - mem.weights_bytes - mem.workspace_bytes
    assert mem.kv_budget_bytes == pytest.approx(budget)
    assert mem.kv_bytes_per_token == 32 * 2 * 8 * 128 * 2
    assert mem.kv_tokens == (int(budget // (mem.kv_bytes_per_token * 16))) * 16
    assert mem.max_batch(4096, 10_000) == mem.kv_blocks // 256


def test_model_too_large_is_one_line() -> None:
    with pytest.raises(DistscopeError, match=r"model llama3.1-405b needs .* GiB of weights per GPU at tp=2"):
        replica_memory(get_model("llama3.1-405b"), H100.device, Layout(tp=2), BF16, get_stack("vllm"))


def test_stacks_from_the_csv_frameworks() -> None:
    assert stack_from_framework("TensorRT-LLM 0.6.1 (gptSessionBenchmark, static batch)").name == "trtllm-0.6"
    assert stack_from_framework("NVIDIA NIM 1.8.0 (likely TensorRT-LLM)").name == "trtllm"
    assert stack_from_framework("vLLM 0.5.4 (OpenAI server)").name == "vllm-0.5"
    v6 = stack_from_framework("vLLM 0.6.0 (num-scheduler-steps 10)")
    assert v6.name == "vllm" and v6.steps_per_schedule == 10
    assert stack_from_framework("SGLang 0.3.0").name == "sglang"
    with pytest.raises(DistscopeError, match=r"framework='Foo 1\.0'"):
        stack_from_framework("Foo 1.0")
    assert math.isfinite(get_stack("ideal").cpu_s(10))
