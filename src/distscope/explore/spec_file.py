"""The YAML sweep file: strings become typed values and enums here, once; every error names the
file and the field.

    model: llama3-70b            # base scenario (each optional; `distscope plan`'s defaults)
    cluster: dgx-h100
    gpus: 1024
    global_batch: 1024
    seq: 4096
    precision: bf16              # planner settings
    compression: true
    software: torchtitan-2025    # optional software preset (`distscope plan --software`)
    input: x:8x3x224x224:bf16    # a torch module's input (model: torch:FILE.py:FACTORY; no seq)
    train_tokens: 1.0e12         # objectives
    tdp_W: 700                   # default: the device's datasheet TDP
    budget: 5.0e6                # cost cap: the fastest point within it is reported
    price:
      per_gpu_hour: 2.5          # the preset GPU's price
      per_unit: {hbm_GiB: 0.01}  # + per unit above the preset's value, per GPU-hour
    axes:                        # the grid: product of these, first outermost
      hbm_GBps: 2000:8000:10     # lo:hi:count
      nic_GBps: [25, 50, 100]    # or a list (or "25,50,100", or {lo: 25, hi: 100, count: 4})
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import yaml

from distscope.dtypes import Precision
from distscope.errors import DistscopeError, closest
from distscope.explore.axes import Axis, AxisValues, Kind, linspace, parse_values
from distscope.explore.objectives import Objectives, PriceModel
from distscope.explore.point import PlanSettings
from distscope.explore.sweep import Base, Sweep
from distscope.userfile import read_text

FIELDS = ("model", "cluster", "gpus", "global_batch", "seq", "precision", "compression", "software", "input", "train_tokens",
          "tdp_W", "budget", "price", "axes")


def _num(where: str, v: Any, *, integer: bool = False) -> Any:
    if isinstance(v, str):  # YAML 1.1 reads 1.0e12 (no sign in the exponent) as a string
        try:
            v = float(v)
        except ValueError:
            raise DistscopeError(f"{where}={v!r} must be a finite number") from None
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        raise DistscopeError(f"{where}={v!r} must be a finite number")
    if integer:
        if v != int(v):
            raise DistscopeError(f"{where}={v!r} must be an integer")
        return int(v)
    return float(v)


def _axis(where: str, axis: Axis, v: Any) -> AxisValues:
    if isinstance(v, str):
        values = parse_values(axis, v)
    elif isinstance(v, list):
        values = tuple(_num(where, x) if isinstance(x, str) and axis.kind is not Kind.TEXT else x for x in v)
    elif isinstance(v, dict):
        extra = set(v) - {"lo", "hi", "count"}
        if extra or len(v) != 3:
            raise DistscopeError(f"{where} must have exactly lo, hi and count (got {', '.join(map(str, v))})")
        values = linspace(axis, _num(f"{where}.lo", v["lo"]), _num(f"{where}.hi", v["hi"]),
                          _num(f"{where}.count", v["count"], integer=True))
    elif isinstance(v, int | float) and not isinstance(v, bool):
        values = (v,)
    else:
        raise DistscopeError(f"{where}={v!r} must be lo:hi:count, a list, or {{lo, hi, count}}")
    try:
        return AxisValues(axis=axis, values=values)
    except DistscopeError as exc:
        raise DistscopeError(f"{where}: {exc}") from None


def _price(where: str, v: Any) -> PriceModel:
    if isinstance(v, int | float) and not isinstance(v, bool):
        return PriceModel(per_gpu_hour=_num(where, v))
    if not isinstance(v, dict):
        raise DistscopeError(f"{where} must be a number or {{per_gpu_hour, per_unit}}")
    extra = set(v) - {"per_gpu_hour", "per_unit"}
    if extra:
        raise DistscopeError(f"{where}: unknown field {sorted(map(str, extra))[0]!r}; fields: per_gpu_hour, per_unit")
    per_unit = v.get("per_unit") or {}
    if not isinstance(per_unit, dict):
        raise DistscopeError(f"{where}.per_unit must be a mapping of axis: price per unit")
    units = tuple((Axis.parse(str(k), f"{where}.per_unit"), _num(f"{where}.per_unit.{k}", c)) for k, c in per_unit.items())
    return PriceModel(per_gpu_hour=_num(f"{where}.per_gpu_hour", v.get("per_gpu_hour", 1.0)), per_unit=units)


def sweep_from_dict(d: Any, where: str) -> Sweep:
    if not isinstance(d, dict):
        raise DistscopeError(f"{where}: expected a mapping of sweep fields, got {type(d).__name__}")
    for k in d:
        if k not in FIELDS:
            raise DistscopeError(f"{where}: unknown field {k!r}{closest(str(k), FIELDS)}; fields: {', '.join(FIELDS)}")
    try:
        base = Base(model=str(d.get("model", Base.model)), cluster=str(d.get("cluster", Base.cluster)),
                    gpus=_num(f"{where}: gpus", d.get("gpus", Base.gpus), integer=True),
                    global_batch=_num(f"{where}: global_batch", d.get("global_batch", Base.global_batch), integer=True),
                    seq=_num(f"{where}: seq", d["seq"], integer=True) if d.get("seq") is not None else None)
    except DistscopeError as exc:
        raise DistscopeError(f"{where}: {exc}" if not str(exc).startswith(where) else str(exc)) from None
    axes_raw = d.get("axes") or {}
    if not isinstance(axes_raw, dict):
        raise DistscopeError(f"{where}: axes must be a mapping of axis: values")
    axes = tuple(_axis(f"{where}: axes.{k}", Axis.parse(str(k), f"{where}: axes"), v) for k, v in axes_raw.items())
    compression = d.get("compression", True)
    if not isinstance(compression, bool):
        raise DistscopeError(f"{where}: compression={compression!r} must be true or false")
    software = d.get("software")
    try:
        plan = PlanSettings(precision=Precision.parse(str(d.get("precision", "bf16")), f"{where}: precision"),
                            compression=compression, software=str(software) if software is not None else None,
                            input=str(d["input"]) if d.get("input") is not None else None)
    except DistscopeError as exc:
        raise DistscopeError(f"{where}: {exc}" if not str(exc).startswith(where) else str(exc)) from None
    try:
        obj = Objectives(
            train_tokens=_num("train_tokens", d.get("train_tokens", Objectives.train_tokens)),
            price=_price("price", d["price"]) if d.get("price") is not None else PriceModel(),
            tdp_W=_num("tdp_W", d["tdp_W"]) if d.get("tdp_W") is not None else None,
            budget=_num("budget", d["budget"]) if d.get("budget") is not None else None)
    except DistscopeError as exc:
        raise DistscopeError(f"{where}: {exc}") from None
    return Sweep(base=base, axes=axes, plan=plan, objectives=obj)


def load_sweep(path: str | Path) -> Sweep:
    where = str(path)
    text = read_text(path, "sweep file")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or type(exc).__name__
        raise DistscopeError(f"{where}: malformed YAML ({problem}{at})") from None
    return sweep_from_dict(data, where)
