"""Recommendation models: the tables workload (workload/embedding.py), the step model under an embedding
sharding (model/embedding_cost.py), the sharding planner (search/embedding_plan.py) against TorchRec's
plans, and the two verbs on `--model dlrm:...`."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from distscope.dtypes import DType
from distscope.errors import DistscopeError
from distscope.model.efficiency import elementwise_s, gemm_s
from distscope.model.embedding_cost import (
    ID_BYTES,
    LENGTH_BYTES,
    Shard,
    ShardingType,
    TableSharding,
    dense_s,
    dlrm_terms,
    estimate_dlrm,
    interaction_passes,
    lookup_bytes,
    row_bytes,
)
from distscope.search.embedding_plan import place, plan_embeddings, uniform
from distscope.search.sharding_file import dump_sharding, parse_sharding
from distscope.system.presets import get_cluster
from distscope.workload.embedding import load_dlrm, parse_dlrm

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "data/reference/torchrec_plans.json"
MLPERF = load_dlrm("dlrm:mlperf-dcnv2")
EXAMPLE = load_dlrm(f"dlrm:{ROOT}/examples/dlrm/tables.yaml")


def _ds(*args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "distscope", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=300)
    assert (proc.returncode == 0) == ok, proc.stderr
    return proc


def _spec(tables: list[dict], **kw: object) -> dict:
    return {"name": "t", "bottom_mlp": [64, 32], "top_mlp": [64, 1], "interaction": "dcn", "tables": tables, **kw}


# --- the workload ------------------------------------------------------------------------------------------

def test_mlperf_preset_is_the_reference_configuration() -> None:
    """26 tables, 5 of 40M rows, dims 128, multi-hot 1..100 (mlcommons torchrec_dlrm's arguments)."""
    assert len(MLPERF.tables) == 26 and {t.dim for t in MLPERF.tables} == {128}
    assert sum(1 for t in MLPERF.tables if t.rows == 40_000_000) == 5
    assert max(t.pooling for t in MLPERF.tables) == 100 and sum(t.pooling for t in MLPERF.tables) == 214
    assert MLPERF.embedding_params == 128 * sum(t.rows for t in MLPERF.tables)


@pytest.mark.parametrize(("bad", "names"), [
    ({"tables": [{"name": "a", "rows": -5, "dim": 16}]}, "rows=-5"),
    ({"tables": [{"name": "a", "rows": 10, "dim": 16, "pooling": 0}]}, "pooling=0"),
    ({"tables": [{"name": "a", "rows": 10, "dim": 16, "colour": 1}]}, "unknown key 'colour'"),
    ({"tables": [{"name": "a", "rows": 10, "dim": 16}, {"name": "a", "rows": 10, "dim": 16}]}, "appears twice"),
    ({"tables": []}, "tables must be a non-empty list"),
    ({"tables": [{"name": "a", "rows": 10, "dim": 16}], "interaction": "cross"}, "interaction='cross'"),
    ({"tables": [{"name": "a", "rows": 10, "dim": 16}], "optimizer": "lion"}, "optimizer='lion'"),
    ({"tables": [{"name": "a", "rows": 10, "dim": 16}], "embedding_dtype": "fp8"}, "embedding_dtype=fp8"),
    ({"tables": [{"name": "a", "rows": 10, "dim": 16}], "output_dtype": "fp8"}, "output_dtype=fp8"),
    ({"tables": [{"name": "a", "rows": 10, "dim": 16}], "output_dtype": "half"}, "output_dtype='half'"),
    ({"tables": [{"name": "a", "rows": 10, "dim": 16}], "interaction": "dot"}, "dim differs"),
    ({"tables": [{"name": "a", "rows": 1e400, "dim": 16}]}, "finite"),
])
def test_bad_tables_file_names_the_field(bad: dict, names: str) -> None:
    with pytest.raises(DistscopeError, match=names.replace("(", r"\(")):
        parse_dlrm(_spec(**bad) if "tables" in bad and len(bad) == 1 else {**_spec([]), **bad}, "f.yaml")


@settings(max_examples=150, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
                    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=8), c, max_size=4),
                    max_leaves=12))
def test_any_yaml_value_is_a_spec_or_one_distscope_error(raw: object) -> None:
    """Whatever the file holds: a DlrmSpec or one DistscopeError, never another exception."""
    for value in (raw, {"tables": raw}, _spec([{"name": "a", "rows": raw, "dim": 16}])):
        try:
            parse_dlrm(value, "f.yaml")
        except DistscopeError as exc:
            assert "\n" not in str(exc)


