"""The estimator: every catalog model on every preset, and physical sanity of its answers."""

import dataclasses

import pytest

from distscope.dtypes import Precision
from distscope.model import estimate
from distscope.model.memory import activation_bytes_per_layer
from distscope.model.routing import routed_load
from distscope.plan import AttentionImpl, Dim, Plan, Recompute, Schedule
from distscope.system import cluster_names, get_cluster
from distscope.workload import TrainingShape, get_model, model_names
from distscope.workload.spec import FfnKind, ModelSpec, NormKind, PositionKind

SHAPE = TrainingShape(seq_len=4096, global_batch=256)


def _plan(**kw) -> Plan:
    base = dict(dp=64, zero_stage=1)
    base.update(kw)
    return Plan(**base)


@pytest.mark.parametrize("preset", cluster_names())
@pytest.mark.parametrize("name", model_names())
def test_every_model_on_every_preset(name: str, preset: str) -> None:
    spec = get_model(name)
    cluster = get_cluster(preset, 64)
    prec = Precision.BF16
    plan = _plan(precision=prec)
    plan.check(layers=spec.layers, heads=spec.heads, kv_heads=spec.kv_heads,
               experts=spec.moe.experts if spec.moe else 0, seq_len=4096, global_batch=256, num_gpus=64)
    est = estimate(spec, SHAPE, cluster, plan)
    d = est.to_dict()
    for key in ("step_time_s", "tokens_per_s", "mfu", "memory_per_gpu_bytes", "breakdown_s"):
        assert key in d
    assert est.step_time_s > 0 and 0 < est.mfu < 1
    assert sum(est.breakdown_s.values()) == pytest.approx(est.step_time_s, rel=1e-9)
    assert est.breakdown_s["bubble"] >= -1e-9


def test_mfu_matches_definition() -> None:
    spec, c = get_model("llama3-70b"), get_cluster("dgx-h100", 64)
    plan = Plan(dp=2, tp=4, pp=4, vp=5, cp=2, schedule=Schedule.INTERLEAVED, zero_stage=1, sequence_parallel=True)
    shape = TrainingShape(seq_len=8192, global_batch=128)
    est = estimate(spec, shape, c, plan)
    # 6·N·tokens is the usual estimate of training FLOPs; attention and the head add ~10-20% at 8k
    six_n = 6 * 70.55e9 * shape.tokens
    assert 1.0 < est.model_flops / six_n < 1.35
    assert est.mfu == pytest.approx(est.model_flops / (est.step_time_s * 64 * 989.4e12), rel=1e-9)


def test_more_gpus_is_faster_and_zero_saves_memory() -> None:
    spec = get_model("gpt3-175b")
    shape = TrainingShape(seq_len=2048, global_batch=1536)
    slow = estimate(spec, shape, get_cluster("dgx-a100", 512), Plan(dp=4, tp=8, pp=16, zero_stage=1))
    fast = estimate(spec, shape, get_cluster("dgx-a100", 1024), Plan(dp=8, tp=8, pp=16, zero_stage=1))
    assert fast.step_time_s < slow.step_time_s
    mems = [estimate(spec, shape, get_cluster("dgx-a100", 1024), Plan(dp=8, tp=8, pp=16, zero_stage=z)).memory
            for z in (0, 1, 2, 3)]
    totals = [m.total_bytes for m in mems]
    assert totals == sorted(totals, reverse=True) and totals[0] > totals[3]


def test_recompute_trades_time_for_memory() -> None:
    spec, c = get_model("gpt3-175b"), get_cluster("dgx-a100", 64)
    shape = TrainingShape(seq_len=2048, global_batch=64)
    base = Plan(dp=1, tp=8, pp=8, attention=AttentionImpl.UNFUSED, precision=Precision.FP16)
    res = {rc: estimate(spec, shape, c, dataclasses.replace(base, recompute=rc)) for rc in Recompute}
    assert res[Recompute.FULL].step_time_s > res[Recompute.SELECTIVE].step_time_s > res[Recompute.NONE].step_time_s
    mem = {rc: r.memory.activations_bytes for rc, r in res.items()}
    assert mem[Recompute.FULL] < mem[Recompute.SELECTIVE] < mem[Recompute.NONE]
    assert res[Recompute.FULL].hfu > res[Recompute.FULL].mfu


