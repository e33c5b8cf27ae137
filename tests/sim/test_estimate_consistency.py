"""Simulated step time (unaware mode) within 4% of `distscope estimate` for the published-run plans.

For every row of data/validation/published_runs.csv the foundation's harness picks the plan
(validate.harness.predict_row); the step is generated with trace.from_plan + trace.builder (one
trace per pipeline stage) and simulated on the row's cluster (sim.cluster_network).
Rows whose simulation is large (micro-batches x layers above CI_WORK_LIMIT) run only with
DISTSCOPE_FULL_CONSISTENCY=1; benchmarks/simulate_speed.py runs all of them.
Both sides run with the estimator's overlap-interference term ρ (efficiency.OVERLAP_COST) at 0: the
simulator does not model compute slowed by the communication hidden beside it (sim/README.md).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from distscope.model import efficiency as eff
from distscope.sim.api import simulate_traces
from distscope.sim.cluster_network import ClusterNetwork
from distscope.trace.builder import build_traces
from distscope.trace.from_plan import step_spec
from distscope.validate.calibration import calibrated
from distscope.validate.cluster_from_row import cluster_for
from distscope.validate.harness import predict_row
from distscope.validate.rows import parse_row, read_rows
from distscope.workload.training import TrainingShape

CSV = str(Path(__file__).resolve().parents[2] / "data" / "validation" / "published_runs.csv")
TOLERANCE = 0.04  # measured max 3.3% (MCORE24-119B) with rho = 0; was 2.9% before the kernel-level efficiency model
CI_WORK_LIMIT = 8200  # micro-batches x layers: the 405B CP row (8064) is the largest that runs in CI
ROWS = [parse_row(raw, line) for line, raw in read_rows(CSV)]
FULL = os.environ.get("DISTSCOPE_FULL_CONSISTENCY") == "1"


def _work(row) -> int:  # type: ignore[no-untyped-def]
    mb = row.micro_batch or 1
    return row.global_batch // (row.dp * mb) * row.spec.layers


@pytest.mark.parametrize("row", ROWS, ids=[r.run_id for r in ROWS])
def test_simulation_matches_estimate(row) -> None:  # type: ignore[no-untyped-def]
    if not FULL and _work(row) > CI_WORK_LIMIT:
        pytest.skip(f"{_work(row)} micro-batch x layers; set DISTSCOPE_FULL_CONSISTENCY=1")
    with calibrated({**eff.CALIBRATION, "overlap_cost": 0.0}):
        result = predict_row(row)
    assert result.plan is not None and result.predicted_step_time_s is not None, result.error
    cluster = cluster_for(row.gpu, row.num_gpus, row.gpus_per_node, row.intra_node_GBps, row.inter_node_GBps_per_gpu)
    spec = step_spec(row.spec, TrainingShape(seq_len=row.seq_len, global_batch=row.global_batch), cluster, result.plan,
                     software=row.software)
    sim = simulate_traces(build_traces(spec, symmetric=True), ClusterNetwork(cluster))
    assert sim.simulated_ranks == row.pp
    assert sim.step_time_s == pytest.approx(result.predicted_step_time_s, rel=TOLERANCE), (
        f"{row.run_id}: simulated {sim.step_time_s:.4f} s vs estimated {result.predicted_step_time_s:.4f} s"
    )


def test_ci_covers_every_feature() -> None:
    ran = [r for r in ROWS if FULL or _work(r) <= CI_WORK_LIMIT]
    assert any(r.zero_stage == 3 for r in ran)
    assert any(r.vp > 1 for r in ran)
    assert any(r.cp > 1 for r in ran)
    assert any(r.pp > 1 and r.vp == 1 for r in ran)
    assert any(r.sequence_parallel for r in ran)
    assert len(ran) >= 30
