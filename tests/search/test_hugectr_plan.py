"""HugeCTR's hier_auto sharding (search/hugectr_plan.py) and the table-row-wise sharding over several nodes
that it produces (model/embedding_cost.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from distscope.errors import DistscopeError
from distscope.model.dlrm_cli import shardings_for
from distscope.model.embedding_cost import Shard, ShardingType, TableSharding, dlrm_terms, estimate_dlrm
from distscope.search.hugectr_plan import HierAutoConfig, plan_hier_auto
from distscope.search.sharding_file import parse_sharding
from distscope.system.presets import get_cluster
from distscope.workload.embedding import EmbeddingTable, load_dlrm
from tests.cli_run import run_cli

ROOT = Path(__file__).resolve().parents[2]
MODEL = f"dlrm:{ROOT}/data/evidence/dlrm/mlperf_dcnv2_hugectr.yaml"
REFERENCE = json.loads((ROOT / "data/evidence/dlrm/hier_auto_reference.json").read_text())


@pytest.mark.parametrize("case", REFERENCE["cases"],
                         ids=[f"{c['nodes']}n-r{c['mem_comm_bw_ratio']:g}-dp{c['dp_sharding_threshold']:g}"
                              for c in REFERENCE["cases"]])
def test_same_tables_per_node_as_nvidias_planner(case: dict) -> None:
    spec = load_dlrm(MODEL)
    cluster = get_cluster("dgx-h100", 8 * case["nodes"])
    config = HierAutoConfig(mem_comm_bw_ratio=case["mem_comm_bw_ratio"],
                            dp_sharding_threshold=case["dp_sharding_threshold"])
    shardings = plan_hier_auto(spec, cluster, config)
    held: list[set[int]] = [set() for _ in range(case["nodes"])]
    for i, ts in enumerate(shardings):
        for s in ts.shards:
            held[s.rank // 8].add(i)
    assert [sorted(h) for h in held] == case["buckets"]


def test_plan_is_valid_and_spreads_the_hot_table() -> None:
    spec = load_dlrm(MODEL)
    cluster = get_cluster("dgx-h100", 64)
    shardings, source = shardings_for(spec, cluster, "hugectr:hier_auto:mem_comm_bw_ratio=67:"
                                      "dp_sharding_threshold=0.0125", 135168)
    assert "hier_auto" in source
    # a sharding file of the same plan passes the file's own checks
    raw = {"tables": [ts.to_dict() for ts in shardings]}
    assert parse_sharding(raw, spec, cluster, "test") == shardings
    by_name = {ts.table.name: ts for ts in shardings}
    hot = by_name["cat_20"]  # pooling 100 of 214 ids per sample
    assert hot.kind is ShardingType.TABLE_ROW_WISE and len({s.rank // 8 for s in hot.shards}) >= 2
    small = [ts for ts in shardings if ts.table.rows * 128 * 8 < 0.0125e9]
    assert small and all(ts.kind is ShardingType.DATA_PARALLEL for ts in small)
    assert estimate_dlrm(spec, cluster, shardings, global_batch=135168).feasible


@pytest.mark.parametrize("k", [1, 2, 4])
def test_table_row_wise_over_k_nodes_conserves_bytes(k: int) -> None:
    """Every id a rank sends is received, every partial row sent across nodes is received (k holding
    nodes each send their partials), and the lookups split over the k·L holding ranks."""
    spec = load_dlrm(MODEL)
    cluster = get_cluster("dgx-h100", 64)
    table = EmbeddingTable("t", 1_000_000, 128, 3.0)
    ranks = [h * 8 + j for h in range(1, 1 + k) for j in range(8)]
    ts = TableSharding(table, ShardingType.TABLE_ROW_WISE, tuple(Shard(r, 1_000_000 // len(ranks), 128) for r in ranks))
    t = dlrm_terms(spec, cluster, (ts,), global_batch=65536)
    assert np.isclose(t.ids_sent.sum(), t.ids_recv.sum())
    assert np.isclose(t.x_sent.sum(), t.x_recv.sum())
    assert np.isclose(t.x_sent.sum(), k * 65536 * 128 * 2 * 7 / 8)  # fp16 pooled rows, 7 of 8 nodes remote
    assert np.count_nonzero(t.fwd) == 8 * k and np.count_nonzero(t.node_rs) == 8 * k


@pytest.mark.parametrize(("sharding", "gpus", "names"), [
    ("hugectr:hier_auto:mem_comm_bw_ratio=x", 64, "mem_comm_bw_ratio='x'"),
    ("hugectr:hier_auto:mem_comm_ratio=6", 64, "'mem_comm_ratio' is not a hier_auto argument"),
    ("hugectr:hier_auto:dp_sharding_threshold=-1", 64, "dp_sharding_threshold=-1"),
    ("hugectr:hier_auto:mem_comm_work_ratio=0", 64, "mem_comm_work_ratio=0 must be positive"),
    ("hugectr:auto", 64, "is not hugectr:hier_auto"),
    ("hugectr:hier_auto", 8, "needs more than one node"),
    ("hugectr:hier_auto:memory_cap_for_embedding=1", 16, "memory_cap_for_embedding"),
])
def test_bad_hier_auto_gets_one_line(sharding: str, gpus: int, names: str) -> None:
    spec = load_dlrm(MODEL)
    with pytest.raises(DistscopeError) as e:
        shardings_for(spec, get_cluster("dgx-h100", gpus), sharding, 8192 * gpus)
    assert names in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_estimate_takes_the_hier_auto_sharding(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run_cli(capsys, "estimate", "--model", MODEL, "--cluster", "dgx-h100", "--gpus", "64",
                        "--global-batch", "135168", "--sharding", "hugectr:hier_auto:mem_comm_bw_ratio=67")
    assert code == 0 and "hier_auto" in out, out