def test_korthikanti_activation_formula() -> None:
    # Korthikanti et al. 2022, Table 2: sbh(10 + 24/t + 5as/(ht)) bytes per layer without SP, and
    # sbh/t (34 + 5as/h) with SP, for fp16, MHA, f = 4h, GELU with dropout
    s, b, h, a, t = 2048, 1, 12288, 96, 8
    spec = ModelSpec(name="g", layers=96, hidden=h, heads=a, kv_heads=a, ffn_hidden=4 * h, vocab=51200,
                     ffn=FfnKind.GELU, position=PositionKind.LEARNED, norm=NormKind.LAYERNORM, bias=True,
                     tied_embeddings=True, max_positions=s)
    plan = Plan(dp=1, tp=t, attention=AttentionImpl.UNFUSED, precision=Precision.FP16)
    no_sp = activation_bytes_per_layer(spec, False, b, s, plan)
    assert no_sp == pytest.approx(s * b * h * (10 + 24 / t + 5 * a * s / (h * t)))
    with_sp = activation_bytes_per_layer(spec, False, b, s, dataclasses.replace(plan, sequence_parallel=True))
    assert with_sp == pytest.approx(s * b * h / t * (34 + 5 * a * s / h))
    sel = activation_bytes_per_layer(spec, False, b, s, dataclasses.replace(
        plan, sequence_parallel=True, recompute=Recompute.SELECTIVE))
    assert sel == pytest.approx(s * b * h / t * 34)


def test_moe_experts_keep_only_the_tokens_dispatched_to_them() -> None:
    """With sequence parallelism a rank dispatches its T/tp tokens, so with etp < tp its experts hold
    T·k·etp/tp permuted tokens of width f_e/etp: going from etp = tp = 4 to etp = 1 keeps the
    activation and its product with the expert width, and drops 3/4 of the saved expert inputs."""
    spec = get_model("mixtral-8x7b")
    b, s = 1, 4096
    plan = Plan(dp=8, tp=4, ep=8, sequence_parallel=True, etp=4)
    wide = activation_bytes_per_layer(spec, True, b, s, plan)
    narrow = activation_bytes_per_layer(spec, True, b, s, dataclasses.replace(plan, etp=1))
    k, h, gi = spec.moe.top_k, spec.hidden, plan.precision.gemm_dtype.bytes  # type: ignore[union-attr]
    load = routed_load(spec, plan, b * s)  # the busiest EP rank's share (model/routing.py)
    assert wide - narrow == pytest.approx(0.75 * b * s * k * h * gi * load)


def test_overlap_hides_communication() -> None:
    spec, c = get_model("llama3-70b"), get_cluster("dgx-h100", 64)
    shape = TrainingShape(seq_len=8192, global_batch=128)
    p = Plan(dp=4, tp=8, pp=2, zero_stage=1, sequence_parallel=True, distributed_optimizer=True)
    none = estimate(spec, shape, c, p)
    full = estimate(spec, shape, c, dataclasses.replace(p, overlap=frozenset({Dim.DP, Dim.TP, Dim.PP})))
    assert full.step_time_s < none.step_time_s
    assert full.breakdown_s["tp"] < none.breakdown_s["tp"]
    assert full.comm_total_s["tp"] == pytest.approx(none.comm_total_s["tp"])


def test_infeasible_names_biggest_term() -> None:
    spec, c = get_model("llama3.1-405b"), get_cluster("dgx-h100", 8)
    est = estimate(spec, TrainingShape(seq_len=8192, global_batch=8), c, Plan(dp=8))
    assert not est.feasible
    assert "biggest term: optimizer" in est.infeasible_reason


def test_moe_and_mla_models_use_expert_parallelism() -> None:
    spec = get_model("deepseek-v3")
    shape = TrainingShape(seq_len=4096, global_batch=1024)
    c = get_cluster("dgx-h100", 1024)
    p = Plan(dp=64, tp=2, pp=8, ep=64, zero_stage=1, distributed_optimizer=True, sequence_parallel=True,
             stage_layers=(7, 8, 8, 8, 8, 8, 7, 7))
    p.check(layers=61, heads=128, kv_heads=128, experts=256, seq_len=4096, global_batch=1024, num_gpus=1024)
    est = estimate(spec, shape, c, p)
    assert est.comm_total_s["ep"] > 0
    no_ep = estimate(spec, shape, c, dataclasses.replace(p, ep=1))
    assert est.memory.weights_bytes < no_ep.memory.weights_bytes
