"""Published runs of arbitrary torch modules (data/evidence/module_runs.csv) against the module estimate:
out of sample, since nothing in the module path is fitted (validate/module_rows.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from distscope.validate.module_rows import predict_file, summary

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def results():  # type: ignore[no-untyped-def]
    return predict_file(ROOT / "data/evidence/module_runs.csv", ROOT)


def test_every_row_is_predicted(results) -> None:  # type: ignore[no-untyped-def]
    assert summary(results)["rows"] == 16


def test_mixed_precision_runs_within_tolerance(results) -> None:  # type: ignore[no-untyped-def]
    """AMP (fp16, NHWC): measured 12.8% mean, 19.6% max. ResNeXt-101 is -16% / -20% (too fast) since its
    grouped convolutions' backward is counted at its real FLOPs (module_graph.conv_backward_flops; torch's
    formula had it at 16x, which made these rows +17% / +11% too slow for a wrong reason): the bound on the
    mean moved from 12% to 14% for that fix, stated as a loosened tolerance. What is left is on the GPU
    side: an H100's profiled step (data/device/nvidia-h100-2026-11-27, module_profile) shows the convolutions
    priced right and half-precision batch norm 1.6x the model. The 8-GPU ResNet-50 run scales 6.72x, which
    the GPU-side model does not explain. TF32 rows are 31-49% too fast and are not held: NCHW runs with no
    TF32 convolution data of their own (the H100's profiled TF32 convolutions are 20-40% slower than the
    model)."""
    amp = [abs(r.error_pct) for r in results if "-A100-" in r.run_id and "-AMP-" in r.run_id]
    assert len(amp) == 4
    assert sum(amp) / len(amp) <= 14.0
    assert max(amp) <= 20.0


def test_v100_rows_were_added_after_the_model(results) -> None:  # type: ignore[no-untyped-def]
    """DGX-1 V100 32GB (M2), added after the convolution model was calibrated on the H100 table: a GPU with
    no kernel data of its own (the default GEMM ceiling, with a warning). ResNet-50 AMP: +18% (1 GPU) and
    +3% (8 GPUs), held within 25%; FP32 (NCHW, no tensor cores) +34% / +30%, not held. ResNeXt-101 was
    +35% to +53% until its grouped convolutions' backward was counted at its real FLOPs
    (module_graph.conv_backward_flops): now AMP -2% / -8%, FP32 +2% / -2%, held within 10%."""
    v100 = {r.run_id: r.error_pct for r in results if r.run_id.startswith("M2-")}
    assert len(v100) == 8
    assert all(abs(e) <= 25.0 for rid, e in v100.items() if "-RN50-AMP-" in rid)
    assert all(abs(e) <= 10.0 for rid, e in v100.items() if "-RNXT101-" in rid)
