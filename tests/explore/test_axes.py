"""Axis and sweep-file parsing: values, types, and one-line errors naming the field."""

from __future__ import annotations

import pytest

from distscope.errors import DistscopeError
from distscope.explore.axes import Axis, parse_vary
from distscope.explore.spec_file import load_sweep, sweep_from_dict
from distscope.explore.sweep import Sweep


def test_lo_hi_count_and_lists() -> None:
    a = parse_vary("hbm_GBps=2000:8000:4")
    assert a.axis is Axis.HBM_GBPS and a.values == (2000.0, 4000.0, 6000.0, 8000.0)
    assert parse_vary("gpus=1024,4096").values == (1024, 4096)
    assert parse_vary("gpus=1024:4096:4").values == (1024, 2048, 3072, 4096)
    assert parse_vary("model=llama3-8b, llama3-70b").values == ("llama3-8b", "llama3-70b")
    assert parse_vary("nic_latency_us=0,5").values == (0.0, 5.0)
    assert parse_vary("HBM_gbps=1:1:1").values == (1.0,)  # names are case-insensitive


@pytest.mark.parametrize(("text", "msg"), [
    ("hbm_bw=1,2", "hbm_bw"),  # unknown axis, with the closest names
    ("nic_GBps=-5,10", "nic_GBps: value -5.0 must be > 0"),
    ("nic_GBps=0:10:3", "must be > 0"),
    ("nic_GBps=10:20:0", "count=0"),
    ("nic_GBps=", "no values"),
    ("nic_GBps=1,,2", "empty item"),
    ("gpus=1000:2000:4", "must be integers"),
    ("gpus=8.5", "must be an integer"),
    ("nic_GBps=x:2:3", "'x' is not a number"),
    ("nic_GBps=1:2", "lo:hi:count"),
    ("nic_GBps=20:10:3", "lo=20 must be <= hi=10"),
    ("nic_GBps=5,5", "repeats"),
    ("nic_GBps=nan", "finite"),
    ("nic_GBps", "name=lo:hi:count"),
])
def test_bad_axes(text: str, msg: str) -> None:
    with pytest.raises(DistscopeError, match=msg.replace("(", r"\(").replace(")", r"\)")) as e:
        parse_vary(text)
    assert "\n" not in str(e.value)


def test_unknown_axis_names_closest() -> None:
    with pytest.raises(DistscopeError, match="closest: hbm_GBps"):
        parse_vary("hbm_GBs=1,2")


def test_grid_order_and_size() -> None:
    s = Sweep(axes=(parse_vary("gpus=64,128"), parse_vary("nic_GBps=25,50,100")))
    pts = s.points()
    assert s.size == len(pts) == 6
    assert [(p.gpus, dict(p.hw)[Axis.NIC_GBPS]) for p in pts[:4]] == [(64, 25.0), (64, 50.0), (64, 100.0), (128, 25.0)]
    with pytest.raises(DistscopeError, match="given twice"):
        Sweep(axes=(parse_vary("gpus=64"), parse_vary("gpus=128")))


def test_bad_names_fail_before_planning() -> None:
    with pytest.raises(DistscopeError, match="cluster='dgx-h1000' is not a preset; closest: dgx-h100"):
        Sweep(axes=(parse_vary("cluster=dgx-h100,dgx-h1000"),)).points()
    with pytest.raises(DistscopeError, match="model='llama3-7b'"):
        Sweep(axes=(parse_vary("model=llama3-7b"),)).points()


def test_yaml_sweep(tmp_path) -> None:
    f = tmp_path / "s.yaml"
    f.write_text("model: llama3-8b\ngpus: 16\ntrain_tokens: 1.0e12\nprice: {per_gpu_hour: 2.5, per_unit: {hbm_GiB: 0.01}}\n"
                 "axes:\n  hbm_GBps: 2000:4000:3\n  nic_GBps: [25, 50]\n  seq: {lo: 2048, hi: 4096, count: 2}\n")
    s = load_sweep(f)
    assert s.base.model == "llama3-8b" and s.base.gpus == 16 and s.size == 12
    assert s.objectives.train_tokens == 1e12  # YAML 1.1 reads 1.0e12 as a string
    assert s.objectives.price.per_gpu_hour == 2.5 and s.objectives.price.per_unit == ((Axis.HBM_GIB, 0.01),)
    # a YAML 25 and a flag's 25.0 are one point (same key, so a resume matches either spelling)
    assert s.axes[1].values == parse_vary("nic_GBps=25,50").values


@pytest.mark.parametrize(("text", "msg"), [
    ("a: [1, 2\n  b: }", "malformed YAML"),
    ("- 1\n- 2\n", "expected a mapping"),
    ("modle: llama3-8b\n", "unknown field 'modle'; closest: model"),
    ("axes: {nic_bw: [1]}\n", "axes='nic_bw' is not an axis"),
    ("axes: {nic_GBps: [-1]}\n", "axes.nic_GBps: axis nic_GBps: value -1 must be > 0"),
    ("axes: {nic_GBps: []}\n", "no values"),
    ("axes: {nic_GBps: {lo: 1, hi: 2}}\n", "exactly lo, hi and count"),
    ("gpus: many\n", "gpus='many' must be a finite number"),
    ("price: {per_gpu_hour: -1}\n", "per_gpu_hour=-1.0 must be > 0"),
    ("compression: maybe\n", "compression='maybe' must be true or false"),
    ("precision: fp4\n", "precision='fp4'"),
])
def test_bad_yaml(tmp_path, text: str, msg: str) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text(text)
    with pytest.raises(DistscopeError, match=msg.replace("[", r"\[").replace("(", r"\(")) as e:
        load_sweep(f)
    assert str(f) in str(e.value) and "\n" not in str(e.value)


def test_sweep_from_dict_empty_is_defaults() -> None:
    s = sweep_from_dict({}, "x")
    assert s.size == 1 and s.base.model == "llama3-70b"
