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
    """AMP (fp16, NHWC): measured 10.9% mean, 16.5% max (ResNeXt's grouped convolutions are priced too slow,
    +11/+17%; the 8-GPU ResNet-50 run scales 6.72x, which the GPU-side model does not explain). TF32 rows
    are 31-35% too fast and are not held to a tolerance: there is no TF32 kernel data (the bf16 ceiling
    stands in, with a warning) and those runs use NCHW."""
    amp = [abs(r.error_pct) for r in results if "-A100-" in r.run_id and "-AMP-" in r.run_id]
    assert len(amp) == 4
    assert sum(amp) / len(amp) <= 12.0
    assert max(amp) <= 20.0


def test_v100_rows_were_added_after_the_model(results) -> None:  # type: ignore[no-untyped-def]
    """DGX-1 V100 32GB (M2), added after the convolution model was calibrated on the H100 table: a GPU with
    no kernel data of its own (the default GEMM ceiling, with a warning). ResNet-50 AMP: +18% (1 GPU) and
    +3% (8 GPUs), held within 25%; FP32 (NCHW, no tensor cores) +34% / +30%. ResNeXt-101's grouped
    convolutions are priced far too slow (AMP +44% / +35%, FP32 +53% / +47%): not held, no grouped-conv
    kernel data."""
    v100 = {r.run_id: r.error_pct for r in results if r.run_id.startswith("M2-")}
    assert len(v100) == 8
    assert all(abs(e) <= 25.0 for rid, e in v100.items() if "-RN50-AMP-" in rid)
    assert all(e > 0 for rid, e in v100.items() if "-RNXT101-" in rid)  # the known direction of the miss
