"""Plan validation: every error names the problem and prints all the degrees."""

import pytest

from distscope.errors import DistscopeError
from distscope.plan import Plan, Recompute, Schedule, derive_dp


def _check(plan: Plan, **kw):
    args = dict(layers=80, heads=64, kv_heads=8, experts=0, seq_len=8192, global_batch=128, num_gpus=64)
    args.update(kw)
    return plan.check(**args)


def test_valid_plan_and_derived_dp() -> None:
    assert derive_dp(64, tp=4, pp=4, cp=2) == 2
    p = Plan(dp=2, tp=4, pp=4, vp=5, cp=2, schedule=Schedule.INTERLEAVED)
    assert _check(p) is p
    assert p.microbatches(128) == 64


@pytest.mark.parametrize(("plan", "kw", "msg"), [
    (Plan(dp=4, tp=4, pp=4), {}, "dp\\*tp\\*pp\\*cp=64 != gpus=32"),
    (Plan(dp=8, tp=8, pp=1), {"heads": 60}, "heads=60 not divisible by tp=8"),
    (Plan(dp=2, tp=4, pp=8), {"layers": 81}, "layers=81 not divisible by pp\\*vp=8"),
    (Plan(dp=16, tp=4, pp=1, micro_batch=3), {}, "global_batch=128 not divisible by dp\\*micro_batch=48"),
    (Plan(dp=16, tp=4, pp=1, ep=4), {}, "ep=4 needs a MoE model"),
    (Plan(dp=16, tp=4, pp=1, ep=3), {"experts": 8}, "experts=8 not divisible by ep=3"),
    (Plan(dp=8, tp=4, pp=1, cp=2), {"seq_len": 8190}, "seq=8190 not divisible by 2\\*cp=4"),
    (Plan(dp=24, tp=1, pp=1, ep=8, etp=3), {"experts": 128, "global_batch": 48, "gpus_per_node": 8},
     "etp=3 must divide the GPUs per node \\(8\\).*valid: 1, 2, 4, 8"),
])
def test_invalid_plans_name_the_problem_and_all_degrees(plan, kw, msg) -> None:
    gpus = kw.pop("num_gpus", 32 if "64 != gpus" in msg else plan.gpus)
    with pytest.raises(DistscopeError, match=msg) as exc:
        _check(plan, num_gpus=gpus, **kw)
    for degree in ("dp=", "tp=", "pp=", "vp=", "cp=", "ep=", "micro_batch="):
        assert degree in str(exc.value)


def test_expert_tp_inside_a_node_and_on_an_nvl72_domain() -> None:
    plan = Plan(dp=24, tp=1, pp=1, ep=8, etp=3)
    assert _check(plan, experts=128, global_batch=48, num_gpus=24, gpus_per_node=72) is plan  # 3 divides 72
    assert _check(plan, experts=128, global_batch=48, num_gpus=24) is plan  # GPUs per node unknown: not checked


def test_construction_errors() -> None:
    with pytest.raises(DistscopeError, match="vp=2 needs pp > 1"):
        Plan(dp=1, vp=2, schedule=Schedule.INTERLEAVED)
    with pytest.raises(DistscopeError, match="needs schedule=interleaved"):
        Plan(dp=1, pp=2, vp=2)
    with pytest.raises(DistscopeError, match="zero_stage=4"):
        Plan(dp=1, zero_stage=4)
    with pytest.raises(DistscopeError, match="recompute_layers=2 needs recompute=full"):
        Plan(dp=1, recompute=Recompute.SELECTIVE, recompute_layers=2)
    with pytest.raises(DistscopeError, match="not divisible by tp\\*pp\\*cp=12"):
        derive_dp(64, tp=4, pp=3)
