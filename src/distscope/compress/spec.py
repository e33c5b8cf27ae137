"""Compression methods as data, their bytes on the wire, and their cost in the step-time model (torch-free).

Wire format of a block-wise symmetric quantizer (ZeRO++ qwZ/qgZ, Wang et al. 2023; SDP4Bit, Jia et al.
2024): every group of `g` elements is sent as `g` integers of `b` bits plus one scale of `s` bits, so

    wire_bits_per_element = b + s / g
    ratio_vs(dtype)       = wire_bits_per_element / (8 * dtype_bytes)

e.g. int4, g=128, fp32 scales: (4 + 32/128) / 16 = 0.2656 of bf16; int4, g=128, fp16 scales:
(4 + 16/128) / 16 = 0.2578. Throughputs are "GB of uncompressed input processed per second".
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from distscope.errors import DistscopeError, closest

# bytes per element of the dtypes a scale or a payload can have (derive bytes from the dtype, never assume 2)
DTYPE_BYTES: dict[str, int] = {"float32": 4, "float16": 2, "bfloat16": 2, "float8": 1, "int8": 1}
BF16_BYTES = DTYPE_BYTES["bfloat16"]


class CompressionMethod(enum.Enum):
    """A way to put a tensor on the wire. Values are the names users type."""

    NONE = "none"
    BF16 = "bf16"
    FP16 = "fp16"  # IEEE half: torch's fp16_compress_hook (its bf16 hook needs NCCL)
    FP8 = "fp8"
    INT8 = "int8"
    INT4 = "int4"
    INT4_HS = "int4-hs"  # int4 after a 32-element Hadamard transform (SDP4Bit's smoothing)
    QWD_INT4 = "qwd-int4"  # int4 quantized weight *difference* all-gather (SDP4Bit qWD)
    TLQ_HS = "tlq-hs"  # two-level gradient reduce-scatter: int8 intra-node, int4+Hadamard inter-node
    POWERSGD = "powersgd"  # low-rank gradient compression (Vogels et al. 2019), torch's DDP hook


class CommClass(enum.Enum):
    """Which traffic a compression choice applies to."""

    DP_GRAD = "dp-grad"  # data-parallel gradient all-reduce / reduce-scatter
    WEIGHTS = "weights"  # sharded-DP (ZeRO-3/FSDP) weight all-gather
    TP = "tp"  # tensor-parallel activation all-reduce / all-gather


# user-facing aliases (the issue writes `weights=int4-diff`)
METHOD_ALIASES: dict[str, CompressionMethod] = {"int4-diff": CompressionMethod.QWD_INT4}


@dataclass(frozen=True, kw_only=True)
class MethodSpec:
    """Wire format of one method. `bits` None means the payload is not an integer code (powersgd)."""

    method: CompressionMethod
    bits: int | None
    group_size: int | None  # None: one scale per tensor (amortised to 0 bits per element)
    scale_dtype: str = "float32"
    quant_passes: int = 1  # quantize+dequantize rounds on the critical path (tlq-hs: 2)
    intra_node_bits: int | None = None  # tlq-hs: first (intra-node) level at int8
    fixed_ratio_vs_bf16: float | None = None  # methods whose size is not an integer code
    # a cast's payload is a float tensor the collective reduces as such: its dtype (a torch dtype name), whose
    # measured α-β prices the compressed collective where a profile has it (gloo sums halves at ~1/2 the
    # bytes per second of floats); None for integer codes
    wire_dtype: str | None = None
    source: str = ""

    def __post_init__(self) -> None:
        if self.bits is None and self.fixed_ratio_vs_bf16 is None:
            raise DistscopeError(f"method spec {self.method.value}: needs bits or fixed_ratio_vs_bf16")
        if self.group_size is not None and self.group_size <= 0:
            raise DistscopeError(f"method spec {self.method.value}: group_size={self.group_size} must be > 0")
        if self.scale_dtype not in DTYPE_BYTES:
            raise DistscopeError(
                f"method spec {self.method.value}: scale_dtype={self.scale_dtype!r}; "
                f"valid: {', '.join(DTYPE_BYTES)}"
            )


def wire_bits_per_element(spec: MethodSpec) -> float:
    """b + s/g bits per element (module docstring). Raises for methods without an integer code."""
    if spec.bits is None:
        raise DistscopeError(f"method {spec.method.value}: has no per-element bit width")
    scale_bits = 0.0 if spec.group_size is None else 8 * DTYPE_BYTES[spec.scale_dtype] / spec.group_size
    return spec.bits + scale_bits


def ratio_vs(spec: MethodSpec, dtype_bytes: int) -> float:
    """Compressed bytes / uncompressed bytes for a tensor whose elements take `dtype_bytes`."""
    if dtype_bytes <= 0:
        raise DistscopeError(f"dtype_bytes={dtype_bytes} must be > 0")
    if spec.fixed_ratio_vs_bf16 is not None:
        return spec.fixed_ratio_vs_bf16 * BF16_BYTES / dtype_bytes
    return wire_bits_per_element(spec) / (8 * dtype_bytes)


def ratio_vs_bf16(spec: MethodSpec) -> float:
    return ratio_vs(spec, BF16_BYTES)


def powersgd_ratio_vs_bf16(rows: int, cols: int, rank: int, factor_dtype_bytes: int = 4) -> float:
    """PowerSGD sends P (rows x rank) and Q (cols x rank) instead of the rows x cols gradient:
    ratio = rank * (rows + cols) * factor_bytes / (rows * cols * 2). torch's hook keeps factors in the
    gradient dtype (fp32 in plain DDP), hence factor_dtype_bytes=4 by default."""
    if min(rows, cols, rank) <= 0:
        raise DistscopeError(f"powersgd: rows={rows}, cols={cols}, rank={rank} must all be > 0")
    return rank * (rows + cols) * factor_dtype_bytes / (rows * cols * BF16_BYTES)


# Group sizes from the papers: SDP4Bit uses 2048 for weights and 128 for gradients; ZeRO++ ~4k-8k blocks.
GRAD_GROUP = 128
WEIGHT_GROUP = 2048
# Representative PowerSGD shape: a 4096x4096 weight at rank 4 (ratio 0.0039); pass real shapes when known.
POWERSGD_DEFAULT_RATIO = powersgd_ratio_vs_bf16(4096, 4096, 4)

METHOD_SPECS: dict[CompressionMethod, MethodSpec] = {
    CompressionMethod.NONE: MethodSpec(method=CompressionMethod.NONE, bits=16, group_size=None,
                                       source="bf16 baseline"),
    CompressionMethod.BF16: MethodSpec(method=CompressionMethod.BF16, bits=16, group_size=None,
                                       wire_dtype="bfloat16", source="cast"),
    CompressionMethod.FP16: MethodSpec(method=CompressionMethod.FP16, bits=16, group_size=None,
                                       wire_dtype="float16", source="cast (torch fp16_compress_hook)"),
    CompressionMethod.FP8: MethodSpec(method=CompressionMethod.FP8, bits=8, group_size=None,
                                      source="per-tensor scaled e4m3 cast"),
    CompressionMethod.INT8: MethodSpec(method=CompressionMethod.INT8, bits=8, group_size=WEIGHT_GROUP,
                                       source="ZeRO++ qwZ"),
    CompressionMethod.INT4: MethodSpec(method=CompressionMethod.INT4, bits=4, group_size=GRAD_GROUP,
                                       source="ZeRO++ qgZ / SDP4Bit"),
    CompressionMethod.INT4_HS: MethodSpec(method=CompressionMethod.INT4_HS, bits=4, group_size=GRAD_GROUP,
                                          source="SDP4Bit Hadamard smoothing"),
    CompressionMethod.QWD_INT4: MethodSpec(method=CompressionMethod.QWD_INT4, bits=4,
                                           group_size=WEIGHT_GROUP, source="SDP4Bit qWD"),
    CompressionMethod.TLQ_HS: MethodSpec(method=CompressionMethod.TLQ_HS, bits=4, group_size=GRAD_GROUP,
                                         quant_passes=2, intra_node_bits=8, source="SDP4Bit TLq-HS"),
    CompressionMethod.POWERSGD: MethodSpec(method=CompressionMethod.POWERSGD, bits=None, group_size=None,
                                           fixed_ratio_vs_bf16=POWERSGD_DEFAULT_RATIO,
                                           source="Vogels et al. 2019, torch powerSGD_hook"),
}

# Default quantize / dequantize throughputs, GB of uncompressed input per second.
# CPU, one thread: measured by `distscope compress bench` (torch 2.13 CPU, fp32 input, 16 MiB, best of 5)
# on the shared 2-core CI box: int4 g=128 1.45 / 2.8 GB/s, int4-hs 0.99 / 1.45, int8 g=2048 0.79 / 1.04,
# tlq-hs (both levels) 0.63 / 0.61. Defaults: about the int8 figures, i.e. a conservative single core.
CPU_QUANT_GBps = 0.8
CPU_DEQUANT_GBps = 1.0
# A cast (bf16, fp16) is one streaming pass, not a quantizer: the same bench's bf16 row measured 17.1 GB/s
# down (x.bfloat16()) and 16.0 GB/s back (.float()), 4 Mi fp32 elements, best of 5 (2026-11-27), and
# fp32 -> fp16 -> fp32 copies of 4-26 MB ran at 16-17 GB/s both ways on the same host.
CPU_CAST_GBps = (17.0, 16.0)


def cpu_codec_GBps(method: CompressionMethod) -> tuple[float, float]:
    """(quantize, dequantize) GB/s of uncompressed input on one CPU core: a cast streams, a quantizer
    computes group scales and codes (the figures above)."""
    if METHOD_SPECS[method].wire_dtype is not None:
        return CPU_CAST_GBps
    return CPU_QUANT_GBps, CPU_DEQUANT_GBps


def hbm_bound_GBps(hbm_GBps: float, efficiency: float, in_bytes_per_element: float,
                   out_bytes_per_element: float) -> float:
    """Throughput of a memory-bound elementwise kernel, in GB of *input* per second:
    it moves in+out bytes per element at efficiency*HBM, so input GB/s = eff*HBM * in / (in + out)."""
    if hbm_GBps <= 0 or not 0 < efficiency <= 1:
        raise DistscopeError(f"hbm_GBps={hbm_GBps}, efficiency={efficiency}: need > 0 and in (0, 1]")
    return efficiency * hbm_GBps * in_bytes_per_element / (in_bytes_per_element + out_bytes_per_element)


# GPU default: H100 SXM HBM3 3350 GB/s at 60% achieved (elementwise kernels with a per-group absmax
# reduction typically reach 50-70% of peak); bf16 in (2 B) -> int4+fp32/128 scale out (0.53 B):
# 0.6 * 3350 * 2 / 2.53 = 1589 GB/s; dequant is the mirror (in 0.53 B code, out 2 B bf16), expressed per
# uncompressed GB: 0.6 * 3350 * 2 / 2.53 as well.
GPU_QUANT_GBps = hbm_bound_GBps(3350.0, 0.6, 2.0, 0.5 + 4 / 128)
GPU_DEQUANT_GBps = GPU_QUANT_GBps


@dataclass(frozen=True, kw_only=True)
class CompressedCost:
    """Result of `compressed_comm_cost`."""

    comm_bytes: float
    comm_s: float
    quant_s: float
    dequant_s: float

    @property
    def total_s(self) -> float:
        return self.comm_s + self.quant_s + self.dequant_s


def compressed_comm_cost(*, uncompressed_bytes: float, uncompressed_comm_s: float,
                         method: CompressionMethod, uncompressed_dtype_bytes: int = BF16_BYTES,
                         quant_GBps: float | None = None, dequant_GBps: float | None = None,
                         latency_s: float = 0.0, spec: MethodSpec | None = None) -> CompressedCost:
    """Cost of one collective after compression (alpha-beta with the beta term scaled by the ratio):

        bytes'  = bytes * r,               r = ratio_vs(spec, dtype_bytes)
        comm_s' = latency + (comm_s - latency) * r
        quant_s = passes * bytes / quant_GBps,   dequant_s = passes * bytes / dequant_GBps

    `bytes` is what the uncompressed collective moves per rank; quantization reads that many input bytes
    (an all-gather's receivers dequantize the gathered buffer, same size). TLq-HS (2 passes) is costed
    at its inter-node int4 ratio, the level that dominates on multi-node clusters; its intra-node level
    runs at int8 (spec.intra_node_bits). `none` returns the input unchanged. Codec rates default to one
    CPU core's (cpu_codec_GBps).
    """
    if uncompressed_bytes < 0 or uncompressed_comm_s < 0:
        raise DistscopeError(f"uncompressed_bytes={uncompressed_bytes}, uncompressed_comm_s="
                             f"{uncompressed_comm_s}: must be >= 0")
    cpu_q, cpu_dq = cpu_codec_GBps(method)
    quant_GBps = cpu_q if quant_GBps is None else quant_GBps
    dequant_GBps = cpu_dq if dequant_GBps is None else dequant_GBps
    if quant_GBps <= 0 or dequant_GBps <= 0:
        raise DistscopeError(f"quant_GBps={quant_GBps}, dequant_GBps={dequant_GBps}: must be > 0")
    if not 0 <= latency_s <= uncompressed_comm_s:
        raise DistscopeError(f"latency_s={latency_s} must be in [0, uncompressed_comm_s]")
    if method is CompressionMethod.NONE:
        return CompressedCost(comm_bytes=uncompressed_bytes, comm_s=uncompressed_comm_s, quant_s=0.0,
                              dequant_s=0.0)
    spec = spec or METHOD_SPECS[method]
    r = ratio_vs(spec, uncompressed_dtype_bytes)
    gb = uncompressed_bytes / 1e9
    return CompressedCost(
        comm_bytes=uncompressed_bytes * r,
        comm_s=latency_s + (uncompressed_comm_s - latency_s) * r,
        quant_s=spec.quant_passes * gb / quant_GBps,
        dequant_s=spec.quant_passes * gb / dequant_GBps,
    )


VALID_METHODS: dict[CommClass, tuple[CompressionMethod, ...]] = {
    CommClass.DP_GRAD: (CompressionMethod.NONE, CompressionMethod.BF16, CompressionMethod.FP8,
                        CompressionMethod.INT8, CompressionMethod.INT4, CompressionMethod.INT4_HS,
                        CompressionMethod.TLQ_HS, CompressionMethod.POWERSGD),
    CommClass.WEIGHTS: (CompressionMethod.NONE, CompressionMethod.BF16, CompressionMethod.FP8,
                        CompressionMethod.INT8, CompressionMethod.INT4, CompressionMethod.QWD_INT4),
    CommClass.TP: (CompressionMethod.NONE, CompressionMethod.BF16, CompressionMethod.FP8,
                   CompressionMethod.INT8, CompressionMethod.INT4),
}


@dataclass(frozen=True, kw_only=True)
class CompressionConfig:
    """Which method each communication class uses. Unlisted classes stay uncompressed."""

    dp_grad: CompressionMethod = CompressionMethod.NONE
    weights: CompressionMethod = CompressionMethod.NONE
    tp: CompressionMethod = CompressionMethod.NONE
    by_class: dict[CommClass, CompressionMethod] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        mapping = {CommClass.DP_GRAD: self.dp_grad, CommClass.WEIGHTS: self.weights, CommClass.TP: self.tp}
        for cls, method in mapping.items():
            if method not in VALID_METHODS[cls]:
                valid = ", ".join(m.value for m in VALID_METHODS[cls])
                raise DistscopeError(f"compress: {cls.value}={method.value} is not valid for {cls.value}; "
                                     f"valid: {valid}")
        object.__setattr__(self, "by_class", mapping)

    def method_for(self, comm_class: CommClass) -> CompressionMethod:
        return self.by_class[comm_class]


def parse_method(text: str, *, key: str = "method") -> CompressionMethod:
    """A method name (or alias) -> enum; one-line DistscopeError naming key and value otherwise."""
    value = text.strip().lower()
    if value in METHOD_ALIASES:
        return METHOD_ALIASES[value]
    names = [m.value for m in CompressionMethod] + list(METHOD_ALIASES)
    for m in CompressionMethod:
        if m.value == value:
            return m
    raise DistscopeError(f"compress: {key}={text!r} is not a method; valid: {', '.join(names)}"
                         f"{closest(value, names)}")


def parse_compression_config(text: str) -> CompressionConfig:
    """Parse `dp-grad=int4-hs,weights=int4-diff,tp=fp8` (any subset, any order; '' or 'none' = none)."""
    if text.strip().lower() in ("", "none"):
        return CompressionConfig()
    classes = [c.value for c in CommClass]
    chosen: dict[CommClass, CompressionMethod] = {}
    for item in text.split(","):
        if "=" not in item:
            raise DistscopeError(f"compress: {item.strip()!r} must look like CLASS=METHOD; "
                                 f"classes: {', '.join(classes)}")
        key, value = (s.strip() for s in item.split("=", 1))
        try:
            cls = CommClass(key.lower())
        except ValueError:
            raise DistscopeError(f"compress: class {key!r} is not valid; valid: {', '.join(classes)}"
                                 f"{closest(key.lower(), classes)}") from None
        if cls in chosen:
            raise DistscopeError(f"compress: class {key!r} given twice in {text!r}")
        chosen[cls] = parse_method(value, key=key)
    return CompressionConfig(
        dp_grad=chosen.get(CommClass.DP_GRAD, CompressionMethod.NONE),
        weights=chosen.get(CommClass.WEIGHTS, CompressionMethod.NONE),
        tp=chosen.get(CommClass.TP, CompressionMethod.NONE),
    )
