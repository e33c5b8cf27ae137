"""HugeCTR's hybrid embedding (model/hybrid_embedding.py) priced by model/embedding_cost.py, and the MLPerf
runs that trained with it (data/evidence/dlrm/hugectr_hybrid_configs.yaml) bracketed by what their configs
allow."""

from __future__ import annotations

from pathlib import Path

import pytest

from distscope.errors import DistscopeError
from distscope.model.embedding_cost import ShardingType, dlrm_terms, estimate_dlrm
from distscope.model.hybrid_embedding import HybridEmbedding, frequent_bound, threshold
from distscope.search.embedding_plan import place, uniform
from distscope.system.presets import get_cluster
from distscope.workload.embedding import load_dlrm
from tests.cli_run import run_cli

ROOT = Path(__file__).resolve().parents[2]
MODEL = f"dlrm:{ROOT}/data/evidence/dlrm/mlperf_dlrm_v1.yaml"
BATCH = 71680


@pytest.fixture(scope="module")
def spec():  # type: ignore[no-untyped-def]
    return load_dlrm(MODEL)


def test_the_threshold_is_hugectrs() -> None:
    """model.cu calculate_threshold for IB_NVLink_Hier: iterations x nodes x a2a/ar x ratio x n/(n-1);
    the 8-node v2.0 config (20 iterations, 1.9e11 / 1.3e11, ratio 1.0) needs 267.25 counts."""
    assert threshold(20, 8, 1.9e11, 1.3e11, 1.0) == pytest.approx(20 * 8 * 1.9 / 1.3 * 8 / 7)
    assert threshold(20, 14, 1.9e11, 1.3e11, 0.5) == pytest.approx(threshold(20, 14, 1.9e11, 1.3e11, 1.0) / 2)
    # the most categories that can clear it: the window's lookups over the threshold, at most the buffer
    assert frequent_bound(BATCH, 26, 0.0, 267.25, 20, float("inf")) == int(20 * BATCH * 26 / 267.25)
    assert frequent_bound(BATCH, 26, 0.0, 1.0, 20, 2) == 2 * BATCH
    with pytest.raises(DistscopeError, match="nodes=1"):
        threshold(20, 1, 1.9e11, 1.3e11, 1.0)


def test_frequent_rows_move_into_the_all_reduce_and_infrequent_ones_into_the_all_to_all(spec) -> None:  # type: ignore[no-untyped-def]
    cluster = get_cluster("dgx-a100", 64)
    none = dlrm_terms(spec, cluster, HybridEmbedding(frequent=0, infrequent=BATCH * 26), global_batch=BATCH)
    some = dlrm_terms(spec, cluster, HybridEmbedding(frequent=100_000, infrequent=20_000), global_batch=BATCH)
    d, e = 128, spec.pooled_dtype.bytes
    assert none.dp_bytes == 0 and some.dp_bytes == 100_000 * d * e
    # a rank's infrequent rows: (local-1)/local of them to the node's other GPUs, then (H-1)/H across nodes
    assert some.out_sent[0] == pytest.approx(20_000 / 64 * d * e * 7 / 8)
    assert some.x_sent[0] == pytest.approx(20_000 / 64 * d * e * 7 / 8)
    assert some.node_a2a and not some.ids_sent.any()
    # every rank holds the frequent rows and 1/N of the rest
    rows = sum(t.rows for t in spec.tables)
    assert some.mem[0] == pytest.approx((100_000 + (rows - 100_000) / 64) * d * spec.embedding_dtype.bytes)
    # fewer lookups cross GPUs than under any table sharding: the all-to-all is cheaper than table-wise's
    tw = place(spec, cluster, uniform(spec, cluster, ShardingType.TABLE_WISE), global_batch=BATCH)
    hyb = estimate_dlrm(spec, cluster, HybridEmbedding(frequent=100_000, infrequent=20_000), global_batch=BATCH)
    assert hyb.breakdown_s["embedding_a2a"] < estimate_dlrm(spec, cluster, tw, global_batch=BATCH).breakdown_s["embedding_a2a"]
    more = estimate_dlrm(spec, cluster, HybridEmbedding(frequent=140_000, infrequent=20_000), global_batch=BATCH)
    assert more.step_time_s > hyb.step_time_s  # more frequent rows: a larger all-reduce and update


@pytest.mark.parametrize(("ref", "match"), [
    ("hugectr:hybrid:frequent=100", "give infrequent="),
    ("hugectr:hybrid:frequent=100:infrequnt=5", "'infrequnt' is not a hybrid embedding field.*infrequent"),
    ("hugectr:hybrid:frequent=x:infrequent=5", "frequent='x' is not a number"),
    ("hugectr:hybrid:frequent=-1:infrequent=5", "frequent=-1 must be non-negative"),
])
def test_bad_hybrid_specs_are_one_line(ref: str, match: str) -> None:
    with pytest.raises(DistscopeError, match=match):
        HybridEmbedding.parse(ref)


def test_impossible_counts_and_mixed_dims_are_refused(spec) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(DistscopeError, match="more categories than the tables have"):
        HybridEmbedding(frequent=10**12, infrequent=0).check(spec, BATCH)
    with pytest.raises(DistscopeError, match=r"more than the .* lookups"):
        HybridEmbedding(frequent=0, infrequent=10**9).check(spec, BATCH)
    mixed = load_dlrm(f"dlrm:{ROOT}/examples/dlrm/tables.yaml")
    with pytest.raises(DistscopeError, match="one embedding_vec_size"):
        HybridEmbedding(frequent=0, infrequent=0).check(mixed, 65536)


def test_estimate_takes_it_and_names_a_bad_field(capsys: pytest.CaptureFixture[str]) -> None:
    flags = ["estimate", "--model", MODEL, "--cluster", "dgx-a100", "--gpus", "64", "--global-batch", str(BATCH)]
    code, out = run_cli(capsys, *flags, "--sharding", "hugectr:hybrid:frequent=50000:infrequent=29120", "--json")
    assert code == 0 and '"hugectr_hybrid"' in out
    code, out = run_cli(capsys, *flags, "--sharding", "hugectr:hybrid:frequent=50000")
    assert code != 0 and "give infrequent=" in out and "Traceback" not in out


def test_the_runs_that_trained_with_it_lie_between_its_ends() -> None:
    """Each MLPerf v1.1 / v2.0 / v2.1 multi-node HugeCTR DLRM run lies between no frequent category and the
    most its config's threshold admits (the published configs give no count of frequent categories). The
    two v1.0 runs are slower than both ends: the same configs ran 35% faster in v1.1 (HugeCTR's v1.0
    implementation), which the model does not know."""
    from distscope.validate.dlrm_rows import hybrid_brackets

    brackets = {b.run_id: b for b in hybrid_brackets(ROOT / "data/evidence/dlrm_runs.csv",
                                                     ROOT / "data/evidence/dlrm/hugectr_hybrid_configs.yaml", ROOT)}
    assert len(brackets) == 7
    later = [b for k, b in brackets.items() if "-V10-" not in k]
    assert all(b.inside for b in later), [(b.run_id, b.low_ms, b.measured_ms, b.high_ms) for b in later]
    assert all(b.measured_ms > b.high_ms for k, b in brackets.items() if "-V10-" in k)
