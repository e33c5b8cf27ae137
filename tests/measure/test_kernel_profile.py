"""Kernel profiles: the torch-free tables and loader, `measure kernels` on CPU, and --profile feeding
the tables into the estimator (they replace the efficiency curve where they have an entry)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from distscope.dtypes import DType, Precision
from distscope.errors import DistscopeError
from distscope.measure.kernel_profile import AttentionTable, Grid, KernelProfile
from distscope.measure.profile import SystemProfile, load_profile, profile_warnings, save_profile
from distscope.model import efficiency as eff
from distscope.model.layer import layer_cost
from distscope.plan import AttentionImpl, Recompute
from distscope.system import get_cluster
from distscope.system.calibrated import apply_profile
from distscope.workload.catalog import get_model


def _flat(tflops: float, gbps: float = 1000.0, device: str = "NVIDIA H100 80GB HBM3") -> KernelProfile:
    """Every kernel at one throughput: a profile whose predictions are easy to compute by hand."""
    g = Grid(axes=((256.0, 65536.0), (256.0, 65536.0), (256.0, 65536.0)), values=(tflops,) * 8)
    a = Grid(axes=((512.0, 16384.0), (64.0, 256.0)), values=(tflops / 2,) * 4)
    return KernelProfile(device=device, source="synthetic", gemm={DType.BF16: g},
                         attention={(DType.BF16, True): AttentionTable(fwd_tflops=a, bwd_tflops=a)},
                         elementwise=Grid(axes=((1e3, 1e10),), values=(gbps, gbps)))


def test_grid_interpolates_in_log_space_and_clamps():
    g = Grid(axes=((1.0, 4.0), (1.0, 2.0, 4.0)), values=(1.0, 2.0, 4.0, 4.0, 8.0, 16.0))
    assert g.at(1, 1) == pytest.approx(1.0) and g.at(4, 4) == pytest.approx(16.0)
    assert g.at(2, 2) == pytest.approx(4.0)  # geometric midpoint of 2 and 8
    assert g.at(0.1, 100) == pytest.approx(4.0)  # clamped to the (1, 4) corner
    assert g.at(1e6, 1e6) == pytest.approx(g.max_value)
    with pytest.raises(DistscopeError, match="increasing"):
        Grid(axes=((2.0, 1.0),), values=(1.0, 1.0))
    with pytest.raises(DistscopeError, match="values"):
        Grid(axes=((1.0, 2.0),), values=(1.0,))


def test_profile_round_trips_and_rejects_bad_tables(tmp_path):
    kp = _flat(400.0)
    p = tmp_path / "k.json"
    save_profile(SystemProfile(name="k", levels={}, device=kp.device, kernels=kp), p)
    back = load_profile(p).kernels
    assert back is not None
    assert back.gemm_time_s(DType.BF16, 4096, 4096, 4096) == pytest.approx(kp.gemm_time_s(DType.BF16, 4096, 4096, 4096))
    d = json.loads(p.read_text())
    for mutate, msg in [
        (lambda k: k.update(format="x"), "format='x'"),
        (lambda k: k.update(device=""), "device=''"),
        (lambda k: k["gemm"]["bf16"]["tflops"][0][0].__setitem__(0, -1), "must be a finite number > 0"),
        (lambda k: k["gemm"]["bf16"].pop("k"), "missing field 'k'"),
        (lambda k: k["gemm"].update(bf17=k["gemm"]["bf16"]), "bf17"),
        (lambda k: k["attention"]["bf16"].update(sideways={}), "causal' or 'full"),
        (lambda k: k["gemm"]["bf16"].update(m=[1]), "expected a list of 1 entries"),
    ]:
        bad = json.loads(json.dumps(d))
        mutate(bad["kernels"])
        q = tmp_path / "bad.json"
        q.write_text(json.dumps(bad))
        with pytest.raises(DistscopeError, match=msg) as exc:
            load_profile(q)
        assert "\n" not in str(exc.value)


def test_kernel_table_replaces_the_efficiency_curve():
    c = get_cluster("dgx-h100", 8)
    dev = apply_profile(c, SystemProfile(name="k", levels={}, kernels=_flat(400.0))).device
    # a kernel benchmark's table, run by a training job at the sustained share σ, as the analytic curve is
    assert eff.gemm_s(dev, DType.BF16, 8192, 8192, 8192) == pytest.approx(2 * 8192**3 / 400e12 / eff.SUSTAINED)
    # the dtype the table lacks falls back to the analytic curve
    assert eff.gemm_s(dev, DType.FP8, 8192, 8192, 8192) == eff.gemm_s(c.device, DType.FP8, 8192, 8192, 8192)
    assert eff.elementwise_s(dev, 1e9) == pytest.approx(1e9 / 1000e9)
    spec = get_model("llama3-8b")
    args = (spec, False, 1, 4096, 1, 1, False, AttentionImpl.FLASH, Recompute.NONE, Precision.BF16)
    slow = layer_cost(*args, apply_profile(c, SystemProfile(name="a", levels={}, kernels=_flat(200.0, 500.0))).device)
    fast = layer_cost(*args, apply_profile(c, SystemProfile(name="b", levels={}, kernels=_flat(400.0, 1000.0))).device)
    assert slow.fwd_s == pytest.approx(2 * fast.fwd_s, rel=1e-6)  # every kernel of the layer comes from the table


def test_foreign_device_warns():
    kp = _flat(1.0, device="cpu: x86_64")
    ws = profile_warnings(SystemProfile(name="k", levels={}, kernels=kp), "h100-sxm5-80gb")
    assert any("cpu: x86_64" in w for w in ws)
    assert not profile_warnings(SystemProfile(name="k", levels={}, kernels=_flat(1.0)), "h100-sxm5-80gb")


def test_measure_kernels_on_cpu_feeds_estimate(tmp_path, capsys):
    pytest.importorskip("torch")
    from distscope.measure.kernels import KernelSweep, measure_kernels
    from distscope.model.estimate import estimate
    from distscope.scenario import PlanFlags, SystemFlags, WorkloadFlags, build_scenario

    sweep = dataclasses.replace(KernelSweep.quick(dtypes=(DType.BF16,)), gemm_m=(32, 64), gemm_nk=(32, 64),
                                attn_seq=(32, 64), attn_head_dim=(16, 32), attn_tokens=64, attn_width=32,
                                elementwise_bytes=(1 << 12, 1 << 16), iters=2)
    kp = measure_kernels(sweep, "cpu")
    assert set(kp.gemm) == {DType.BF16} and len(kp.gemm[DType.BF16].values) == 8
    assert kp.has_attention(DType.BF16, True) and kp.has_attention(DType.BF16, False)
    assert kp.elementwise is not None and all(v > 0 for v in kp.elementwise.values)
    assert kp.device.startswith("cpu")
    out = tmp_path / "p.json"
    save_profile(SystemProfile(name="cpu", levels={}, device=kp.device, kernels=kp), out)
    w = WorkloadFlags(model="gpt-1.7b", global_batch=8, seq=512)
    pf = PlanFlags(zero=1, distributed_optimizer=False, overlap="dp", attention="flash")
    plain = build_scenario(w, SystemFlags(cluster="dgx-a100", gpus=8), pf)
    prof = build_scenario(w, SystemFlags(cluster="dgx-a100", gpus=8, profile=str(out)), pf)
    assert "measured on 'cpu" in capsys.readouterr().err  # a CPU profile applied to an A100 preset is called out
    t_plain = estimate(plain.spec, plain.shape, plain.cluster, plain.plan).step_time_s
    t_prof = estimate(prof.spec, prof.shape, prof.cluster, prof.plan).step_time_s
    assert t_prof > 20 * t_plain  # a CPU runs these kernels orders of magnitude slower than the A100 model


def test_measure_kernels_cli_on_cpu(tmp_path, capsys):
    pytest.importorskip("torch")
    from distscope.cli import main

    out = tmp_path / "p.json"
    main(["measure", "kernels", "--out", str(out), "--dtypes", "fp32", "--gemm-m", "32", "--gemm-nk", "32,64",
          "--iters", "1"])
    prof = load_profile(out)
    assert prof.kernels is not None and set(prof.kernels.gemm) == {DType.FP32} and not prof.levels
    with pytest.raises(SystemExit) as exc:
        main(["measure", "kernels", "--out", str(out), "--dtypes", "fp9"])
    assert exc.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith("distscope: error: --dtypes='fp9'")
