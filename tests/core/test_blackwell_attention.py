"""Fused attention on Blackwell from its own published rows (model/kernel_data.py, data/kernels/attention.csv):
cuDNN at head dim 64 measured on SM100, the other head dims and the backward pass from the H100 curves
scaled through those rows, and a check against a figure that was not used: FlashAttention-4's paper."""

from __future__ import annotations

import pytest

from distscope.dtypes import DType
from distscope.model import kernel_data
from distscope.system.device import get_device


def _tflops(device: str, causal: bool, head_dim: int, seq: int, pss: str = "fwd") -> float:
    peak = get_device(device).flops(DType.BF16) / 1e12
    return peak * kernel_data.attention_efficiency(device, DType.BF16, "cudnn", causal, head_dim, seq, pss)


@pytest.mark.parametrize(("causal", "seq", "tflops"), [(False, 4096, 1119), (False, 16384, 1159), (True, 8192, 1072)])
def test_measured_rows_are_returned_where_they_exist(causal: bool, seq: int, tflops: float) -> None:
    assert _tflops("gb200", causal, 64, seq) == pytest.approx(tflops, rel=1e-6)


def test_b200_shares_the_die_with_gb200_against_its_own_peak() -> None:
    ratio = get_device("b200-sxm-180gb").flops(DType.BF16) / get_device("gb200").flops(DType.BF16)
    assert _tflops("b200-sxm-180gb", False, 64, 16384) == pytest.approx(1159 * ratio, rel=1e-6)


def test_head_dim_128_agrees_with_the_flashattention_4_paper() -> None:
    """"FlashAttention-4: Algorithm and Kernel Pipelining Co-Design for Asymmetric Hardware Scaling" (Zadouri,
    Hoehnerbach, Shah, Liu, Thakkar, Dao), abstract: on B200 in BF16 it reaches up to 1613 TFLOP/s (71%
    utilization) and is up to 1.3x faster than cuDNN 9.13. So cuDNN's best forward on B200 lies in
    [1613 / 1.3, 1613]; the model's head-dim-128 forward (no B200 row at that head dim) must too."""
    best = max(_tflops("b200-sxm-180gb", False, 128, s) for s in (4096, 8192, 16384, 32768))
    assert 1613 / 1.3 <= best <= 1613


def test_blackwell_is_faster_than_hopper_at_every_point() -> None:
    for causal in (False, True):
        for hd in (64, 128):
            for pss in ("fwd", "bwd"):
                assert _tflops("b200-sxm-180gb", causal, hd, 8192, pss) > _tflops("h100-sxm5-80gb", causal, hd, 8192, pss)


def _fa2(device: str, causal: bool, head_dim: int, seq: int, pss: str = "fwd") -> float:
    peak = get_device(device).flops(DType.BF16) / 1e12
    return peak * kernel_data.attention_efficiency(device, DType.BF16, "fa2", causal, head_dim, seq, pss)


@pytest.mark.parametrize(("kernel", "causal", "head_dim", "seq", "pss", "tflops"), [
    ("fa2", False, 64, 2048, "fwd", 380.99), ("fa2", False, 64, 8192, "bwd", 329.09),
    ("fa2", False, 128, 8192, "fwd", 361.591), ("fa2", True, 128, 8192, "fwd", 373.392),
    ("fa2", True, 128, 32768, "bwd", 330.801),
    ("cudnn", True, 128, 8192, "fwd", 1171.278), ("cudnn", True, 128, 4096, "bwd", 701.265)])
def test_b200_attention_is_its_measured_rows(kernel: str, causal: bool, head_dim: int, seq: int, pss: str,
                                             tflops: float) -> None:
    """FlashAttention-2 has no tcgen05 path on SM100: on a B200 it runs near its Hopper speed (flash-attention
    issue #1589, tritonbench PR #171, cudnn-frontend's SDPA benchmark), not at the H100 share of B200's peak;
    cuDNN 9.10 through PyTorch's SDPA on the same causal GQA layers (cudnn-frontend's benchmark)."""
    peak = get_device("b200-sxm-180gb").flops(DType.BF16) / 1e12
    got = peak * kernel_data.attention_efficiency("b200-sxm-180gb", DType.BF16, kernel, causal, head_dim, seq, pss)
    assert got == pytest.approx(tflops, rel=1e-6)