# --- the step model ----------------------------------------------------------------------------------------

def test_table_wise_all_to_all_volume_is_the_owners_pooled_rows() -> None:
    """A table-wise table's owner sends each other rank its b pooled rows: (N-1)·b·d·e bytes; the receivers
    get b·d·e; every rank sends its ids (b·(p·8 + 4)) to the owner."""
    spec = parse_dlrm(_spec([{"name": "a", "rows": 1000, "dim": 64, "pooling": 4}]), "f")
    c = get_cluster("dgx-h100", 16)
    sh = (TableSharding(spec.tables[0], ShardingType.TABLE_WISE, (Shard(3, 1000, 64),)),)
    est = estimate_dlrm(spec, c, sh, global_batch=1600)
    b = 100
    assert est.rank_sent_bytes[3] == pytest.approx(15 * b * 64 * 4)
    assert sum(est.rank_sent_bytes) == pytest.approx(15 * b * 64 * 4)
    assert ID_BYTES * 4 + LENGTH_BYTES == 36
    assert est.rank_lookup_s[3] > 0 and sum(1 for x in est.rank_lookup_s if x > 0) == 1


def test_output_dtype_moves_pooled_rows_and_adagrad_keeps_a_state_per_element() -> None:
    """HugeCTR's mixed precision: fp16 pooled rows on the wire halve the all-to-all; element-wise Adagrad
    reads and writes one fp32 accumulator per element, not per row, in the backward lookup."""
    base = {**_spec([{"name": "a", "rows": 1_000_000, "dim": 128, "pooling": 4}] * 1), "optimizer": "rowwise_adagrad"}
    plain = parse_dlrm(base, "f.yaml")
    half = parse_dlrm({**base, "output_dtype": "fp16"}, "f.yaml")
    elementwise = parse_dlrm({**base, "optimizer": "adagrad"}, "f.yaml")
    assert plain.pooled_dtype is DType.FP32 and half.pooled_dtype is DType.FP16
    cluster = get_cluster("dgx-h100", 16)
    ts = TableSharding(plain.tables[0], ShardingType.TABLE_WISE, (Shard(3, 1_000_000, 128),))
    a, b = (dlrm_terms(s, cluster, (ts,), global_batch=4096) for s in (plain, half))
    assert np.isclose(b.out_sent.sum(), a.out_sent.sum() / 2) and np.array_equal(a.ids_sent, b.ids_sent)
    _, g_row = lookup_bytes(1000, 10, 128, plain)
    _, g_elem = lookup_bytes(1000, 10, 128, elementwise)
    assert np.isclose(g_elem - g_row, 1000 * 2 * (4 * 128 - 4))


def test_row_reads_are_whole_sectors() -> None:
    from distscope.dtypes import DType

    assert row_bytes(1, DType.FP32) == 32 and row_bytes(8, DType.FP32) == 32 and row_bytes(9, DType.FP32) == 64
    assert row_bytes(128, DType.FP16) == 256


def test_row_wise_splits_lookups_and_memory_over_ranks() -> None:
    c = get_cluster("dgx-h100", 8)
    rw = place(MLPERF, c, uniform(MLPERF, c, ShardingType.ROW_WISE), global_batch=65536)
    est = estimate_dlrm(MLPERF, c, rw, global_batch=65536)
    # even but for the tiny tables: 3 rows over 8 ranks puts a third of that table's ids on 3 of them
    assert max(est.rank_lookup_s) / min(est.rank_lookup_s) < 1.03
    assert max(est.rank_memory_bytes) / min(est.rank_memory_bytes) < 1.01
    assert est.breakdown_s["row_wise_rs_ag"] > 0 and est.breakdown_s["embedding_a2a"] == 0


def test_step_grows_with_batch_and_shrinks_with_bandwidth() -> None:
    c = get_cluster("dgx-h100", 32)
    sh = place(MLPERF, c, uniform(MLPERF, c, ShardingType.TABLE_WISE), global_batch=32768)
    small = estimate_dlrm(MLPERF, c, sh, global_batch=32768).step_time_s
    assert estimate_dlrm(MLPERF, c, sh, global_batch=65536).step_time_s > small
    fast = c.with_bandwidths({c.levels[-1].name: c.levels[-1].bw_GBps * 4})
    assert estimate_dlrm(MLPERF, fast, sh, global_batch=32768).step_time_s < small


