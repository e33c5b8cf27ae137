"""Routing imbalance (model/routing.py): the busiest expert-parallel rank's load against a Monte Carlo
of top-k routing, the capacity cap, its effect on the estimate and the simulator, and the
`moe_balance` plan field, flag and CSV column."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest

from distscope.errors import DistscopeError
from distscope.model import efficiency as eff
from distscope.model import estimate
from distscope.model.routing import busiest_rank_load, expert_load_cv, normal_max_mean, routed_load
from distscope.plan import MoeBalance, Plan
from distscope.search.emit import megatron_args
from distscope.search.megatron_check import check as check_megatron
from distscope.sim.api import simulate_traces
from distscope.sim.cluster_network import ClusterNetwork
from distscope.system import get_cluster
from distscope.trace.builder import build_traces
from distscope.trace.from_plan import step_spec
from distscope.validate.calibration import calibrated
from distscope.validate.rows import parse_row, read_rows
from distscope.workload import TrainingShape, get_model


def test_expected_maximum_of_normals_matches_closed_forms() -> None:
    assert normal_max_mean(1) == 0.0
    assert normal_max_mean(2) == pytest.approx(1 / math.sqrt(math.pi), rel=1e-6)
    assert normal_max_mean(3) == pytest.approx(1.5 / math.sqrt(math.pi), rel=1e-6)
    assert normal_max_mean(8) == pytest.approx(1.42360, abs=1e-4)  # tabulated (Harter 1961)


def _monte_carlo(experts: int, top_k: int, ep: int, tokens: int, cv: float, trials: int, seed: int) -> float:
    """Mean over trials of max rank load / mean rank load: each trial draws expert popularities with
    relative spread `cv` (zero-sum, shuffled over the ranks) and routes `tokens` tokens to top_k distinct
    experts with those probabilities (Gumbel top-k sampling without replacement)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(trials):
        d = rng.normal(0.0, cv, experts)
        d -= d.mean()
        p = np.clip(1.0 + d, 1e-6, None)
        if cv == 0:
            counts = np.zeros(experts)
            picks = np.argsort(rng.random((tokens, experts)), axis=1)[:, :top_k]
            counts += np.bincount(picks.ravel(), minlength=experts)
        else:  # popularity p_i: keys log p + Gumbel give weighted sampling without replacement
            keys = np.log(p) + rng.gumbel(size=(tokens, experts))
            picks = np.argpartition(-keys, top_k - 1, axis=1)[:, :top_k]
            counts = np.bincount(picks.ravel(), minlength=experts).astype(float)
        ranks = counts.reshape(ep, experts // ep).sum(axis=1)
        out.append(ranks.max() / ranks.mean())
    return float(np.mean(out))


@pytest.mark.parametrize(("experts", "top_k", "ep", "tokens"), [(8, 2, 8, 2048), (16, 1, 4, 1024), (64, 6, 8, 512)])
def test_forced_balance_is_the_sampling_noise_of_uniform_routing(experts, top_k, ep, tokens) -> None:
    sim = _monte_carlo(experts, top_k, ep, tokens, 0.0, 300, seed=1)
    model = busiest_rank_load(experts, top_k, ep, tokens, MoeBalance.FORCED)
    assert model > 1.0
    assert model - 1 == pytest.approx(sim - 1, rel=0.15)


def test_a_skewed_router_is_priced_by_its_spread() -> None:
    # a popularity spread c: the rank excess grows like c / sqrt(experts per rank)
    experts, top_k, ep, tokens, cv = 64, 4, 8, 4096, 0.3
    sim = _monte_carlo(experts, top_k, ep, tokens, cv, 200, seed=2)
    from distscope.model import routing
    vio = cv * normal_max_mean(experts) / math.sqrt(1 - 1 / experts)  # the MaxVio this spread shows
    assert expert_load_cv(vio, experts) == pytest.approx(cv, rel=1e-9)
    old = routing.MAX_VIO.get(MoeBalance.AUX_LOSS)
    routing.MAX_VIO[MoeBalance.AUX_LOSS] = (vio, experts)
    routing.busiest_rank_load.cache_clear()
    try:
        model = busiest_rank_load(experts, top_k, ep, tokens, MoeBalance.AUX_LOSS)
    finally:
        if old is not None:
            routing.MAX_VIO[MoeBalance.AUX_LOSS] = old
        routing.busiest_rank_load.cache_clear()
    assert model - 1 == pytest.approx(sim - 1, rel=0.2)


def test_no_expert_parallelism_has_no_imbalance_and_more_tokens_have_less() -> None:
    assert busiest_rank_load(64, 8, 1, 4096, MoeBalance.AUX_LOSS) == 1.0
    few = busiest_rank_load(64, 8, 8, 1024, MoeBalance.FORCED)
    many = busiest_rank_load(64, 8, 8, 65536, MoeBalance.FORCED)
    assert 1.0 < many < few
    # a policy with skew never beats forced balance, and an auxiliary loss is the most skewed
    loads = [busiest_rank_load(64, 8, 8, 4096, b) for b in (MoeBalance.FORCED, MoeBalance.AUX_FREE, MoeBalance.AUX_LOSS)]
    assert loads == sorted(loads) and loads[0] < loads[-1]


SHAPE = TrainingShape(seq_len=4096, global_batch=64)
EVIDENCE = Path(__file__).resolve().parents[2] / "data" / "evidence" / "training_runs.csv"


def _mixtral(**kw):  # type: ignore[no-untyped-def]
    spec = get_model("mixtral-8x7b")
    plan = Plan(dp=8, ep=8, micro_batch=1, zero_stage=1, distributed_optimizer=True, **kw)
    plan.check(layers=spec.layers, heads=spec.heads, kv_heads=spec.kv_heads, experts=spec.moe.experts,
               seq_len=SHAPE.seq_len, global_batch=SHAPE.global_batch, num_gpus=8)
    return spec, plan


def test_capacity_factor_caps_the_busiest_rank() -> None:
    spec, plan = _mixtral(moe_balance=MoeBalance.AUX_LOSS)
    free = routed_load(spec, plan, 4096)
    assert free > 1.0
    assert routed_load(spec, dataclasses.replace(plan, capacity_factor=1.0), 4096) == 1.0
    assert routed_load(spec, dataclasses.replace(plan, capacity_factor=0.5), 4096) == 0.5
    assert routed_load(spec, dataclasses.replace(plan, capacity_factor=10.0), 4096) == free


def test_imbalance_slows_the_estimate_and_the_busiest_rank_holds_more() -> None:
    c = get_cluster("dgx-h100", 8)
    spec, forced = _mixtral(moe_balance=MoeBalance.FORCED)
    _, skewed = _mixtral(moe_balance=MoeBalance.AUX_LOSS)
    a, b = estimate(spec, SHAPE, c, forced), estimate(spec, SHAPE, c, skewed)
    assert b.step_time_s > a.step_time_s
    assert b.comm_total_s["ep"] > a.comm_total_s["ep"]
    assert b.memory.total_bytes > a.memory.total_bytes
    assert Plan(dp=8).balance is MoeBalance.AUX_FREE  # the default: loss-free balancing


def test_moe_balance_needs_a_moe_model() -> None:
    spec = get_model("llama3-8b")
    with pytest.raises(DistscopeError, match="moe_balance needs a MoE model"):
        Plan(dp=8, moe_balance=MoeBalance.FORCED).check(
            layers=spec.layers, heads=spec.heads, kv_heads=spec.kv_heads, experts=0, seq_len=4096,
            global_batch=64, num_gpus=8)


def test_simulator_agrees_with_the_estimate_under_imbalance() -> None:
    c = get_cluster("dgx-h100", 8)
    spec, plan = _mixtral(moe_balance=MoeBalance.AUX_LOSS)
    with calibrated({**eff.CALIBRATION, "overlap_cost": 0.0}):
        est = estimate(spec, SHAPE, c, plan)
        ss = step_spec(spec, SHAPE, c, plan)
    sim = simulate_traces(build_traces(ss, symmetric=True), ClusterNetwork(c))
    assert sim.step_time_s == pytest.approx(est.step_time_s, rel=0.04)
    with calibrated({**eff.CALIBRATION, "overlap_cost": 0.0}):  # and the imbalance is in the trace's bytes
        forced = step_spec(spec, SHAPE, c, dataclasses.replace(plan, moe_balance=MoeBalance.FORCED))
    assert simulate_traces(build_traces(forced, symmetric=True), ClusterNetwork(c)).step_time_s < sim.step_time_s


def test_csv_column_is_read_and_bad_cells_are_one_line() -> None:
    rows = {raw["run_id"]: (line, raw) for line, raw in read_rows(EVIDENCE)}
    line, raw = rows["E10-B200-Qwen3-30B-8GPU-LBS8-bf16"]
    assert parse_row(raw, line).moe_balance is MoeBalance.FORCED
    assert parse_row({**raw, "moe_balance": ""}, line).moe_balance is None
    with pytest.raises(DistscopeError, match=r"moe_balance.*forced, aux-free, aux-loss") as exc:
        parse_row({**raw, "moe_balance": "sinkhorn"}, line)
    assert "\n" not in str(exc.value)
    line, dense = rows["E1-T1-8B-FSDP8-bf16"]
    with pytest.raises(DistscopeError, match=r"moe_balance.*needs a MoE model"):
        parse_row({**dense, "moe_balance": "forced"}, line)


@pytest.mark.parametrize("balance", list(MoeBalance))
def test_megatron_arguments_pass_the_pinned_parser(balance: MoeBalance) -> None:
    spec, plan = _mixtral(moe_balance=balance)
    args = megatron_args(plan, spec, SHAPE)
    assert check_megatron(args, {}, True) == []
    assert ("--moe-router-force-load-balancing" in args) is (balance is MoeBalance.FORCED)
    spec, plan = _mixtral()
    assert not any(a.startswith("--moe-router") for a in megatron_args(plan, spec, SHAPE))  # the run's own
