"""Numeric formats and their sizes. Bytes always come from here, never from an assumed 2."""

from __future__ import annotations

from distscope.enums import Enum
from distscope.errors import DistscopeError, closest


class DType(Enum):
    """A storage/compute format. Value is the CLI/CSV spelling."""

    FP32 = "fp32"
    TF32 = "tf32"
    FP16 = "fp16"
    BF16 = "bf16"
    FP8 = "fp8"
    INT8 = "int8"
    INT4 = "int4"
    FP4 = "fp4"  # OCP MXFP4 / NVIDIA NVFP4 element (E2M1); block scales are counted where weights are sized

    # bytes per element, set below: a plain attribute, not a property or a dict lookup, because the
    # estimator reads it millions of times per plan search
    bytes: float

    @classmethod
    def parse(cls, value: str, field: str = "dtype") -> DType:
        try:
            return cls(value.strip().lower())
        except ValueError:
            raise DistscopeError(
                f"{field}={value!r} is not a dtype{closest(value, [d.value for d in cls])}"
            ) from None


_BYTES: dict[DType, float] = {
    DType.FP32: 4.0,
    DType.TF32: 4.0,  # stored as fp32
    DType.FP16: 2.0,
    DType.BF16: 2.0,
    DType.FP8: 1.0,
    DType.INT8: 1.0,
    DType.INT4: 0.5,
    DType.FP4: 0.5,
}
for _member, _size in _BYTES.items():
    _member.bytes = _size


class Precision(Enum):
    """Training precision recipe (mixed precision with fp32 master weights and Adam state).

    FP8 means FP8 GEMMs with bf16 activations elsewhere, as in Transformer Engine.
    """

    FP16 = "fp16"
    BF16 = "bf16"
    FP8 = "fp8"

    # set below as plain attributes (read millions of times per plan search):
    gemm_dtype: DType  # the GEMMs' input dtype
    activation_dtype: DType  # activations, weights in compute, p2p and TP messages (TE keeps these in bf16)

    @classmethod
    def parse(cls, value: str, field: str = "precision") -> Precision:
        try:
            return cls(value.strip().lower())
        except ValueError:
            raise DistscopeError(
                f"{field}={value!r} is not a precision; valid: {', '.join(p.value for p in cls)}"
            ) from None


for _prec, (_gemm, _act) in {Precision.FP16: (DType.FP16, DType.FP16), Precision.BF16: (DType.BF16, DType.BF16),
                             Precision.FP8: (DType.FP8, DType.BF16)}.items():
    _prec.gemm_dtype, _prec.activation_dtype = _gemm, _act
