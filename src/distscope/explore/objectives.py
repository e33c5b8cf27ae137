"""Sweep objectives from a point's best plan: time, cost and energy to train N tokens.

    time_to_train_s = N / tokens_per_s
    gpu_hours       = gpus · time_to_train_s / 3600
    cost            = gpu_hours · price_per_gpu_hour
    energy_MWh      = gpus · tdp_W · time_to_train_s / 3.6e9      (1 MWh = 3.6e9 J)

Price per GPU-hour is given by the user: a base price for the preset's GPU plus, optionally, a linear
price per unit of each hardware value above (or below) the preset's, e.g. $ per GiB of extra HBM.
That linear model is an assumption the user states, not a market fact. With no price, the price is
1, so `cost` reads in GPU-hours. Energy is the GPUs' datasheet TDP (system/power.py) for the whole
run: an upper bound on the GPUs' own draw, no host, network or cooling.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping

from distscope.errors import DistscopeError
from distscope.explore.axes import Axis

HOUR_S = 3600.0
MWH_J = 3.6e9
PRICED = (Axis.HBM_GIB, Axis.HBM_GBPS, Axis.NVLINK_SIZE, Axis.NVLINK_GBPS, Axis.NIC_GBPS, Axis.TFLOPS_BF16,
          Axis.TFLOPS_FP16, Axis.TFLOPS_FP8)


@dataclasses.dataclass(frozen=True, kw_only=True)
class PriceModel:
    per_gpu_hour: float = 1.0  # price of one GPU-hour of the preset's hardware
    per_unit: tuple[tuple[Axis, float], ...] = ()  # + coef · (value − preset value) per GPU-hour

    def __post_init__(self) -> None:
        if not (math.isfinite(self.per_gpu_hour) and self.per_gpu_hour > 0):
            raise DistscopeError(f"price per_gpu_hour={self.per_gpu_hour} must be > 0")
        for a, coef in self.per_unit:
            if a not in PRICED:
                raise DistscopeError(f"price per_unit: {a.value} cannot be priced; priced: "
                                     f"{', '.join(x.value for x in PRICED)}")
            if not math.isfinite(coef):
                raise DistscopeError(f"price per_unit.{a.value}={coef} must be a finite number")

    def price(self, hw: Mapping[str, float], preset: Mapping[str, float]) -> float:
        """Price of one GPU-hour at resolved hardware `hw`, the preset's being `preset`."""
        return self.per_gpu_hour + sum(coef * (hw[_column(a)] - preset[_column(a)]) for a, coef in self.per_unit)

    def to_json(self) -> dict[str, object]:
        return {"per_gpu_hour": self.per_gpu_hour, "per_unit": {a.value: c for a, c in self.per_unit}}


def _column(a: Axis) -> str:
    return "peak_tflops" if a.value.startswith("tflops") else a.value


@dataclasses.dataclass(frozen=True, kw_only=True)
class Objectives:
    train_tokens: float = 1e12
    price: PriceModel = dataclasses.field(default_factory=PriceModel)
    tdp_W: float | None = None  # None: the device's datasheet TDP
    budget: float | None = None  # a cost cap: the summary names the fastest point within it

    def __post_init__(self) -> None:
        if not (math.isfinite(self.train_tokens) and self.train_tokens > 0):
            raise DistscopeError(f"train_tokens={self.train_tokens} must be > 0")
        if self.tdp_W is not None and not (math.isfinite(self.tdp_W) and self.tdp_W > 0):
            raise DistscopeError(f"tdp_W={self.tdp_W} must be > 0")
        if self.budget is not None and not (math.isfinite(self.budget) and self.budget > 0):
            raise DistscopeError(f"budget={self.budget} must be > 0")

    def to_json(self) -> dict[str, object]:
        return {"train_tokens": self.train_tokens, "price": self.price.to_json(), "tdp_W": self.tdp_W,
                "budget": self.budget}


def objectives(*, tokens_per_s: float, gpus: int, price_per_gpu_hour: float, tdp_W: float,
               train_tokens: float) -> dict[str, float]:
    t = train_tokens / tokens_per_s
    gpu_hours = gpus * t / HOUR_S
    return {"time_to_train_s": t, "gpu_hours": gpu_hours, "cost": gpu_hours * price_per_gpu_hour,
            "energy_MWh": gpus * tdp_W * t / MWH_J}
