"""Short-form convergence in CI: 4 gloo ranks, sharded DP, same init and batches for every run."""

import pytest

from distscope.compress.convergence import run_convergence
from distscope.compress.sharded_dp import TrainConfig
from distscope.compress.spec import CompressionMethod
from distscope.errors import DistscopeError

STEPS = 80


@pytest.fixture(scope="module")
def results() -> dict:
    return run_convergence(STEPS, timeout_s=120)


def test_all_runs_learn(results: dict) -> None:
    for name, row in results.items():
        assert row["final_loss"] < row["first_loss"] - 0.2, name


def test_qwd_tlq_within_one_percent_of_baseline(results: dict) -> None:
    assert abs(results["qwd+tlq-hs"]["final_vs_baseline_pct"]) < 1.0
    assert abs(results["qwd+tlq-hs"]["eval_vs_baseline_pct"]) < 1.0


def test_direct_int4_weights_worse_than_qwd(results: dict) -> None:
    assert results["int4-weights"]["eval_loss"] > results["qwd+tlq-hs"]["eval_loss"]
    assert results["int4-weights"]["final_loss"] > results["qwd+tlq-hs"]["final_loss"]


def test_bad_inputs() -> None:
    with pytest.raises(DistscopeError, match="steps=3"):
        run_convergence(3)
    with pytest.raises(DistscopeError, match="runs="):
        run_convergence(20, runs=("nope",))
    with pytest.raises(DistscopeError, match="weights=tlq-hs"):
        TrainConfig(weights=CompressionMethod.TLQ_HS)
