"""Sweep axes: what `distscope explore` can vary, and how an axis is written.

An axis is `name=lo:hi:count` (count evenly spaced values, lo and hi included) or a comma list
`name=a,b,c`. Workload and scenario axes: model (catalog key or HF config.json), cluster (preset),
gpus, global_batch, seq. Hardware axes change the preset's device or topology (hardware.py):
peak dense TFLOP/s per dtype, HBM capacity and bandwidth, the NVLink domain (the first topology
level: its size in GPUs, bandwidth per GPU per direction, per-hop latency) and the NIC (the
outermost level: bandwidth per GPU per direction, per-hop latency).
"""

from __future__ import annotations

import dataclasses
import enum
import math

from distscope.errors import DistscopeError, closest


class Kind(enum.Enum):
    TEXT = "text"
    INT = "int"
    FLOAT = "float"


class Axis(enum.Enum):
    """One sweep dimension; the value is the name users write."""

    MODEL = "model"
    CLUSTER = "cluster"
    GPUS = "gpus"
    GLOBAL_BATCH = "global_batch"
    SEQ = "seq"
    TFLOPS_FP32 = "tflops_fp32"
    TFLOPS_TF32 = "tflops_tf32"
    TFLOPS_FP16 = "tflops_fp16"
    TFLOPS_BF16 = "tflops_bf16"
    TFLOPS_FP8 = "tflops_fp8"
    HBM_GIB = "hbm_GiB"
    HBM_GBPS = "hbm_GBps"
    NVLINK_SIZE = "nvlink_size"
    NVLINK_GBPS = "nvlink_GBps"
    NVLINK_LATENCY_US = "nvlink_latency_us"
    NIC_GBPS = "nic_GBps"
    NIC_LATENCY_US = "nic_latency_us"

    @property
    def kind(self) -> Kind:
        return _KIND.get(self, Kind.FLOAT)

    @property
    def hardware(self) -> bool:
        return self not in _SCENARIO

    @property
    def allows_zero(self) -> bool:
        """Latencies may be 0; every size, rate and bandwidth must be > 0."""
        return self in (Axis.NVLINK_LATENCY_US, Axis.NIC_LATENCY_US)

    @classmethod
    def parse(cls, name: str, field: str = "axis") -> Axis:
        key = name.strip()
        for a in cls:
            if a.value.lower() == key.lower():
                return a
        raise DistscopeError(f"{field}={name!r} is not an axis{closest(key, [a.value for a in cls])}; "
                             f"axes: {', '.join(a.value for a in cls)}")


_SCENARIO = (Axis.MODEL, Axis.CLUSTER, Axis.GPUS, Axis.GLOBAL_BATCH, Axis.SEQ)
_KIND = {Axis.MODEL: Kind.TEXT, Axis.CLUSTER: Kind.TEXT, Axis.GPUS: Kind.INT, Axis.GLOBAL_BATCH: Kind.INT,
         Axis.SEQ: Kind.INT, Axis.NVLINK_SIZE: Kind.INT}

Value = str | int | float


@dataclasses.dataclass(frozen=True, kw_only=True)
class AxisValues:
    axis: Axis
    values: tuple[Value, ...]

    def __post_init__(self) -> None:
        name = self.axis.value
        for v in self.values:
            check_value(self.axis, v)
        # one spelling per value (a YAML 2000 and a flag's 2000.0 are the same point)
        kind = self.axis.kind
        norm = tuple(str(v).strip() if kind is Kind.TEXT else int(v) if kind is Kind.INT else float(v)
                     for v in self.values)
        object.__setattr__(self, "values", norm)
        if not self.values:
            raise DistscopeError(f"axis {name} has no values (an empty grid)")
        if len(set(self.values)) != len(self.values):
            dup = next(v for v in self.values if self.values.count(v) > 1)
            raise DistscopeError(f"axis {name} repeats the value {dup!r}")


