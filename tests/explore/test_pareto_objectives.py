"""Pareto fronts against brute force; objectives and the price model by their formulas."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distscope.errors import DistscopeError
from distscope.explore.axes import Axis
from distscope.explore.objectives import Objectives, PriceModel, objectives
from distscope.explore.pareto import pareto_front
from distscope.system.power import tdp_W


def brute(xs: list[float], ys: list[float]) -> list[int]:
    n = len(xs)
    return [i for i in range(n) if not any(
        xs[j] <= xs[i] and ys[j] <= ys[i] and (xs[j] < xs[i] or ys[j] < ys[i]) for j in range(n))]


@settings(max_examples=300, derandomize=True, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6)), max_size=30))
def test_front_equals_brute_force(pts: list[tuple[int, int]]) -> None:
    xs, ys = [float(x) for x, _ in pts], [float(y) for _, y in pts]
    assert pareto_front(xs, ys) == brute(xs, ys)


def test_front_ids_and_ties() -> None:
    assert pareto_front([1, 2, 3, 1], [3, 2, 1, 3], ids=[10, 11, 12, 13]) == [10, 11, 12, 13]
    assert pareto_front([1, 1, 2], [2, 1, 1]) == [1]
    assert pareto_front([], []) == []


def test_objectives_formulas() -> None:
    o = objectives(tokens_per_s=1e6, gpus=1000, price_per_gpu_hour=2.0, tdp_W=700.0, train_tokens=3.6e12)
    assert o["time_to_train_s"] == pytest.approx(3.6e6)  # 1000 h
    assert o["gpu_hours"] == pytest.approx(1e6)
    assert o["cost"] == pytest.approx(2e6)
    assert o["energy_MWh"] == pytest.approx(1000 * 700 * 3.6e6 / 3.6e9)  # 700 MWh


def test_price_model_is_linear_in_the_deltas() -> None:
    pm = PriceModel(per_gpu_hour=2.0, per_unit=((Axis.HBM_GIB, 0.01), (Axis.HBM_GBPS, 0.001)))
    preset = {"hbm_GiB": 80.0, "hbm_GBps": 3350.0}
    assert pm.price(preset, preset) == 2.0
    assert pm.price({"hbm_GiB": 180.0, "hbm_GBps": 4350.0}, preset) == pytest.approx(2.0 + 1.0 + 1.0)
    with pytest.raises(DistscopeError, match="nic_latency_us cannot be priced"):
        PriceModel(per_unit=((Axis.NIC_LATENCY_US, 1.0),))
    with pytest.raises(DistscopeError, match="train_tokens=0"):
        Objectives(train_tokens=0)


def test_tdp_on_record_for_every_device() -> None:
    from distscope.system.device import device_names

    for d in device_names():
        assert 100 <= tdp_W(d) <= 1500
    with pytest.raises(DistscopeError, match="--tdp"):
        tdp_W("tpu-v5")
