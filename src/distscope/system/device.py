"""Accelerator devices: peak dense FLOP/s per dtype, HBM capacity and bandwidth (data/devices.json)."""

from __future__ import annotations

import dataclasses
import functools
import json
from importlib import resources
from typing import TYPE_CHECKING, Any

from distscope.dtypes import DType, Precision, Scaling
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
    # block-scaled formats its tensor cores run natively (OCP MX 1x32 E8M0, NVIDIA NVFP4 1x16 E4M3):
    # Blackwell and CDNA4 only; per-tensor and DeepSeek-style blockwise FP8 need only an FP8 peak
    block_scaled: frozenset[Scaling] = frozenset()
    # FP8 GEMMs in any operand layout (Transformer Engine is_non_tn_fp8_gemm_supported: sm_100 and up),
    # so per-tensor FP8 needs no transposed copies; Hopper and Ada take only "TN"
    fp8_non_tn: bool = False
    # Measured kernel tables (`distscope measure kernels`, applied with --profile): where they cover a
    # kernel, they replace the efficiency model (model/efficiency.py). Hashed by identity.
    kernels: KernelProfile | None = None
    # host seconds to issue one eager op for this GPU (--host-op-us); None: model/host.py's OP_S
    host_op_s: float | None = None

    def __post_init__(self) -> None:
        if self.usable_bytes <= 0:
            object.__setattr__(self, "usable_bytes", self.hbm_bytes)

    def flops(self, dtype: DType) -> float:
        peak = dict(self.peak_flops).get(dtype, 0.0)
        if peak <= 0:
            supported = [d.value for d, v in self.peak_flops if v > 0]
            raise DistscopeError(f"device {self.name} has no {dtype.value} peak; supported: {', '.join(supported)}")
        return peak

    def supports(self, precision: Precision) -> bool:
        """Whether the device trains in `precision`: a peak in its GEMM dtype and, for the block-scaled
        recipes, native support of the format."""
        if dict(self.peak_flops).get(precision.gemm_dtype, 0.0) <= 0:
            return False
        return precision.scaling not in (Scaling.MX, Scaling.NVFP4) or precision.scaling in self.block_scaled

    def check_precision(self, precision: Precision, field: str = "--precision") -> Precision:
        if not self.supports(precision):
            valid = ", ".join(p.value for p in Precision if self.supports(p))
            raise DistscopeError(f"{field}={precision.value} is not supported by {self.name}; it trains in {valid}")
        return precision


def device_from_dict(name: str, d: dict[str, Any]) -> Device:
    return Device(
        name=name,
        peak_flops=tuple((DType(k), float(v) * 1e12) for k, v in d["tflops"].items()),
        hbm_bytes=float(d["hbm_GiB"]) * GiB,
        hbm_Bps=float(d["hbm_GBps"]) * 1e9,
        usable_bytes=float(d.get("usable_MiB", 0)) * 2**20,
        source=d.get("source", ""),
        usable_source=d.get("usable_source", ""),
        block_scaled=frozenset(Scaling(x) for x in d.get("block_scaled", ())),
        fp8_non_tn=bool(d.get("fp8_non_tn", False)),
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
