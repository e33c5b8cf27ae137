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


class Scaling(Enum):
    """How a low-precision training recipe scales its tensors: what decides the quantization traffic
    around each GEMM (model/fp8.py prices it). `block` is the elements that share one scale along the
    GEMM's reduction dimension (0 = one scale per tensor), `scale_bytes` one scale's size, `amax_reads`
    the extra reads of the BF16 source before quantizing (a just-in-time amax)."""

    NONE = "none"  # BF16 / FP16 GEMMs: no quantization
    STACK = "stack"  # plain `fp8`: the software profile's per-tensor recipe (delayed, or current when it says so)
    # Transformer Engine DelayedScaling: per-tensor scale from an amax history, one fused update per pass
    DELAYED = "delayed"
    # TE Float8CurrentScaling (Megatron-Bridge "FP8-CS"): per-tensor scale from this tensor's amax
    CURRENT = "current"
    # DeepSeek-V3 (arXiv 2412.19437 sec. 3.3.2): 1x128 tiles for activations and gradients, 128x128 blocks
    # for weights, fp32 scales (TE Float8BlockScaling, DeepGEMM)
    BLOCKWISE = "blockwise"
    # OCP Microscaling v1.0 MXFP8: 1x32 blocks with E8M0 (1-byte) scales, native in Blackwell tensor
    # cores (TE MXFP8BlockScaling; Megatron-Bridge "FP8-MX")
    MX = "mx"
    # NVFP4 (NVIDIA, "Pretraining LLMs with NVFP4", arXiv 2509.25149): E2M1 elements, 1x16 blocks with
    # E4M3 scales plus one fp32 scale per tensor (its amax is a read of the source), 16x16 blocks for
    # weights, and a random Hadamard transform of the wgrad operands (a second amax over the transformed copy)
    NVFP4 = "nvfp4"

    block: int
    scale_bytes: float
    amax_reads: int

    @property
    def block_scaled(self) -> bool:
        return self.block > 0


for _sc, (_block, _sbytes, _amax) in {
        Scaling.NONE: (0, 0.0, 0), Scaling.STACK: (0, 4.0, 0), Scaling.DELAYED: (0, 4.0, 0),
        Scaling.CURRENT: (0, 4.0, 1), Scaling.BLOCKWISE: (128, 4.0, 0), Scaling.MX: (32, 1.0, 0),
        Scaling.NVFP4: (16, 1.0, 2)}.items():
    _sc.block, _sc.scale_bytes, _sc.amax_reads = _block, _sbytes, _amax


class Precision(Enum):
    """Training precision recipe (mixed precision with fp32 master weights and Adam state).

    The low-precision recipes run the linear layers' GEMMs in FP8 or FP4 with BF16 activations
    elsewhere, as in Transformer Engine; they differ in how tensors are scaled (`Scaling`). Plain `fp8`
    is the stack's per-tensor recipe (the software profile says delayed or current scaling).
    """

    FP16 = "fp16"
    BF16 = "bf16"
    FP8 = "fp8"
    FP8_DELAYED = "fp8-delayed"
    FP8_CURRENT = "fp8-cs"
    FP8_BLOCKWISE = "fp8-blockwise"
    MXFP8 = "mxfp8"
    NVFP4 = "nvfp4"

    # set below as plain attributes (read millions of times per plan search):
    gemm_dtype: DType  # the GEMMs' input dtype
    activation_dtype: DType  # activations, weights in compute, p2p and TP messages (TE keeps these in bf16)
    scaling: Scaling
    low_precision: bool  # GEMM inputs narrower than the activations: the run quantizes (model/fp8.py)

    @classmethod
    def parse(cls, value: str, field: str = "precision") -> Precision:
        key = value.strip().lower()
        key = _PRECISION_ALIASES.get(key, key)
        try:
            return cls(key)
        except ValueError:
            raise DistscopeError(
                f"{field}={value!r} is not a precision; valid: {', '.join(p.value for p in cls)}"
            ) from None


# the names frameworks print for the same recipes (Megatron-Bridge's table: FP8-CS, FP8-MX); no bare "fp4": it
# could mean NVIDIA NVFP4 or OCP MXFP4 (MI355X)
_PRECISION_ALIASES = {"fp8-current": "fp8-cs", "fp8-mx": "mxfp8", "fp8-block": "fp8-blockwise",
                      "fp8-delayed-scaling": "fp8-delayed"}

for _prec, (_gemm, _act, _scaling) in {
        Precision.FP16: (DType.FP16, DType.FP16, Scaling.NONE), Precision.BF16: (DType.BF16, DType.BF16, Scaling.NONE),
        Precision.FP8: (DType.FP8, DType.BF16, Scaling.STACK),
        Precision.FP8_DELAYED: (DType.FP8, DType.BF16, Scaling.DELAYED),
        Precision.FP8_CURRENT: (DType.FP8, DType.BF16, Scaling.CURRENT),
        Precision.FP8_BLOCKWISE: (DType.FP8, DType.BF16, Scaling.BLOCKWISE),
        Precision.MXFP8: (DType.FP8, DType.BF16, Scaling.MX),
        Precision.NVFP4: (DType.FP4, DType.BF16, Scaling.NVFP4)}.items():
    _prec.gemm_dtype, _prec.activation_dtype, _prec.scaling = _gemm, _act, _scaling
    _prec.low_precision = _scaling is not Scaling.NONE
