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
    assert summary(results)["rows"] == 8


def test_mixed_precision_runs_within_tolerance(results) -> None:  # type: ignore[no-untyped-def]
    """AMP (fp16, NHWC): measured 10.9% mean, 16.5% max (ResNeXt's grouped convolutions are priced too slow,
    +11/+17%; the 8-GPU ResNet-50 run scales 6.72x, which the GPU-side model does not explain). TF32 rows
    are 31-35% too fast and are not held to a tolerance: there is no TF32 kernel data (the bf16 ceiling
    stands in, with a warning) and those runs use NCHW."""
    amp = [abs(r.error_pct) for r in results if "-AMP-" in r.run_id]
    assert len(amp) == 4
    assert sum(amp) / len(amp) <= 12.0
    assert max(amp) <= 20.0