# --- the planner ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("cluster", "gpus"), [("dgx-h100", 8), ("dgx-h100", 64), ("dgx-a100", 32)])
def test_planner_beats_every_single_type_plan(cluster: str, gpus: int) -> None:
    c = get_cluster(cluster, gpus)
    p = plan_embeddings(MLPERF, c, global_batch=65536)
    assert p.estimate.feasible
    for kind, est in p.baselines.items():
        assert est is None or p.estimate.step_time_s <= est.step_time_s * (1 + 1e-9), kind


def test_planner_respects_memory_and_the_allowed_types() -> None:
    c = get_cluster("dgx-h100", 8)
    p = plan_embeddings(MLPERF, c, global_batch=65536, allowed=frozenset({ShardingType.ROW_WISE,
                                                                        ShardingType.TABLE_WISE}))
    assert {ts.kind for ts in p.shardings} <= {ShardingType.ROW_WISE, ShardingType.TABLE_WISE}
    assert max(p.estimate.rank_memory_bytes) <= c.memory_capacity_bytes
    tight = c.with_memory(16.0, None)  # 16 GiB per GPU: the 40M-row tables (20 GiB) cannot sit on one GPU
    q = plan_embeddings(MLPERF, tight, global_batch=65536)
    assert max(q.estimate.rank_memory_bytes) <= tight.memory_capacity_bytes
    big = [ts for ts in q.shardings if ts.table.rows == 40_000_000]
    assert all(len(ts.shards) > 1 for ts in big)
    with pytest.raises(DistscopeError, match="no sharding fits"):
        plan_embeddings(MLPERF, c.with_memory(2.0, None), global_batch=65536)


def _reference_cases() -> list[tuple[str, dict]]:
    """The named cases and the random sets run once after the planner was frozen (the seed-2026 sets,
    seen while it was built, stay in benchmarks/torchrec_compare.py: CI time)."""
    return sorted((k, v) for k, v in json.loads(REFERENCE.read_text())["cases"].items() if "held-out:random-" not in k)


@pytest.mark.parametrize(("key", "case"), _reference_cases(), ids=[k for k, _ in _reference_cases()])
def test_never_slower_than_torchrecs_plan_under_the_same_model(key: str, case: dict) -> None:
    """TorchRec 1.8.0's own planner's plans (benchmarks/torchrec_compare.py --write-reference), priced by
    distscope's step model: distscope's plan is never slower. The random sets here were never seen while
    the planner was built."""
    model, cluster, gpus, batch = key.split("|")
    spec = parse_dlrm(case["spec"], case["spec"]["name"]) if "spec" in case else load_dlrm(
        model.replace("dlrm:examples", f"dlrm:{ROOT}/examples"))
    c = get_cluster(cluster, int(gpus))
    theirs = estimate_dlrm(spec, c, parse_sharding({"tables": case["tables"]}, spec, c, key), global_batch=int(batch))
    ours = plan_embeddings(spec, c, global_batch=int(batch))
    assert ours.estimate.step_time_s <= theirs.step_time_s * (1 + 1e-9)


def test_live_torchrec_plan_is_priced_and_not_faster() -> None:
    """Where TorchRec imports (search/torchrec_plan.py says how), its planner runs on the same tables."""
    from distscope.search import torchrec_plan as trp

    if not trp.available():
        pytest.skip(f"TorchRec does not import here: {trp.INSTALL}")
    c = get_cluster("dgx-h100", 16)
    sh, ranks = trp.torchrec_plan(EXAMPLE, c, global_batch=16384)
    assert len(ranks) == 16 and max(ranks) > 0
    theirs = estimate_dlrm(EXAMPLE, c, sh, global_batch=16384)
    assert plan_embeddings(EXAMPLE, c, global_batch=16384).estimate.step_time_s <= theirs.step_time_s * (1 + 1e-9)


def test_plan_torchrec_flag_shows_both_plans_per_rank_or_says_how_to_install() -> None:
    from distscope.search import torchrec_plan as trp

    args = ["plan", "--model", "dlrm:examples/dlrm/tables.yaml", "--gpus", "16", "--global-batch", "16384",
            "--torchrec"]
    if not trp.available():
        err = _ds(*args, ok=False).stderr.strip()
        assert "pip install torchrec==1.8.0" in err and len(err.splitlines()) == 1
        return
    side = json.loads(_ds(*args, "--json").stdout)["torchrec"]
    assert len(side["ranks"]) == 16 and side["distscope_plan_step_s"] <= side["torchrec_plan_step_s"] * (1 + 1e-9)
    assert all(r["torchrec_estimate_s"] >= 0 for r in side["ranks"])


