"""Compression as a plan dimension: the estimator prices it, the planner ranks it with caveats."""

from __future__ import annotations

import dataclasses

import pytest

from distscope.compress.spec import CommClass, CompressionConfig, CompressionMethod, parse_compression_config
from distscope.model.estimate import estimate
from distscope.plan import Plan
from distscope.search.compression import CAVEATS, OPTIONS, best_compressed, caveats, config_label
from distscope.search.planner import search
from distscope.search.space import SearchSpace
from distscope.system.presets import get_cluster
from distscope.workload.catalog import get_model
from distscope.workload.training import TrainingShape

M = CompressionMethod
SPEC = get_model("gpt3-175b")
SHAPE = TrainingShape(seq_len=2048, global_batch=1536)
CLUSTER = get_cluster("dgx-a100", 1024)
BASE = Plan(dp=64, tp=4, pp=4, micro_batch=1, distributed_optimizer=True)


def _est(plan: Plan, **kw: float):  # type: ignore[no-untyped-def]
    return estimate(SPEC, SHAPE, CLUSTER, plan, **kw)


def test_none_config_changes_nothing() -> None:
    a = _est(BASE)
    b = _est(dataclasses.replace(BASE, compression=CompressionConfig()))
    assert a.step_time_s == b.step_time_s and a.comm_total_s == b.comm_total_s


@pytest.mark.parametrize("method", [M.BF16, M.INT8, M.INT4_HS])
def test_gradient_compression_cuts_dp_wire_time(method: CompressionMethod) -> None:
    fast = 1e6  # GB/s: codec time ~0, so only the wire bytes move
    a = _est(BASE)
    b = _est(dataclasses.replace(BASE, compression=CompressionConfig(dp_grad=method)), quant_GBps=fast)
    assert b.comm_total_s["dp"] < a.comm_total_s["dp"]
    assert b.step_time_s <= a.step_time_s


def test_fewer_bits_fewer_seconds_and_codec_costs_time() -> None:
    dp = {m: _est(dataclasses.replace(BASE, compression=CompressionConfig(dp_grad=m)), quant_GBps=1e6).comm_total_s["dp"]
          for m in (M.NONE, M.BF16, M.INT8, M.INT4_HS)}
    assert dp[M.NONE] > dp[M.BF16] > dp[M.INT8] > dp[M.INT4_HS]
    cfg = dataclasses.replace(BASE, compression=CompressionConfig(dp_grad=M.INT8))
    assert _est(cfg, quant_GBps=1.0).step_time_s > _est(cfg, quant_GBps=1e6).step_time_s  # slow codec shows


def test_weight_and_tp_compression() -> None:
    z3 = Plan(dp=128, tp=8, zero_stage=3, micro_batch=1)
    a = _est(z3)
    b = _est(dataclasses.replace(z3, compression=CompressionConfig(weights=M.QWD_INT4)), quant_GBps=1e6)
    assert b.comm_total_s["dp"] < a.comm_total_s["dp"]
    c = _est(dataclasses.replace(BASE, compression=CompressionConfig(tp=M.FP8)), quant_GBps=1e6)
    assert c.comm_total_s["tp"] < _est(BASE).comm_total_s["tp"]


def test_parse_alias_from_the_issue() -> None:
    cfg = parse_compression_config("dp-grad=int4-hs,weights=int4-diff,tp=fp8")
    assert (cfg.dp_grad, cfg.weights, cfg.tp) == (M.INT4_HS, M.QWD_INT4, M.FP8)
    assert config_label(cfg) == "dp-grad=int4-hs,weights=qwd-int4,tp=fp8"


def test_every_option_has_a_caveat() -> None:
    for cls, methods in OPTIONS.items():
        for m in methods:
            if m is not M.NONE:
                assert (cls, m) in CAVEATS
    assert len(caveats(CompressionConfig(dp_grad=M.INT4_HS, tp=M.FP8))) == 2
    assert CommClass.WEIGHTS in OPTIONS


def test_planner_lists_best_with_and_without_compression() -> None:
    space = SearchSpace(tp=(4, 8), pp=(2, 4, 8), cp=(1,), max_vp=2, max_micro_batch=2)
    res = search(SPEC, SHAPE, CLUSTER, space)
    cr = best_compressed(SPEC, SHAPE, CLUSTER, res.pool, res.comm_pool)
    assert cr is not None and res.best is not None
    assert cr.uncompressed.step_time_s == res.best.step_time_s
    assert cr.compressed.plan.compressed and cr.compressed.estimate.feasible
    assert cr.speedup == pytest.approx(cr.uncompressed.step_time_s / cr.compressed.step_time_s)
    times = [c.step_time_s for c in cr.ranked]
    assert times == sorted(times)
    # with a free codec, compressing every class cannot be slower than the uncompressed winner
    free = best_compressed(SPEC, SHAPE, CLUSTER, res.pool, res.comm_pool, quant_GBps=1e9)
    assert free is not None and free.speedup >= 1.0
