"""The host floor under a layer's passes (model/host.py): the phased forward at the MoE sync, and where
the estimator applies it."""

from __future__ import annotations

import pytest

from distscope.dtypes import Precision
from distscope.model import host
from distscope.model.estimate import compute_costs
from distscope.model.layer import layer_cost
from distscope.plan import Plan
from distscope.software.presets import DEFAULT
from distscope.system.device import get_device
from distscope.workload.catalog import get_model


def test_without_experts_the_pass_is_the_slower_of_host_and_gpu() -> None:
    w = host.HostWork(ops=40, expert_gemms=0)
    assert w.forward_pass_s(0.0, 1e-3) == pytest.approx(1e-3)
    assert w.forward_pass_s(0.0, 1e-4) == pytest.approx(40 * host.OP_S)


def test_gpu_bound_experts_hide_the_host() -> None:
    w = host.HostWork(ops=10, expert_gemms=4)
    assert w.forward_pass_s(1e-3, 2e-3) == pytest.approx(3e-3)


def test_host_bound_experts_are_exposed_before_the_rest_of_the_layer() -> None:
    """After the sync the GPU waits for each expert GEMM; the rest of the layer cannot start earlier."""
    w = host.HostWork(ops=10, expert_gemms=32)
    g_e, g_r = 0.2e-3, 2e-3
    t = w.forward_pass_s(g_e, g_r)
    assert t == pytest.approx(32 * host.EXPERT_GEMM_S + g_r)
    assert t > max(w.forward_s(), g_e + g_r)  # more than a plain max of the totals


def test_grouped_gemm_in_one_op_issues_no_per_expert_gemms() -> None:
    te = host.layer_host_work(moe_layer=True, linears=4, low_precision=False, local_experts=16, per_expert_gemms=True)
    one = host.layer_host_work(moe_layer=True, linears=4, low_precision=False, local_experts=16, per_expert_gemms=False)
    assert te.expert_gemms == 32 and one.expert_gemms == 0
    assert one.forward_s() < te.forward_s()


def test_a_low_precision_recipe_doubles_each_expert_gemms_host_work() -> None:
    """TransformerEngine issue #761: an FP8 te.Linear takes more than twice the host time of a BF16 one; a dense
    layer carries it as one cast op per linear, a per-expert grouped GEMM on each expert's GEMMs."""
    kw = {"moe_layer": True, "linears": 4, "local_experts": 16, "per_expert_gemms": True}
    bf16, fp8 = (host.layer_host_work(low_precision=lp, **kw) for lp in (False, True))  # type: ignore[arg-type]
    assert fp8.expert_gemms == bf16.expert_gemms == 32
    assert fp8.forward_s() - bf16.forward_s() == pytest.approx(32 * host.EXPERT_GEMM_S + 4 * host.OP_S)


def _costs(model: str, gpu: str, plan: Plan) -> tuple[float, float]:
    """(the floored forward of the model's MoE or dense layer, its GPU-only forward) at seq 4096."""
    spec, dev = get_model(model), get_device(gpu)
    moe = spec.moe is not None
    costs, _ = compute_costs(spec, plan.micro_batch, 4096, plan, dev, DEFAULT)
    gpu_only = layer_cost(spec, moe, plan.micro_batch, 4096, plan.tp, 1, plan.sp, plan.attention, plan.recompute,
                          plan.precision, dev, **({"ep": plan.ep} if moe else {}))
    return costs[moe].fwd_s, gpu_only.fwd_s


def test_fine_grained_moe_on_blackwell_is_host_bound() -> None:
    """Qwen3-30B-A3B, 16 local experts of width 768 on a B200 at micro-batch 1: the experts' GEMMs are
    shorter than their host work, so the forward is longer than its GPU time."""
    floored, gpu = _costs("qwen3-30b-a3b", "b200-sxm-180gb", Plan(dp=8, ep=8, precision=Precision.BF16))
    assert floored > 1.2 * gpu


def test_large_dense_layers_are_not_host_bound() -> None:
    floored, gpu = _costs("llama3-70b", "h100-sxm5-80gb", Plan(dp=1, tp=8, sequence_parallel=True))
    assert floored == pytest.approx(gpu)


def test_host_op_us_sets_the_eager_host_floor_everywhere_it_applies(capsys) -> None:  # type: ignore[no-untyped-def]
    """--host-op-us replaces OP_S in every host floor: a transformer layer's (an MoE layer on Blackwell is
    host-bound), an eager module's inference and an eager diffusion step; the default is unchanged."""
    import json
    from pathlib import Path

    from tests.cli_run import run_cli

    root = Path(__file__).resolve().parents[2]

    def step(*extra: str) -> float:
        code, out = run_cli(capsys, "estimate", "--model", "deepseek-v3", "--cluster", "dgx-b200", "--gpus", "64",
                            "--ep", "8", "--pp", "8", "--global-batch", "512", "--json", *extra)
        assert code == 0, out
        return float(json.loads(out)["step_time_s"])

    assert step("--host-op-us", "10") == pytest.approx(step())
    assert step("--host-op-us", "200") > 1.2 * step()
    tiny = f"torch:{root}/examples/modules/tiny_denoiser.py:denoiser"
    inputs = ("--input", "x:2x4x64x64:fp16,ctx:2x77x768:fp16")
    code, out = run_cli(capsys, "estimate", "--model", tiny, *inputs, "--inference", "--gpus", "1", "--json",
                        "--host-op-us", "1000")
    assert code == 0, out
    code, ops = run_cli(capsys, "serve", "diffusion", "--model", tiny, *inputs, "--gpus", "1", "--eager", "--json",
                        "--host-op-us", "1000")
    assert code == 0, ops
    latency = json.loads(out)["runs"][0]["latency_s"]
    step_s = json.loads(ops)["runs"][0]["compute_s_per_step"]
    assert latency == pytest.approx(step_s) and latency > 0.01  # both: ops x 1 ms, far above the GPU time


@pytest.mark.parametrize("value", ["0", "-5", "nan", "inf"])
def test_host_op_us_must_be_positive(capsys, value: str) -> None:  # type: ignore[no-untyped-def]
    from tests.cli_run import run_cli

    code, out = run_cli(capsys, "estimate", "--host-op-us", value)
    assert code != 0 and out.strip().splitlines()[-1].startswith("distscope: error: --host-op-us=")