# --- the sharding file and the verbs ---------------------------------------------------------------------

def test_sharding_file_round_trips_and_rejects_a_bad_one() -> None:
    c = get_cluster("dgx-h100", 16)
    p = plan_embeddings(EXAMPLE, c, global_batch=16384)
    raw = yaml.safe_load(dump_sharding(p.shardings))
    assert parse_sharding(raw, EXAMPLE, c, "f") == p.shardings
    bad = json.loads(json.dumps(raw))
    bad["tables"][0]["shards"][0]["rank"] = 99
    with pytest.raises(DistscopeError, match=r"rank=99 is outside 0\.\.15"):
        parse_sharding(bad, EXAMPLE, c, "f")
    bad = json.loads(json.dumps(raw))
    bad["tables"].pop()
    with pytest.raises(DistscopeError, match="has no sharding"):
        parse_sharding(bad, EXAMPLE, c, "f")
    bad = json.loads(json.dumps(raw))
    bad["tables"][0]["table"] = "user_idd"
    with pytest.raises(DistscopeError, match="closest: user_id"):
        parse_sharding(bad, EXAMPLE, c, "f")


def test_plan_and_estimate_agree_on_the_written_sharding(tmp_path: Path) -> None:
    out = tmp_path / "sharding.yaml"
    args = ["--model", "dlrm:examples/dlrm/tables.yaml", "--gpus", "16", "--global-batch", "16384"]
    plan = json.loads(_ds("plan", *args, "--write-sharding", str(out), "--json").stdout)
    again = shlex.split(plan["estimate_command"])
    assert again[:2] == ["distscope", "estimate"] and str(out) in again
    est = json.loads(_ds(*again[1:], "--json").stdout)
    assert est["step_time_s"] == pytest.approx(plan["estimate"]["step_time_s"], rel=1e-12)
    plain = json.loads(_ds("estimate", *args, "--json").stdout)  # no --sharding: the planner's choice
    assert plain["step_time_s"] == pytest.approx(plan["estimate"]["step_time_s"], rel=1e-12)
    rw = json.loads(_ds("estimate", *args, "--sharding", "rw", "--json").stdout)
    assert rw["sharding_types"] == {"row_wise": len(EXAMPLE.tables)} and rw["step_time_s"] > plain["step_time_s"]


@pytest.mark.parametrize(("args", "names"), [
    (["estimate", "--model", "dlrm:nope"], "dlrm:mlperf-dcnv2"),
    (["estimate", "--model", "dlrm:mlperf-dcnv2", "--tp", "2"], "--tp=2"),
    (["estimate", "--model", "dlrm:mlperf-dcnv2", "--global-batch", "100", "--gpus", "8"], "--global-batch=100"),
    (["estimate", "--model", "dlrm:mlperf-dcnv2", "--sharding", "diagonal"], "sharding='diagonal'"),
    (["plan", "--model", "dlrm:mlperf-dcnv2", "--tp", "2"], "--tp"),
    (["estimate", "--model", "llama3-8b", "--sharding", "rw"], "--sharding=rw is for recommendation models"),
    (["plan", "--model", "llama3-8b", "--write-sharding", "x.yaml"], "--write-sharding is for recommendation"),
    (["trace", "generate", "--model", "dlrm:mlperf-dcnv2", "--out", "x", "--symmetric"], "recommendation model's ranks"),
])
def test_bad_flags_get_one_line(args: list[str], names: str) -> None:
    err = _ds(*args, ok=False).stderr.strip()
    assert names in err and len(err.splitlines()) == 1, err


# --- error-bounded compression of the embedding all-to-all (compress/eb_codec.py, its measured table) -------

