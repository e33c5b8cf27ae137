"""Block-wise symmetric int8/int4 quantization of torch tensors (CPU and GPU alike).

Per group of g elements (ZeRO++ qwZ/qgZ; SDP4Bit uses levels -7..7):
    qmax = 2^(b-1) - 1,   scale = absmax(group) / qmax   (rounded *up* into the scale dtype)
    RTN:        q = clamp(round(x / scale), -qmax, qmax)         |x - q*scale| <= scale / 2
    stochastic: q = clamp(floor(x / scale + u), ...), u~U[0,1)   E[q*scale] = x, |x - q*scale| < scale
int4 codes are stored as q + 8 (1..15) packed two per byte (low nibble first). With `hadamard`, groups
are first transformed by H_32/sqrt(32) and the bounds hold in the transformed domain; the inverse is
orthonormal, so the L2 norm of each 32-block error is preserved.

Wire layout of one row of L elements (L a multiple of g): [codes: L*b/8 bytes][scales: L/g * scale bytes].
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

import torch

from distscope.compress.hadamard import HADAMARD_BLOCK, hadamard_blocks
from distscope.errors import DistscopeError

SCALE_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


class Rounding(enum.Enum):
    RTN = "rtn"
    STOCHASTIC = "stochastic"


@dataclass(frozen=True, kw_only=True)
class QuantConfig:
    bits: int
    group_size: int
    rounding: Rounding = Rounding.RTN
    hadamard: bool = False
    scale_dtype: str = "float32"

    def __post_init__(self) -> None:
        if self.bits not in (4, 8):
            raise DistscopeError(f"quantizer: bits={self.bits} is not supported; valid: 4, 8")
        if self.group_size <= 0:
            raise DistscopeError(f"quantizer: group_size={self.group_size} must be > 0")
        if self.bits == 4 and self.group_size % 2:
            raise DistscopeError(f"quantizer: group_size={self.group_size} must be even for int4 packing")
        if self.hadamard and self.group_size % HADAMARD_BLOCK:
            raise DistscopeError(f"quantizer: group_size={self.group_size} must be a multiple of "
                                 f"{HADAMARD_BLOCK} with hadamard")
        if self.scale_dtype not in SCALE_DTYPES:
            raise DistscopeError(f"quantizer: scale_dtype={self.scale_dtype!r}; valid: "
                                 f"{', '.join(SCALE_DTYPES)}")

    @property
    def qmax(self) -> int:
        return 2 ** (self.bits - 1) - 1

    @property
    def scale_torch_dtype(self) -> torch.dtype:
        return SCALE_DTYPES[self.scale_dtype]

    def padded_len(self, numel: int) -> int:
        return math.ceil(numel / self.group_size) * self.group_size

    def wire_bytes(self, row_len: int) -> int:
        """Bytes of one encoded row of `row_len` elements (a multiple of group_size)."""
        if row_len % self.group_size:
            raise DistscopeError(f"quantizer: row length {row_len} is not a multiple of {self.group_size}")
        scale_bytes = torch.empty((), dtype=self.scale_torch_dtype).element_size()
        return row_len * self.bits // 8 + row_len // self.group_size * scale_bytes


def pack_int4(codes: torch.Tensor) -> torch.Tensor:
    """uint8 codes in 0..15, last dim even -> uint8 with two codes per byte (low nibble = even index)."""
    return codes[..., 0::2] | (codes[..., 1::2] << 4)


def unpack_int4(packed: torch.Tensor) -> torch.Tensor:
    out = torch.stack([packed & 0xF, packed >> 4], dim=-1)
    return out.reshape(*packed.shape[:-1], packed.shape[-1] * 2)


def _scales(groups: torch.Tensor, cfg: QuantConfig) -> torch.Tensor:
    # groups: (R, G, g) fp32 -> scales (R, G) in the scale dtype, never smaller than absmax/qmax
    absmax = groups.abs().amax(dim=-1)
    exact = absmax / cfg.qmax
    s = exact.to(cfg.scale_torch_dtype)
    if cfg.scale_torch_dtype != torch.float32:
        too_small = s.float() < exact
        s = torch.where(too_small, torch.nextafter(s, torch.full_like(s, math.inf)), s)
    return s


def encode(x: torch.Tensor, cfg: QuantConfig, generator: torch.Generator | None = None) -> torch.Tensor:
    """(R, L) float tensor, L % group_size == 0 -> (R, wire_bytes(L)) uint8."""
    rows, length = x.shape
    if length % cfg.group_size:
        raise DistscopeError(f"quantizer: row length {length} is not a multiple of {cfg.group_size}")
    xf = x.float()
    if cfg.hadamard:
        xf = hadamard_blocks(xf)
    groups = xf.reshape(rows, length // cfg.group_size, cfg.group_size)
    s = _scales(groups, cfg)
    sf = s.float()
    y = groups / torch.where(sf == 0, torch.ones_like(sf), sf).unsqueeze(-1)
    if cfg.rounding is Rounding.RTN:
        q = torch.round(y)
    else:
        u = torch.rand(y.shape, generator=generator, device=y.device, dtype=y.dtype)
        q = torch.floor(y + u)
    q = q.clamp_(-cfg.qmax, cfg.qmax).reshape(rows, length)
    # int8: two's complement bytes; int4: offset codes q+8 in 1..15, two per byte
    codes = q.to(torch.int8).view(torch.uint8) if cfg.bits == 8 else pack_int4((q + 8).to(torch.uint8))
    scale_bytes = s.contiguous().view(torch.uint8).reshape(rows, -1)
    return torch.cat([codes, scale_bytes], dim=1)


def decode(wire: torch.Tensor, length: int, cfg: QuantConfig) -> torch.Tensor:
    """(R, wire_bytes(length)) uint8 -> (R, length) float32."""
    rows = wire.shape[0]
    code_bytes = length * cfg.bits // 8
    if wire.shape[1] != cfg.wire_bytes(length):
        raise DistscopeError(f"quantizer: wire row has {wire.shape[1]} bytes, expected "
                             f"{cfg.wire_bytes(length)} for {length} elements")
    if length == 0:
        return torch.zeros(rows, 0, device=wire.device)
    codes = wire[:, :code_bytes]
    s = wire[:, code_bytes:].contiguous().view(cfg.scale_torch_dtype).float()
    q = codes.contiguous().view(torch.int8).float() if cfg.bits == 8 else unpack_int4(codes).float() - 8
    out = (q.reshape(rows, -1, cfg.group_size) * s.unsqueeze(-1)).reshape(rows, length)
    if cfg.hadamard:
        out = hadamard_blocks(out)
    return out


@dataclass(frozen=True, kw_only=True)
class Quantized:
    """An encoded tensor of any shape: `wire` holds codes and scales of the zero-padded flat tensor."""

    wire: torch.Tensor  # (1, wire_bytes(padded)) uint8
    shape: torch.Size
    dtype: torch.dtype
    config: QuantConfig

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.wire.numel()


def quantize(x: torch.Tensor, cfg: QuantConfig, generator: torch.Generator | None = None) -> Quantized:
    flat = x.reshape(1, -1)
    pad = cfg.padded_len(flat.shape[1]) - flat.shape[1]
    if pad:
        flat = torch.nn.functional.pad(flat.float(), (0, pad))
    return Quantized(wire=encode(flat, cfg, generator), shape=x.shape, dtype=x.dtype, config=cfg)


def dequantize(q: Quantized) -> torch.Tensor:
    out = decode(q.wire, q.config.padded_len(q.numel), q.config)
    return out[0, : q.numel].reshape(q.shape).to(q.dtype)


def quantize_with_feedback(x: torch.Tensor, residual: torch.Tensor | None, cfg: QuantConfig,
                           generator: torch.Generator | None = None) -> tuple[Quantized, torch.Tensor]:
    """Error feedback (Seide et al. 2014; Karimireddy et al. 2019): quantize x + e, carry
    e' = (x + e) - dequant(q) to the next call. Returns (q, e'); e' is float32, shape of x."""
    compensated = x.float() if residual is None else x.float() + residual
    q = quantize(compensated, cfg, generator)
    return q, compensated - dequantize(q).float()
