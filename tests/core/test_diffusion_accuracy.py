"""Published diffusion inference runs (data/evidence/diffusion_runs.csv) against model/patch_parallel.py:
out of sample, since nothing in the path is fitted (validate/diffusion_rows.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("diffusers")

from distscope.validate.diffusion_rows import predict_file, summary

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def results():  # type: ignore[no-untyped-def]
    return {r.run_id: r for r in predict_file(ROOT / "data/evidence/diffusion_runs.csv", ROOT)}


def test_every_row_is_predicted(results) -> None:  # type: ignore[no-untyped-def]
    assert summary(list(results.values()))["rows"] == 9
    # the README's figures (benchmarks/results/diffusion_accuracy.json) are this code's
    saved = json.loads((ROOT / "benchmarks/results/diffusion_accuracy.json").read_text())["per_row"]
    assert {k: v["predicted"] for k, v in saved.items()} == pytest.approx(
        {k: r.predicted for k, r in results.items()}, rel=2e-3)


def test_distrifusion_speedups_within_tolerance(results) -> None:  # type: ignore[no-untyped-def]
    """SDXL at 3840x3840 on 2/4/8 A100: measured 1.8/3.4/6.1x, predicted 2.00/3.85/7.56x (+11, +13, +24%):
    the model finds the exchange hidden behind compute and misses a loss that grows with GPUs (and is
    10% already at 2 GPUs, where only the CFG halves are split). Held at 20% mean, 26% each."""
    errs = [abs(results[f"D1-SDXL-3840-{n}GPU"].error_pct) for n in (2, 4, 8)]
    assert sum(errs) / 3 <= 20.0
    assert max(errs) <= 26.0
    speedups = [results[f"D1-SDXL-3840-{n}GPU"].predicted for n in (2, 4, 8)]
    assert speedups == sorted(speedups) and all(s < n for s, n in zip(speedups, (2, 4, 8), strict=True))


def test_sdxl_single_gpu_latency_within_tolerance(results) -> None:  # type: ignore[no-untyped-def]
    """SDXL 1024x1024, 50 steps, end to end on one A100: eager -15.9%, compiled (CUDA graphs) -4.9%, compiled
    with a channels-last UNet -4.4%. The first two were priced channels-last until the rows said NCHW
    (diffusers' default, which fal's benchmark keeps but for its channels-last row): cuDNN's layout
    transforms around each 3x3 convolution and the NCHW VAE moved them from -17.7% / -6.9%. Stable Diffusion
    1.5 at 512x512 is not held: -46% eager, -36% compiled, -24% channels-last (the kernel model prices its
    small convolutions and attention at about TensorRT's speed, 0.82 s, not PyTorch 2.1's; its SDPA was
    FlashAttention-1, priced as FlashAttention-2)."""
    assert abs(results["F1-SDXL-A100-EAGER"].error_pct) <= 20.0
    assert abs(results["F1-SDXL-A100-COMPILED"].error_pct) <= 8.0
    assert abs(results["F1-SDXL-A100-COMPILED-CL"].error_pct) <= 8.0
    # channels-last is faster than NCHW in the model too, as measured (SD 1.5: 1.352 -> 1.066 s)
    assert results["F1-SD15-A100-COMPILED-CL"].predicted < results["F1-SD15-A100-COMPILED"].predicted