def test_compression_scales_the_all_to_all_and_adds_the_codec() -> None:
    from distscope.compress.eb_codec import codec_table, emb_compression

    c = get_cluster("dgx-h100", 16)
    sh = place(EXAMPLE, c, uniform(EXAMPLE, c, ShardingType.TABLE_WISE), global_batch=16384)
    plain = estimate_dlrm(EXAMPLE, c, sh, global_batch=16384)
    row = codec_table()["sz3:0.01"]
    fast = estimate_dlrm(EXAMPLE, c, sh, global_batch=16384, compression=emb_compression("emb=sz3:0.01", 1e4))
    # ~6x fewer bytes; the all-to-all's per-peer latency does not shrink with them
    assert row["ratio_embeddings"] > 4 and row["ratio_gradients"] > 4
    assert fast.breakdown_s["embedding_a2a"] < plain.breakdown_s["embedding_a2a"] / 2
    assert 0 < fast.breakdown_s["embedding_codec"] < plain.breakdown_s["embedding_a2a"]
    slow = estimate_dlrm(EXAMPLE, c, sh, global_batch=16384, compression=emb_compression("emb=sz3:0.01"))
    assert slow.step_time_s > plain.step_time_s  # the CPU codec's measured rate: it does not pay on NVLink/IB
    assert row["final_loss_vs_uncompressed_pct"] < 1.0


def test_plan_searches_compression_and_estimate_reproduces_it() -> None:
    args = ["--model", "dlrm:examples/dlrm/tables.yaml", "--gpus", "16", "--global-batch", "16384"]
    plan = json.loads(_ds("plan", *args, "--compress", "auto", "--quant-gbps", "1000", "--json").stdout)
    assert plan["compression"] is not None and len(plan["compression_searched"]) == 5
    assert plan["estimate"]["step_time_s"] == min(plan["compression_searched"].values())
    est = json.loads(_ds(*shlex.split(plan["estimate_command"])[1:], "--json").stdout)
    assert est["step_time_s"] == pytest.approx(plan["estimate"]["step_time_s"], rel=1e-12)


@pytest.mark.parametrize(("args", "names"), [
    (["estimate", "--model", "dlrm:mlperf-dcnv2", "--compress", "emb=sz9:0.01"], "emb=sz3:0.01"),
    (["estimate", "--model", "dlrm:mlperf-dcnv2", "--quant-gbps", "100"], "--quant-gbps is the codec's rate"),
    (["estimate", "--model", "dlrm:mlperf-dcnv2", "--compress", "emb=sz3:0.01", "--quant-gbps", "-1"],
     "--quant-gbps=-1.0"),
    (["plan", "--model", "llama3-8b", "--compress", "auto"], "plan searches a transformer's compression itself"),
])
def test_bad_compression_flags_get_one_line(args: list[str], names: str) -> None:
    err = _ds(*args, ok=False).stderr.strip()
    assert names in err and len(err.splitlines()) == 1, err


def test_every_published_dlrm_run_is_expressible() -> None:
    """data/evidence/dlrm_runs.csv: each row's tables, cluster, device and sharding build and price
    (accuracy is benchmarks/dlrm_accuracy.py's; its target is not met yet)."""
    from distscope.validate.dlrm_rows import predict_file

    results = predict_file(ROOT / "data/evidence/dlrm_runs.csv", ROOT)
    assert len(results) >= 10 and len({r.run_id for r in results}) == len(results)
    assert all(r.predicted_ms > 0 and r.measured_ms > 0 for r in results)
    # the 40 GB A100 of 2020's DGX A100 is slower at the same lookups than the 80 GB one (HBM 1.6 vs 2.0 TB/s)
    by_id = {r.run_id: r for r in results}
    assert by_id["DLRM-V07-INSPUR-NF5488-PYTORCH-1N"].predicted_ms > by_id["DLRM-V10-HCTR-1N"].predicted_ms
    # the figures the README quotes (benchmarks/results/dlrm_accuracy.json) are this code's: a change to the
    # kernel model or its calibration that moves them without rerunning benchmarks/dlrm_accuracy.py fails here
    saved = {r["id"]: r["predicted_ms"] for r in json.loads((ROOT / "benchmarks/results/dlrm_accuracy.json").read_text())["rows"]}
    assert saved == pytest.approx({r.run_id: r.predicted_ms for r in results}, rel=2e-3, abs=1e-4)


