"""The node-forwarded MoE dispatcher (plan.MoeDispatcher.DEEPEP, model/moe.py): its routing
probability against exhaustive enumeration, what it changes in the estimate (nothing inside a node,
less cross-node traffic across nodes), the trace's split groups, the simulator agreeing with the
estimator, the CSV column and the emitted Megatron-LM arguments."""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path

import pytest

from distscope.comm.group import group_net
from distscope.errors import DistscopeError
from distscope.model import efficiency as eff
from distscope.model import estimate
from distscope.model.moe import deepep_bytes, ep_ranks_per_node, node_forwarded, node_hit_probability
from distscope.model.routing import routed_load
from distscope.plan import MoeDispatcher, Plan, Recompute
from distscope.search.emit import megatron_args
from distscope.search.megatron_check import check as check_megatron
from distscope.sim.api import simulate_traces
from distscope.sim.cluster_network import ClusterNetwork
from distscope.system import get_cluster
from distscope.trace.builder import Group, build_traces
from distscope.trace.from_plan import step_spec
from distscope.validate.calibration import calibrated
from distscope.validate.rows import parse_row, read_rows
from distscope.workload import TrainingShape, get_model

SHAPE = TrainingShape(seq_len=4096, global_batch=64)
EVIDENCE = Path(__file__).resolve().parents[2] / "data" / "evidence" / "training_runs.csv"


@pytest.mark.parametrize(("experts", "top_k", "nodes"), [(8, 2, 2), (16, 4, 4), (12, 3, 3), (8, 1, 4)])
def test_node_hit_probability_is_the_share_of_top_k_sets_touching_a_node(experts, top_k, nodes) -> None:
    per = experts // nodes
    sets = list(itertools.combinations(range(experts), top_k))
    hit = sum(any(e < per for e in s) for s in sets) / len(sets)  # node 0 holds experts 0..per-1
    assert node_hit_probability(experts, top_k, nodes) == pytest.approx(hit, rel=1e-12)
    assert node_hit_probability(experts, top_k, 1) == 1.0


def _deepseek(gpus: int, **kw):  # type: ignore[no-untyped-def]
    spec = get_model("deepseek-v3")
    pp = 4
    plan = Plan(dp=gpus // pp, pp=pp, micro_batch=1, zero_stage=1, distributed_optimizer=True,
                recompute=Recompute.FULL, stage_layers=(15, 16, 15, 15), **kw)
    plan.check(layers=spec.layers, heads=spec.heads, kv_heads=spec.kv_heads, experts=spec.moe.experts,
               seq_len=SHAPE.seq_len, global_batch=SHAPE.global_batch, num_gpus=gpus)
    return plan, spec


def test_inside_one_node_the_dispatchers_are_the_same() -> None:
    plan, spec = _deepseek(64, ep=8)
    c = get_cluster("dgx-h100", 64)
    deep = dataclasses.replace(plan, moe_dispatcher=MoeDispatcher.DEEPEP)
    assert not node_forwarded(c, deep)
    assert estimate(spec, SHAPE, c, deep).step_time_s == estimate(spec, SHAPE, c, plan).step_time_s


def test_across_nodes_each_token_crosses_once_per_node_it_needs() -> None:
    plan, spec = _deepseek(64, ep=16, moe_dispatcher=MoeDispatcher.DEEPEP)
    c = get_cluster("dgx-h100", 64)
    assert node_forwarded(c, plan) and ep_ranks_per_node(c, plan) == 8
    e, T = 2, 4096
    cross, intra = deepep_bytes(spec, plan, T, e, 2)
    token = T * spec.hidden * e * routed_load(spec, plan, T)  # the busiest rank's share (model/routing.py)
    k = spec.moe.top_k
    assert intra == pytest.approx(token * k)
    # half of the 2 nodes' buffer leaves the node: P_hit copies per token, against k/2 from a direct all-to-all
    assert cross / 2 == pytest.approx(token * node_hit_probability(256, k, 2))
    assert cross / 2 < token * k / 2
    direct = estimate(spec, SHAPE, c, dataclasses.replace(plan, moe_dispatcher=MoeDispatcher.ALLTOALL))
    deep = estimate(spec, SHAPE, c, plan)
    assert deep.comm_total_s["ep"] < direct.comm_total_s["ep"]
    assert deep.breakdown_s["compute"] == pytest.approx(direct.breakdown_s["compute"])


def test_trace_splits_the_group_and_the_simulator_agrees() -> None:
    plan, spec = _deepseek(64, ep=16, moe_dispatcher=MoeDispatcher.DEEPEP)
    c = get_cluster("dgx-h100", 64)
    with calibrated({**eff.CALIBRATION, "overlap_cost": 0.0}):
        est = estimate(spec, SHAPE, c, plan)
        ss = step_spec(spec, SHAPE, c, plan)
    assert ss.ep_node == 8
    traces = build_traces(ss, symmetric=True)
    groups = traces.process_groups
    epx = [m for pg, m in groups.items() if pg.startswith(Group.EPX.value + ":")]
    epl = [m for pg, m in groups.items() if pg.startswith(Group.EPL.value + ":")]
    assert epx and epl, sorted(groups)
    assert all(len(m) == 2 and m[1] - m[0] == 8 for m in epx)  # the same local index on the two nodes
    assert all(len(m) == 8 and m[0] // 8 == m[-1] // 8 for m in epl)  # one node
    sim = simulate_traces(traces, ClusterNetwork(c))
    assert sim.step_time_s == pytest.approx(est.step_time_s, rel=0.04)


def test_csv_column_is_read_and_bad_cells_are_one_line() -> None:
    rows = {raw["run_id"]: (line, raw) for line, raw in read_rows(EVIDENCE)}
    line, raw = rows["E8-Qwen3-235B-TP2-EP32-PP8-bf16"]
    assert parse_row(raw, line).moe_dispatcher is MoeDispatcher.DEEPEP
    with pytest.raises(DistscopeError, match=r"moe_dispatcher.*alltoall, deepep") as exc:
        parse_row({**raw, "moe_dispatcher": "nvshmem"}, line)
    assert "\n" not in str(exc.value)
    line, dense = rows["E1-T1-8B-FSDP8-bf16"]
    with pytest.raises(DistscopeError, match=r"moe_dispatcher.*needs a MoE model"):
        parse_row({**dense, "moe_dispatcher": "deepep"}, line)


def test_megatron_arguments_pass_the_pinned_parser() -> None:
    plan, spec = _deepseek(64, ep=16, moe_dispatcher=MoeDispatcher.DEEPEP)
    args = megatron_args(plan, spec, SHAPE)
    assert args[args.index("--moe-token-dispatcher-type") + 1] == "flex"
    assert args[args.index("--moe-flex-dispatcher-backend") + 1] == "deepep"
    assert check_megatron(args, {}, True) == []
    with pytest.raises(DistscopeError, match="moe_dispatcher=deepep needs a MoE model"):
        Plan(dp=8, moe_dispatcher=MoeDispatcher.DEEPEP).check(
            layers=32, heads=32, kv_heads=8, experts=0, seq_len=4096, global_batch=8, num_gpus=8)
    assert group_net(get_cluster("dgx-h100", 64), 2, 8).fanout[1] == 2  # EPX crosses the node boundary
