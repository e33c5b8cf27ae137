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
