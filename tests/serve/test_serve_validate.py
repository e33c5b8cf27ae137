"""`serve validate` on data/validation/serving_runs.csv: every row parsed, unknown lengths skipped with a
reason, in-sample error bounded with the stored calibration, and (DISTSCOPE_FULL_SERVE_CV=1, ~3 min)
leave-one-source_id-out CV within the issue's targets."""

import json
import os

import pytest

from distscope.errors import DistscopeError
from distscope.serve.calibration import FITTED, current
from distscope.serve.rows import Scenario, read_rows
from distscope.serve.validate import report


@pytest.fixture(scope="module")
def rows(validation_dir):  # type: ignore[no-untyped-def]
    out = read_rows(validation_dir / "serving_runs.csv")
    assert not [r for r in out if isinstance(r, DistscopeError)]
    return out


@pytest.fixture(scope="module")
def rep(rows):  # type: ignore[no-untyped-def]
    return report(rows)


def test_every_row_parses(rows) -> None:
    assert len(rows) == 134
    scen = {r.scenario for r in rows}
    assert scen == set(Scenario)


def test_unknown_lengths_are_skipped_with_a_reason(rep, rows) -> None:
    skipped = {(s["run_id"], s["metric"]): s["reason"] for s in rep["skipped"]}
    assert "input_len unknown" in skipped[("R115", "ttft_s")]
    assert "output_len unknown" in skipped[("R081", "throughput_out_tok_s")]
    assert ("R072", "ttft_s") not in skipped  # a single request's TTFT needs only the prompt
    predicted = {(r["run_id"], r["metric"]) for r in rep["rows"]}
    assert not predicted & set(skipped)
    assert not rep["failed"]


def test_json_rows_contract(rep) -> None:
    for r in rep["rows"]:
        assert {"run_id", "metric", "predicted", "measured", "error_pct"} <= set(r)
        assert r["error_pct"] == pytest.approx(100 * (r["predicted"] - r["measured"]) / r["measured"])
    assert set(rep["mape_pct"]) == {"throughput_out_tok_s", "ttft_s", "tpot_s"}


def test_in_sample_error_with_the_stored_calibration(rep) -> None:
    # measured: throughput 8.1%, TTFT 14.3%, TPOT 10.1% over 68/34/10 rows (benchmarks/serve_calibrate.py,
    # refitted after the training calibration moved σ and κ, which serving's GEMM model shares)
    m = rep["mape_pct"]
    assert m["throughput_out_tok_s"] < 10 and m["ttft_s"] < 16 and m["tpot_s"] < 12
    assert rep["n"] == {"throughput_out_tok_s": 68, "ttft_s": 34, "tpot_s": 10}
    assert "serve_calibrate.py" in current().source


def test_stored_cv_result_matches_targets() -> None:
    """The committed CV numbers (benchmarks/results/serve_calibrate.json) meet the issue's targets;
    the full refit is the env-flagged test below."""
    from tests.conftest import REPO

    res = json.loads((REPO / "benchmarks/results/serve_calibrate.json").read_text())
    cv = res["cv_mape_pct"]
    assert cv["throughput_out_tok_s"] <= 15 and cv["ttft_s"] <= 20 and cv["tpot_s"] <= 15
    assert {k: pytest.approx(v, rel=1e-3) for k, v in res["fitted"].items()} == {k: getattr(current(), k) for k in FITTED}


@pytest.mark.skipif(not os.environ.get("DISTSCOPE_FULL_SERVE_CV"), reason="set DISTSCOPE_FULL_SERVE_CV=1 (about 3 min)")
def test_leave_one_source_out_cv(rows) -> None:
    from distscope.serve.calibrate import cross_validate

    good = [r for r in rows if not isinstance(r, DistscopeError)]
    cv = cross_validate(good)["cv_mape_pct"]
    assert cv["throughput_out_tok_s"] <= 15 and cv["ttft_s"] <= 20 and cv["tpot_s"] <= 15