def test_dcnv2_runs_meet_the_family_target() -> None:
    """Issue 22's per-family target, DLRM-DCNv2: mean error within 15% over its published runs (27, from 17
    submitter-round sources), each within 25%. Nothing is fitted to them: HugeCTR's model properties and
    multi-node plans come from each run's own config (data/evidence/README.md)."""
    from distscope.validate.dlrm_rows import predict_file

    rows = [r for r in predict_file(ROOT / "data/evidence/dlrm_runs.csv", ROOT) if r.run_id.startswith("DLRMDCNV2-")]
    errors = [abs(r.error_pct) for r in rows]
    assert len(rows) >= 10
    assert sum(errors) / len(errors) <= 15.0, errors
    assert max(errors) <= 25.0, {r.run_id: round(r.error_pct, 1) for r in rows}


def test_interaction_kernels_are_priced_from_their_bytes() -> None:
    """The dense part is its GEMMs plus the interaction's memory-bound kernels. MLPerf DLRM (F = 27 vectors
    of d = 128, fp16): HugeCTR's fused dot kernel reads 27·128 elements and writes 128 + 351 + 1 forward, and
    reads those 480 and the 27·128 inputs, writing their gradients, backward. DCNv2 moves 4w per cross layer
    forward and 6w per layer + 3w backward (w = 27·128)."""
    v1 = load_dlrm(f"dlrm:{ROOT}/data/evidence/dlrm/mlperf_dlrm_v1.yaml")
    (fb, fk), (bb, bk) = interaction_passes(v1)
    assert (fb, fk, bb, bk) == ((3456 + 480) * 2, 1, (480 + 2 * 3456) * 2, 1)
    dcn = load_dlrm(f"dlrm:{ROOT}/data/evidence/dlrm/mlperf_dcnv2_hugectr.yaml")
    (fb, fk), (bb, bk) = interaction_passes(dcn)
    assert (fb, fk, bb, bk) == (4 * 3456 * 2 * 3, 3, (6 * 3 + 3) * 3456 * 2, 4)
    c = get_cluster("dgx-h100", 8)
    fwd, bwd = dense_s(v1, c, 6912)
    gemms = sum(gemm_s(c.device, v1.dense_dtype, 6912, o, i) for i, o in v1.dense_layers())
    assert fwd == pytest.approx(gemms + elementwise_s(c.device, 6912 * 7872, 1))
    assert bwd > 2 * gemms * 0.9  # data and weight gradients, plus the backward interaction


def test_a_rows_measured_kernels_replace_the_analytic_model() -> None:
    """dlrm_runs.csv's `kernels` column: the profile measured on that GPU model rides on the row's device;
    with measured_kernels off the row is priced on the analytic model, as `estimate` without --profile."""
    from distscope.validate.dlrm_rows import row_cluster

    row = {"cluster": "dgx-h100", "gpus": "8", "device": "", "kernels": "data/device/nvidia-h100-2026-11-26/kernels.json"}
    measured = row_cluster(row, ROOT)
    assert measured.device.kernels is not None and measured.device.kernels.has_gemm(DType.FP16)
    assert row_cluster(row, ROOT, measured_kernels=False).device.kernels is None
    with pytest.raises(DistscopeError, match=r"nope\.json"):
        row_cluster({**row, "kernels": "data/device/nope.json"}, ROOT)
    with pytest.raises(DistscopeError, match=r"H100 80GB HBM3.*applied to a a100"):  # another GPU's tables
        row_cluster({**row, "cluster": "dgx-a100"}, ROOT)


def test_the_dense_gradients_are_all_reduced_in_their_dtype() -> None:
    """HugeCTR under mixed precision all-reduces fp16 dense gradients (GroupedExchangeWgrad<__half>); DDP
    under autocast fp32, the default. A bad dtype is one line."""
    from distscope.model.embedding_cost import dense_grad_bytes

    raw = yaml.safe_load((ROOT / "data/evidence/dlrm/mlperf_dlrm_v1.yaml").read_text())
    half = parse_dlrm(raw, "v1")
    full = parse_dlrm({k: v for k, v in raw.items() if k != "dense_grad_dtype"}, "v1")
    assert half.dense_grad_dtype is DType.FP16 and full.dense_grad_dtype is DType.FP32
    c = get_cluster("dgx-a100", 16)
    t = dlrm_terms(half, c, place(half, c, uniform(half, c, ShardingType.TABLE_WISE), global_batch=65536),
                   global_batch=65536)
    assert dense_grad_bytes(half, t) == half.dense_params * 2 and dense_grad_bytes(full, t) == full.dense_params * 4
    with pytest.raises(DistscopeError, match="dense_grad_dtype=fp8"):
        parse_dlrm({**raw, "dense_grad_dtype": "fp8"}, "v1")