def check_value(axis: Axis, v: Value) -> None:
    """A value of the right type and sign for its axis (one-line error naming both)."""
    name = axis.value
    if axis.kind is Kind.TEXT:
        if not isinstance(v, str) or not v.strip():
            raise DistscopeError(f"axis {name}: value {v!r} must be a non-empty name")
        return
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        raise DistscopeError(f"axis {name}: value {v!r} must be a finite number")
    if axis.kind is Kind.INT and v != int(v):
        raise DistscopeError(f"axis {name}: value {v!r} must be an integer")
    if v < 0 or (v == 0 and not axis.allows_zero):
        raise DistscopeError(f"axis {name}: value {v!r} must be {'>= 0' if axis.allows_zero else '> 0'}")


def _float(axis: Axis, text: str) -> float:
    try:
        x = float(text.strip())
    except ValueError:
        raise DistscopeError(f"axis {axis.value}: {text!r} is not a number") from None
    if not math.isfinite(x):
        raise DistscopeError(f"axis {axis.value}: value {text!r} must be a finite number")
    return x


def _number(axis: Axis, text: str) -> int | float:
    x = _float(axis, text)
    if axis.kind is Kind.INT:
        if x != round(x):
            raise DistscopeError(f"axis {axis.value}: value {text!r} must be an integer")
        return round(x)
    return x


def linspace(axis: Axis, lo: float, hi: float, count: int) -> tuple[Value, ...]:
    """`count` evenly spaced values from lo to hi, both included (integers for integer axes)."""
    if count < 1:
        raise DistscopeError(f"axis {axis.value}: count={count} must be >= 1 (an empty grid)")
    if hi < lo:
        raise DistscopeError(f"axis {axis.value}: lo={lo:g} must be <= hi={hi:g}")
    if count == 1 and lo != hi:
        raise DistscopeError(f"axis {axis.value}: count=1 needs lo == hi (got {lo:g}:{hi:g})")
    raw = [lo + (hi - lo) * i / (count - 1) for i in range(count)] if count > 1 else [lo]
    raw[-1] = hi
    if axis.kind is Kind.INT:
        bad = [x for x in raw if x != round(x)]
        if bad:
            raise DistscopeError(f"axis {axis.value}={lo:g}:{hi:g}:{count}: values must be integers, "
                                 f"got {bad[0]:g}; choose lo, hi and count so the steps are whole")
        return tuple(round(x) for x in raw)
    return tuple(float(x) for x in raw)


def parse_values(axis: Axis, text: str) -> tuple[Value, ...]:
    """`lo:hi:count` or a comma list, for one axis."""
    t = text.strip()
    if not t:
        raise DistscopeError(f"axis {axis.value} has no values (an empty grid)")
    if ":" in t and axis.kind is not Kind.TEXT:
        parts = t.split(":")
        if len(parts) != 3:
            raise DistscopeError(f"axis {axis.value}={text!r} must be lo:hi:count or a comma list")
        lo, hi = _float(axis, parts[0]), _float(axis, parts[1])
        try:
            count = int(parts[2])
        except ValueError:
            raise DistscopeError(f"axis {axis.value}={text!r}: count {parts[2]!r} must be an integer") from None
        return linspace(axis, lo, hi, count)
    items = [x.strip() for x in t.split(",")]
    if any(not x for x in items):
        raise DistscopeError(f"axis {axis.value}={text!r} has an empty item")
    if axis.kind is Kind.TEXT:
        return tuple(items)
    return tuple(_number(axis, x) for x in items)


def parse_vary(text: str) -> AxisValues:
    """One `--vary name=values` flag."""
    name, eq, values = text.partition("=")
    if not eq:
        raise DistscopeError(f"--vary={text!r} must look like name=lo:hi:count or name=a,b,c")
    axis = Axis.parse(name, "--vary")
    return AxisValues(axis=axis, values=parse_values(axis, values))
