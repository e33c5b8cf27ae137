"""Published runs of arbitrary torch modules (data/evidence/module_runs.csv) against the module estimate:
out of sample, since nothing in the module path is fitted (validate/module_rows.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from distscope.validate.module_rows import predict_file, summary

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def results():  # type: ignore[no-untyped-def]
    return predict_file(ROOT / "data/evidence/module_runs.csv", ROOT)


def test_every_row_is_predicted(results) -> None:  # type: ignore[no-untyped-def]
    assert summary(results)["rows"] == 24
    # the README's figures (benchmarks/results/module_accuracy.json, errors to 0.1 point) are this code's
    saved = json.loads((ROOT / "benchmarks/results/module_accuracy.json").read_text())["per_row"]
    assert saved == pytest.approx({r.run_id: round(r.error_pct, 1) for r in results}, abs=0.11)


def test_mixed_precision_runs_within_tolerance(results) -> None:  # type: ignore[no-untyped-def]
    """AMP (fp16, NHWC): measured 12.8% mean, 19.6% max. ResNeXt-101 is -16% / -20% (too fast) since its
    grouped convolutions' backward is counted at its real FLOPs (module_graph.conv_backward_flops; torch's
    formula had it at 16x, which made these rows +17% / +11% too slow for a wrong reason): the bound on the
    mean moved from 12% to 14% for that fix, stated as a loosened tolerance. What is left is on the GPU
    side: an H100's profiled step (data/device/nvidia-h100-2026-11-27, module_profile) shows the convolutions
    priced right and half-precision batch norm 1.6x the model. The 8-GPU ResNet-50 run scales 6.72x, which
    the GPU-side model does not explain. The TF32 rows (NCHW) are in test_tf32_nchw_rows."""
    amp = [abs(r.error_pct) for r in results if r.run_id.startswith("M1-") and "-AMP-" in r.run_id]
    assert len(amp) == 4
    assert sum(amp) / len(amp) <= 14.0
    assert max(amp) <= 20.0


def test_tf32_nchw_rows(results) -> None:  # type: ignore[no-untyped-def]
    """A100 TF32 runs set no memory format, so they run NCHW: cuDNN's layout transforms and NCHW batch norm
    (module_estimate.layout_transform_bytes, NCHW_BN_MEM_ETA, from the H100's profiled NCHW steps) moved them
    from -31/-33% (ResNet-50) and -49/-49% (ResNeXt-101) to -15/-18% and -35/-36%. Held within 40%; what
    is left is TF32 convolution speed (the H100's profiled TF32 convolution backward is 1.2-1.6x the
    model) and whatever the A100's cuDNN of 2020-21 did differently."""
    tf32 = {r.run_id: r.error_pct for r in results if r.run_id.startswith("M1-") and "-TF32-" in r.run_id}
    assert len(tf32) == 4
    assert all(-40.0 < e < 0.0 for e in tf32.values())
    assert sum(abs(e) for e in tf32.values()) / 4 < 30.0


def test_v100_rows_were_added_after_the_model(results) -> None:  # type: ignore[no-untyped-def]
    """DGX-1 V100 32GB (M2), added after the convolution model was calibrated on the H100 table: a GPU with
    no kernel data of its own (the default GEMM ceiling, with a warning). ResNet-50 AMP: +18% (1 GPU) and
    +3% (8 GPUs), held within 25%; FP32 (NCHW, no tensor cores) was +40% / +37% (+34% / +30% before NCHW
    batch norm was priced) while ResNeXt-101's FP32 rows, whose 3x3 layers are grouped, were +7% / +3%: the
    ungrouped 3x3 layers run cuDNN's Winograd kernels in FP32 (efficiency.WINOGRAD_F2X2_3X3, the algorithm's
    2.25x, not fitted), now +21% / +18%, held within 25%. ResNeXt-101 was +35% to +53% until its grouped
    convolutions' backward was counted at its real FLOPs (module_graph.conv_backward_flops): now AMP -2% /
    -8%, FP32 +7% / +3%, held within 10%."""
    v100 = {r.run_id: r.error_pct for r in results if r.run_id.startswith("M2-")}
    assert len(v100) == 8
    assert all(abs(e) <= 25.0 for rid, e in v100.items() if "-RN50-" in rid)
    assert all(abs(e) <= 10.0 for rid, e in v100.items() if "-RNXT101-" in rid)


def test_se_resnext_rows_added_after_the_model(results) -> None:  # type: ignore[no-untyped-def]
    """SE-ResNeXt-101 32x4d (M3: DeepLearningExamples on DGX A100 and DGX-1 V100 32GB, AMP, TF32 / FP32, 1 and
    8 GPUs), added after the grouped-convolution FLOPs, the bf16 batch norm and the NCHW terms were set, the
    model unchanged since: 15.3% mean |error|, -31.4% to +8.8%. Held: mean within 20%, each within 35%. The
    8-GPU runs are the worst (A100 AMP -31%: its 6.75x scaling on 8 GPUs, as ResNet-50's 6.72x, is not in
    the GPU-side model)."""
    se = [r.error_pct for r in results if r.run_id.startswith("M3-")]
    assert len(se) == 8
    assert sum(abs(e) for e in se) / len(se) < 20.0
    assert all(abs(e) < 35.0 for e in se)