@pytest.mark.parametrize(("kernel", "seq", "pss", "tflops"), [
    ("cudnn", 8192, "fwd", 1495.674), ("cudnn", 32768, "bwd", 1319.161), ("fa2", 16384, "fwd", 430.746)])
def test_gb300_attention_is_its_measured_rows(kernel: str, seq: int, pss: str, tflops: float) -> None:
    """GB300 (Blackwell Ultra) has rows of its own: cuDNN 9.13 and FlashAttention-2 through PyTorch's SDPA on causal
    GQA layers (cudnn-frontend's benchmark); a non-causal FA2 lookup scales the H100 curve through them, near the
    B200's FA2 speed, not at the H100 share of GB300's peak."""
    peak = get_device("gb300").flops(DType.BF16) / 1e12
    got = peak * kernel_data.attention_efficiency("gb300", DType.BF16, kernel, True, 128, seq, pss)
    assert got == pytest.approx(tflops, rel=1e-6)
    assert peak * kernel_data.attention_efficiency("gb300", DType.BF16, "fa2", False, 128, 8192, "fwd") < 550


def test_flashattention_2_on_blackwell_is_far_below_cudnn_everywhere() -> None:
    """The rows not measured (causal, other head dims, GB200) are the H100 FA2 curves scaled through the B200
    rows: within 0.8-1.5x of FA2 on an H100, and under half of cuDNN on the same die."""
    for dev in ("b200-sxm-180gb", "gb200"):
        for causal in (False, True):
            for hd in (64, 128, 192):
                for pss in ("fwd", "bwd"):
                    fa2 = _fa2(dev, causal, hd, 8192, pss)
                    assert 0.8 <= fa2 / _fa2("h100-sxm5-80gb", causal, hd, 8192, pss) <= 1.5
                    cudnn = get_device(dev).flops(DType.BF16) / 1e12 * kernel_data.attention_efficiency(
                        dev, DType.BF16, "cudnn", causal, hd, 8192, pss)
                    assert fa2 < 0.5 * cudnn


def test_torchtitan_runs_cudnn_attention_on_blackwell() -> None:
    """torchtitan puts cuDNN first in SDPA on compute capability 10.x from May 2025 (PR #1196) and on every GPU
    from October 2025 (PR #1776, with PyTorch 2.9's own cuDNN preference): the presets say which kernel runs
    where, and rows, flags and the planner all take it from there."""
    from distscope.plan import AttentionImpl
    from distscope.software.presets import get_software

    mid = get_software("torchtitan-2025")
    assert mid.attention_on("b200-sxm-180gb") is AttentionImpl.CUDNN
    assert mid.attention_on("gb300") is AttentionImpl.CUDNN
    assert mid.attention_on("h100-sxm5-80gb") is AttentionImpl.FLASH
    assert get_software("torchtitan-torch2.9").attention_on("h100-sxm5-80gb") is AttentionImpl.CUDNN
    assert get_software("torchtitan-2024").attention_on("b200-sxm-180gb") is AttentionImpl.FLASH


@pytest.mark.parametrize("device", ["a100-sxm4-80gb", "h100-sxm5-80gb", "b200-sxm-180gb"])
def test_fp16_attention_runs_as_fast_as_bf16(device: str) -> None:
    """FP16 and BF16 share a tensor-core rate and FlashAttention's kernel template: FP16 reads the BF16 rows
    (on the A100 it had fallen through to a GEMM-ceiling scaling at about half of FlashAttention-2's
    measured 228 TFLOP/s)."""
    eff = kernel_data.attention_efficiency
    for causal, hd, seq, pss in ((False, 128, 16384, "fwd"), (True, 64, 4096, "bwd")):
        assert eff(device, DType.FP16, "fa2", causal, hd, seq, pss) == eff(device, DType.BF16, "fa2", causal, hd, seq, pss)
    assert eff("a100-sxm4-80gb", DType.FP16, "fa2", False, 128, 16384, "fwd") == pytest.approx(228 / 312, rel=0.01)
