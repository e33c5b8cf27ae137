"""Accelerator devices: peak dense FLOP/s per dtype, HBM capacity and bandwidth (data/devices.json)."""

from __future__ import annotations

import dataclasses
import functools
import json
from importlib import resources
from typing import TYPE_CHECKING, Any

from distscope.dtypes import DType
from distscope.errors import DistscopeError, closest
from distscope.hashing import cached_hash

if TYPE_CHECKING:
    from distscope.measure.kernel_profile import KernelProfile

GiB = 2**30


@cached_hash
@dataclasses.dataclass(frozen=True, kw_only=True)
class Device:
    name: str
    peak_flops: tuple[tuple[DType, float], ...]  # dense FLOP/s per dtype; 0 = unsupported
    hbm_bytes: float
    hbm_Bps: float
    usable_bytes: float = 0.0  # the total the driver reports (nvidia-smi/rocm-smi); 0 = hbm_bytes
    source: str = ""
    usable_source: str = ""
    # Measured kernel tables (`distscope measure kernels`, applied with --profile): where they cover a
    # kernel, they replace the efficiency model (model/efficiency.py). Hashed by identity.
    kernels: KernelProfile | None = None

    def __post_init__(self) -> None:
        if self.usable_bytes <= 0:
            object.__setattr__(self, "usable_bytes", self.hbm_bytes)

    def flops(self, dtype: DType) -> float:
        peak = dict(self.peak_flops).get(dtype, 0.0)
        if peak <= 0:
            supported = [d.value for d, v in self.peak_flops if v > 0]
            raise DistscopeError(f"device {self.name} has no {dtype.value} peak; supported: {', '.join(supported)}")
        return peak


def device_from_dict(name: str, d: dict[str, Any]) -> Device:
    return Device(
        name=name,
        peak_flops=tuple((DType(k), float(v) * 1e12) for k, v in d["tflops"].items()),
        hbm_bytes=float(d["hbm_GiB"]) * GiB,
        hbm_Bps=float(d["hbm_GBps"]) * 1e9,
        usable_bytes=float(d.get("usable_MiB", 0)) * 2**20,
        source=d.get("source", ""),
        usable_source=d.get("usable_source", ""),
    )


@functools.cache
def _devices() -> dict[str, Device]:
    raw = json.loads(resources.files("distscope.system").joinpath("data/devices.json").read_text())
    return {k: device_from_dict(k, v) for k, v in raw.items() if not k.startswith("_")}


def device_names() -> list[str]:
    return list(_devices())


def get_device(name: str) -> Device:
    key = name.strip().lower()
    try:
        return _devices()[key]
    except KeyError:
        raise DistscopeError(f"gpu={name!r} is not a known device{closest(key, _devices())}") from None
