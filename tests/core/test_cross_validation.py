"""Out-of-sample accuracy (issue 9): leave-one-source-out cross-validation over the public published
runs and the independent evidence rows, the shipped calibration on rows it never saw, and the FP8
speed-ups Transformer Engine / torchao stacks measure. Tolerances sit a little above the measured
figures (in the comments) so that a regression fails."""

from __future__ import annotations

import re
import statistics
from pathlib import Path

import pytest

from distscope.errors import DistscopeError
from distscope.validate.cv import cross_validate
from distscope.validate.harness import load_rows, summary, validate_file

ROOT = Path(__file__).resolve().parents[2]
PUBLISHED = ROOT / "data/validation/published_runs.csv"
EVIDENCE = ROOT / "data/evidence/training_runs.csv"


@pytest.fixture(scope="module")
def cv():  # type: ignore[no-untyped-def]
    return cross_validate(load_rows([PUBLISHED, EVIDENCE]))


def test_leave_one_source_out_error(cv) -> None:  # type: ignore[no-untyped-def]
    s = summary(cv.results, cv=True)
    assert s["failed_rows"] == 0 and s["predicted_rows"] == 148
    # measured 9.98% over 106 rows after the S19 rows got sequence_parallel=auto; 11.6% (in-sample 10.4%)
    # with E9's 29 Blackwell / MoE rows (11.4% once expert GEMMs are priced per local expert), whose B200 MoE runs are predicted 40-64% too fast (issue 19's 8% is not met);
    # 11.0% with the host floor (model/host.py) and MTP; 11.3% over 140 rows with E8's GB200 / GB300 Qwen3 rows;
    # 11.4% with Blackwell attention rows (kernel_data); 146 rows with E10: 11.4%, and 11.3% once κ is bounded by the
    # grouped-GEMM component data (efficiency.BOUNDS); 11.1% once B200 attention is priced from its measurements
    # and torchtitan runs cuDNN on Blackwell (its B200 rows, no longer carried by FA2 priced at 2x its speed,
    # are 13-52% too fast); 10.6% once an FP8 / FP4 recipe doubles each expert GEMM's host work (model/host.py);
    # 11.0% over 147 rows with E8's Qwen3-Next row (its hybrid layers, -22% out of sample); 10.9% over 148 with
    # E11's DeepSeek-V4-Pro run (its compressed attention and mHC, -0.6% out of sample)
    assert s["cv_mape_pct"] <= 11.5
    assert s["cv_mape_pct"] >= s["mape_pct"] - 1e-9  # held out can only be as good as fitted on everything


def test_each_fold_is_refitted_without_its_source(cv) -> None:  # type: ignore[no-untyped-def]
    assert len(cv.folds) >= 14
    assert sum(f != cv.fitted for f in cv.folds.values()) >= len(cv.folds) // 2
    moved = [r for r in cv.results if r.cv_predicted_step_time_s is not None
             and abs(r.cv_predicted_step_time_s / r.predicted_step_time_s - 1) > 1e-6]  # type: ignore[operator]
    assert len(moved) >= 50


def test_shipped_calibration_in_sample() -> None:
    """The shipped calibration is fitted on both sets, so these are in-sample figures."""
    published = summary(validate_file(PUBLISHED))
    assert published["failed_rows"] == 0 and published["mape_pct"] <= 5.75  # measured 4.81%
    evidence = summary(validate_file(EVIDENCE))
    assert evidence["failed_rows"] == 0 and evidence["mape_pct"] <= 14.5  # measured 12.3%


def test_pytorch_stack_is_fitted_only_from_pytorch_native_rows(cv) -> None:  # type: ignore[no-untyped-def]
    """π moves only rows of PyTorch-native stacks: without one in the fit it stays at its prior, and
    with them it lands inside its bounds, below 1 (those stacks run slower than fused ones)."""
    from distscope.model import efficiency as eff

    published_only = cross_validate(load_rows([PUBLISHED]))
    assert published_only.fitted["pytorch_stack"] == eff.PRIORS["pytorch_stack"]
    lo = eff.BOUNDS["pytorch_stack"][0]
    assert lo < cv.fitted["pytorch_stack"] < 0.9
    assert all(lo <= f["pytorch_stack"] < 0.9 for f in cv.folds.values())


def test_fp8_speedups_are_those_of_real_stacks() -> None:
    """Measured end-to-end FP8/BF16 speed-ups of the clean pairs are 1.00-1.44 (not the ~1.8 of FP8
    GEMMs alone); predicted 1.05-1.30, mean |predicted - measured| 0.059; 13 of the 14
    within 10% of the measured speed-up (E2 70B async TP is predicted 1.26 against 1.44)."""
    rows = {r.run_id: r for r in validate_file(EVIDENCE)}
    diffs: list[float] = []
    within = 0
    for rid, f in rows.items():
        m = re.fullmatch(r"(.+)-fp8", rid)
        b = rows.get(f"{m[1]}-bf16") if m else None
        if b is None or f.predicted_step_time_s is None or b.predicted_step_time_s is None:
            continue
        predicted = b.predicted_step_time_s / f.predicted_step_time_s
        measured = b.measured_step_time_s / f.measured_step_time_s
        assert 1.0 <= predicted <= 1.5, (rid, predicted)
        diffs.append(abs(predicted - measured))
        within += abs(predicted / measured - 1) <= 0.10
    assert len(diffs) >= 12 and statistics.fmean(diffs) <= 0.075
    assert within >= len(diffs) - 1


def test_recipe_pairs_within_ten_percent() -> None:
    """Issue 19: MXFP8 against FP8 current scaling (the same Megatron-Bridge run, E9) and MXFP8 against BF16:
    every predicted speed-up within 10% of the measured one. Measured MXFP8 is 4-6% slower than FP8-CS on
    Blackwell; predicted about equal (no MXFP8 GEMM measurement tells the block-scaled GEMM's own speed)."""
    rows = {r.run_id: r for r in validate_file(EVIDENCE)}
    checked = 0
    for rid, f in rows.items():
        m = re.fullmatch(r"(E9-.+)-mxfp8", rid)
        for base in ("bf16", "fp8cs") if m else ():
            b = rows.get(f"{m[1]}-{base}")  # type: ignore[index]
            if b is None or b.predicted_step_time_s is None or f.predicted_step_time_s is None:
                continue
            predicted = b.predicted_step_time_s / f.predicted_step_time_s
            measured = b.measured_step_time_s / f.measured_step_time_s
            assert abs(predicted / measured - 1) <= 0.10, (rid, base, predicted, measured)
            checked += 1
    assert checked >= 5


def test_unknown_grouping_is_one_line() -> None:
    from distscope.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["validate", str(PUBLISHED), "--cv", "sauce"])
    assert exc.value.code == 2


def test_nothing_to_fit_is_an_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text(PUBLISHED.read_text().splitlines()[0] + "\n")
    with pytest.raises(DistscopeError):
        cross_validate(load_rows([bad]))
