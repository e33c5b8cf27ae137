"""Parametric hardware changes exactly what it names; a point's best plan is the planner's; failing
points are recorded with their reason."""

from __future__ import annotations

from distscope.dtypes import DType
from distscope.explore.axes import Axis
from distscope.explore.hardware import apply_hardware, resolved
from distscope.explore.point import ERROR, INFEASIBLE, OK, PlanSettings, Point, run_point
from distscope.model.estimate import estimate
from distscope.search.compression import best_compressed
from distscope.search.planner import search
from distscope.system.presets import get_cluster
from distscope.workload.catalog import get_model
from distscope.workload.training import TrainingShape


def test_apply_hardware_changes_only_what_it_names() -> None:
    c = get_cluster("dgx-h100", 64)
    hw = {Axis.HBM_GBPS: 5000.0, Axis.HBM_GIB: 160.0, Axis.NIC_GBPS: 100.0, Axis.NVLINK_SIZE: 16,
          Axis.TFLOPS_BF16: 2000.0, Axis.NVLINK_LATENCY_US: 1.0}
    d = apply_hardware(c, hw)
    r, r0 = resolved(d, DType.BF16), resolved(c, DType.BF16)
    assert (r["hbm_GBps"], r["hbm_GiB"], r["nic_GBps"], r["nvlink_size"], r["peak_tflops"]) == (5000.0, 160.0, 100.0, 16, 2000.0)
    assert r["nvlink_latency_us"] == 1.0
    assert (r["nvlink_GBps"], r["nic_latency_us"]) == (r0["nvlink_GBps"], r0["nic_latency_us"])
    assert dict(d.device.peak_flops)[DType.FP8] == dict(c.device.peak_flops)[DType.FP8]
    assert d.device.usable_bytes / d.device.hbm_bytes == c.device.usable_bytes / c.device.hbm_bytes
    assert d.gpus_per_node == 16 and d.levels[-1].efficiency == c.levels[-1].efficiency
    assert apply_hardware(c, {}) is c


def test_faster_nic_never_slows_a_fixed_plan() -> None:
    spec, shape = get_model("llama3-8b"), TrainingShape(seq_len=4096, global_batch=64)
    c = get_cluster("dgx-h100", 64)
    best = search(spec, shape, c).best
    assert best is not None
    times = [estimate(spec, shape, apply_hardware(c, {Axis.NIC_GBPS: bw}), best.plan).step_time_s for bw in (12.5, 25, 50, 100)]
    assert times == sorted(times, reverse=True) and times[0] > times[-1]


def test_point_best_plan_is_the_planners() -> None:
    """The explore point equals `distscope plan` on the same inputs (estimator ranking, compression)."""
    p = Point(model="llama3-8b", cluster="dgx-h100", gpus=16, global_batch=64, seq=4096, hw=((Axis.NIC_GBPS, 25.0),))
    r = run_point(p, PlanSettings())
    spec, shape = get_model("llama3-8b"), TrainingShape(seq_len=4096, global_batch=64)
    c = apply_hardware(get_cluster("dgx-h100", 16), {Axis.NIC_GBPS: 25.0})
    res = search(spec, shape, c)
    cr = best_compressed(spec, shape, c, res.pool, res.comm_pool, base=res.best)
    assert res.best is not None and cr is not None
    want = min((res.best, cr.compressed), key=lambda x: x.step_time_s)
    assert r["status"] == OK and r["step_time_s"] == want.step_time_s
    assert (r["tp"], r["pp"], r["dp"], r["micro_batch"]) == (want.plan.tp, want.plan.pp, want.plan.dp, want.plan.micro_batch)
    r2 = run_point(p, PlanSettings(compression=False))
    assert r2["step_time_s"] == res.best.step_time_s and r2["compression"] == "none"


def test_point_with_software_is_plan_with_software() -> None:
    """`software` in the sweep settings prices the point as `distscope plan --software` does, and is part
    of the point's key (only when set: earlier journals keep theirs)."""
    from distscope.dtypes import Precision
    from distscope.plan import Framework
    from distscope.search.settings import planner_space
    from distscope.software.presets import get_software

    p = Point(model="llama3-8b", cluster="dgx-h100", gpus=8, global_batch=32, seq=4096)
    settings = PlanSettings(compression=False, software="torchtitan-2025")
    r = run_point(p, settings)
    sw = get_software("torchtitan-2025")
    c = get_cluster("dgx-h100", 8)
    # the preset's framework (torchtitan) limits the space, as `distscope plan --software torchtitan-2025`
    space = planner_space(spec=get_model("llama3-8b"), device=c.device, precision=Precision.BF16, software=sw)
    assert space.framework is Framework.TORCHTITAN
    res = search(get_model("llama3-8b"), TrainingShape(seq_len=4096, global_batch=32), c, space)
    assert res.best is not None and r["status"] == OK and r["step_time_s"] == res.best.step_time_s
    assert r["zero_stage"] in (0, 3)  # torchtitan runs DDP or FSDP2, no ZeRO-1/2
    assert '"software":"torchtitan-2025"' in p.key(settings) and "software" not in p.key(PlanSettings())


def test_failing_points_carry_one_line_reasons() -> None:
    s = PlanSettings()
    bad_node = run_point(Point(model="llama3-8b", cluster="dgx-h100", gpus=128, global_batch=64, seq=4096,
                               hw=((Axis.NVLINK_SIZE, 72),)), s)
    assert bad_node["status"] == ERROR and "not a multiple of 72" in bad_node["reason"]
    tiny_batch = run_point(Point(model="llama3-8b", cluster="dgx-h100", gpus=8192, global_batch=1, seq=4096), s)
    assert tiny_batch["status"] == INFEASIBLE and "global_batch=1" in tiny_batch["reason"]
    no_memory = run_point(Point(model="llama3-70b", cluster="dgx-h100", gpus=8, global_batch=8, seq=4096,
                                hw=((Axis.HBM_GIB, 4.0),)), s)
    assert no_memory["status"] == INFEASIBLE and "no plan fits" in no_memory["reason"]
    long_seq = run_point(Point(model="gpt3-175b", cluster="dgx-a100", gpus=8, global_batch=8, seq=4096), s)
    assert long_seq["status"] == ERROR and "learned position table" in long_seq["reason"]
    for r in (bad_node, tiny_batch, no_memory, long_seq):
        assert "\n" not in r["reason"] and r["step_time_s"] is None


