"""`trace generate --model dlrm:...`: one Chakra trace per rank of a recommendation model's step under its
embedding sharding, which `simulate` prices as `estimate` does (trace/from_dlrm.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.cli_run import run_subprocess

pytest.importorskip("chakra")

MODEL = ["--model", "dlrm:examples/dlrm/tables.yaml", "--global-batch", "65536"]


def _both(tmp_path: Path, cluster: str, gpus: int, extra: list[str], model: list[str] = MODEL
          ) -> tuple[float, float, dict]:
    flags = [*model, "--cluster", cluster, "--gpus", str(gpus), *extra]
    gen = json.loads(run_subprocess("trace", "generate", *flags, "--out", str(tmp_path), "--json").stdout)
    assert gen["files"] == gpus and not gen["symmetric"]
    sim = json.loads(run_subprocess("simulate", str(tmp_path), "--cluster", cluster, "--gpus", str(gpus), "--json").stdout)
    est = json.loads(run_subprocess("estimate", *flags, "--json").stdout)
    return sim["step_time_s"], est["step_time_s"], est["breakdown_s"]


@pytest.mark.parametrize(("cluster", "gpus", "extra"), [
    ("dgx-a100", 8, []),  # the planner's sharding, one node
    ("dgx-a100", 8, ["--sharding", "table-wise", "--compress", "emb=sz3:0.01"]),  # codec around the all-to-alls
    ("dgx-h100", 16, ["--sharding", "row-wise"]),  # reduce-scatter / all-gather over all ranks
    ("dgx-h100", 16, ["--sharding", "table-row-wise"]),  # in-node reduce-scatter + cross-node all-to-all
])
def test_simulate_of_the_traces_equals_the_estimate(tmp_path: Path, cluster: str, gpus: int, extra: list[str]) -> None:
    sim, est, breakdown = _both(tmp_path, cluster, gpus, extra)
    assert sim == pytest.approx(est, rel=0.002)
    assert breakdown["lookup_fwd"] > 0 and breakdown["dense_bwd"] > 0


def test_a_table_over_two_nodes_simulates_as_estimated(tmp_path: Path) -> None:
    """Table-row-wise over both nodes (as HugeCTR's hier_auto plan spreads a hot table): each node reduces
    its partial rows and sends them across nodes, where they are summed; written as a sharding file."""
    from distscope.model.embedding_cost import ShardingType
    from distscope.search.embedding_plan import node_rows, place, uniform
    from distscope.search.sharding_file import write_sharding
    from distscope.system.presets import get_cluster
    from distscope.workload.embedding import load_dlrm

    spec, cluster = load_dlrm(MODEL[1]), get_cluster("dgx-h100", 16)
    shardings = place(spec, cluster, uniform(spec, cluster, ShardingType.TABLE_ROW_WISE), global_batch=65536)
    path = tmp_path / "sharding.yaml"
    write_sharding(str(path), (node_rows(shardings[0].table, (0, 1), 8), *shardings[1:]))
    sim, est, _ = _both(tmp_path / "traces", "dgx-h100", 16, ["--sharding", str(path)])
    assert sim == pytest.approx(est, rel=0.002)


def test_hugectrs_hybrid_embedding_simulates_as_estimated(tmp_path: Path) -> None:
    """HugeCTR's hybrid embedding (model/hybrid_embedding.py): the infrequent rows cross each node's GPUs
    and then the nodes, the frequent rows' gradients ride in the all-reduce."""
    model = ["--model", "dlrm:data/evidence/dlrm/mlperf_dlrm_v1.yaml", "--global-batch", "71680"]
    sim, est, breakdown = _both(tmp_path, "dgx-a100", 16, ["--sharding", "hugectr:hybrid:frequent=60000:infrequent=4480"],
                                model)
    assert sim == pytest.approx(est, rel=0.002)
    assert breakdown["embedding_a2a"] > 0 and breakdown["row_wise_rs_ag"] == 0


def test_the_all_reduce_shares_the_links_with_the_backward_exchange(tmp_path: Path) -> None:
    """On 4 nodes the dense gradients' all-reduce runs beside the gradient all-to-all and the row-wise
    all-gathers: the simulator shares the links between them, the estimate hides it for free. The sharing
    may cost the simulated step up to 10% (+8.5% when this test was written, 8e0f6bf). After later
    changes (not traced) the all-reduce ends inside the exchange's slack and the two agree to 1e-7: on
    2026-11-28 the simulated step came out 3e-8 below the estimate, which an exact `est <= sim` failed."""
    sim, est, _ = _both(tmp_path, "dgx-a100", 32, [])
    assert est * (1 - 1e-6) <= sim <= 1.10 * est


@pytest.mark.parametrize(("extra", "match"), [
    (["--symmetric"], "--symmetric: a recommendation model's ranks hold different tables"),
    (["--steps", "2"], "--steps=2: a recommendation model's ranks"),
    (["--sharding", "row-wize"], "--sharding"),
])
def test_bad_flags_are_one_line(tmp_path: Path, extra: list[str], match: str) -> None:
    proc = run_subprocess("trace", "generate", *MODEL, "--cluster", "dgx-a100", "--gpus", "8", *extra, "--out", str(tmp_path),
               ok=False)
    assert match in proc.stderr and "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1
