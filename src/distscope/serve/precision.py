"""Serving precisions: the dtype of the weights, of the activations fed to GEMMs, and of the KV cache.

Names are parsed once here. Every dtype spelling of data/validation/serving_runs.csv is accepted,
including the annotated ones (`bf16(auto)`, `fp8(assumed)`: the annotation is provenance, not a dtype).

Which tensor-core path a GEMM takes follows what the serving stacks do:
- W == A in {fp8, int8, fp4, int4} and the device has that peak: the GEMM runs in it (FP8 / SmoothQuant
  W8A8 / NVFP4 W4A4);
- otherwise the weights are dequantised inside the kernel (weight-only quantisation: Marlin W8A16 and
  W4A16 in vLLM, AWQ/GPTQ), and the math runs in the 16-bit activation dtype. A100 has no FP8 tensor
  cores, so an FP8 checkpoint runs there as W8A16 (serving_runs.csv R081 notes).
Bytes streamed per weight include the block scales: NVFP4 one fp8 scale per 16 elements (+1/16 B),
int4 AWQ/GPTQ one fp16 scale and zero per 128-element group (+4/128 B); fp8/int8 per-channel scales are
negligible.
"""

from __future__ import annotations

import dataclasses
import re

from distscope.dtypes import DType
from distscope.errors import DistscopeError
from distscope.system.device import Device

SERVE_DTYPES = (DType.FP32, DType.FP16, DType.BF16, DType.FP8, DType.INT8, DType.INT4, DType.FP4)
_ALIASES = {
    "float32": "fp32", "float16": "fp16", "half": "fp16", "bfloat16": "bf16",
    "fp8_e4m3": "fp8", "fp8-e4m3": "fp8", "e4m3": "fp8", "fp8_e5m2": "fp8", "e5m2": "fp8",
    "nvfp4": "fp4", "mxfp4": "fp4", "w4": "int4", "w8": "int8", "awq": "int4", "gptq": "int4",
}
_SCALE_BYTES = {DType.FP4: 1 / 16, DType.INT4: 4 / 128}
_NATIVE = (DType.FP8, DType.INT8, DType.FP4, DType.INT4)


def parse_dtype(value: str, field: str) -> DType:
    """A serving dtype from a flag or CSV cell; `auto` / `(…)` annotations are dropped."""
    v = re.sub(r"\(.*?\)", "", value).strip().lower()
    v = _ALIASES.get(v, v)
    for d in SERVE_DTYPES:
        if d.value == v:
            return d
    raise DistscopeError(f"{field}={value!r} is not a serving dtype; valid: {', '.join(d.value for d in SERVE_DTYPES)}")


def weight_bytes(d: DType) -> float:
    """Bytes streamed per weight element, block scales included (see module doc)."""
    return d.bytes + _SCALE_BYTES.get(d, 0.0)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ServePrecision:
    weights: DType = DType.BF16
    activations: DType = DType.BF16
    kv: DType = DType.BF16

    def __post_init__(self) -> None:
        if self.activations in (DType.INT4,) and self.weights is not DType.INT4:
            raise DistscopeError(f"act={self.activations.value} needs weights=int4 (W4A4); got weights={self.weights.value}")

    @property
    def act16(self) -> DType:
        """The dtype activations travel in between kernels and over TP links (16-bit; TRT-LLM/vLLM FP8
        recipes quantise GEMM inputs on the fly and keep the residual stream in fp16/bf16)."""
        return self.activations if self.activations in (DType.FP16, DType.BF16, DType.FP32) else DType.BF16

    def gemm_dtype(self, device: Device) -> DType:
        """The tensor-core dtype the linear layers run in on `device` (see module doc)."""
        if self.weights is self.activations and self.weights in _NATIVE and _has(device, self.weights):
            return self.weights
        return self.act16

    def check(self, device: Device) -> None:
        """fp4/int4 *activations* need native tensor cores; weight-only formats run anywhere."""
        if self.activations in (DType.FP4, DType.INT4) and not _has(device, self.activations):
            have = [d.value for d, v in device.peak_flops if v > 0]
            raise DistscopeError(f"act={self.activations.value}: device {device.name} has no {self.activations.value} "
                                 f"tensor cores; it has {', '.join(have)}")

    def label(self) -> str:
        return f"w={self.weights.value} a={self.activations.value} kv={self.kv.value}"


def _has(device: Device, d: DType) -> bool:
    return dict(device.peak_flops).get(d, 0.0) > 0
