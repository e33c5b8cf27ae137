"""Error-bounded lossy compression of embedding traffic (issue 22; the SZ-class compression of DLRM
all-to-alls): SZ3 (pysz) and ZFP (zfpy), the real libraries, with an absolute error bound.

`encode`/`decode` turn a float32 array into bytes and back, every element within `bound` of the input, or
within `bound` times the array's value range when `relative` (SZ3's ABS and REL modes; ZFP's
fixed-accuracy mode, whose tolerance is the same guarantee, given the same absolute bound); `measure` times both
directions on one tensor and reports the compression ratio, the max and relative L2 errors and the
codec's throughput on this host. numpy only: the codecs work on host arrays.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import time
from importlib import resources
from typing import Any

import numpy as np

from distscope.enums import Enum
from distscope.errors import DistscopeError, closest

INSTALL = "pip install 'distscope[eb]' (pysz for SZ3, zfpy for ZFP)"


class EbCodec(Enum):
    SZ3 = "sz3"
    ZFP = "zfp"

    @classmethod
    def parse(cls, value: str, field: str = "codec") -> EbCodec:
        key = value.strip().lower()
        try:
            return cls(key)
        except ValueError:
            raise DistscopeError(f"{field}={value!r} is not an error-bounded codec (sz3, zfp)"
                                 f"{closest(key, [c.value for c in cls])}") from None


def _lib(codec: EbCodec) -> Any:
    try:
        if codec is EbCodec.SZ3:
            import pysz

            return pysz
        import zfpy

        return zfpy
    except ImportError:
        raise DistscopeError(f"codec {codec.value} is not installed: {INSTALL}") from None


def _check(x: np.ndarray, bound: float) -> np.ndarray:
    if not bound > 0 or not np.isfinite(bound):
        raise DistscopeError(f"error bound={bound} must be a finite number > 0")
    if x.size == 0:
        raise DistscopeError("cannot compress an empty array")
    return np.ascontiguousarray(x, dtype=np.float32)


def abs_bound(x: np.ndarray, bound: float, relative: bool) -> float:
    """The absolute bound: `bound` itself, or `bound` times the array's value range (SZ3's REL mode), so that
    tensors of any scale (pooled embeddings ~0.1, their per-sample gradients ~1e-4) keep the same relative
    precision. A constant array gets the float32 resolution of its value."""
    if not relative:
        return bound
    span = float(x.max() - x.min())
    return bound * span if span > 0 else max(float(np.abs(x).max()), 1.0) * float(np.finfo(np.float32).eps)


def encode(x: np.ndarray, codec: EbCodec, bound: float, *, relative: bool = False) -> bytes:
    """`x` (any float array, compressed as float32) within `bound` of every element (or `bound` times its
    value range, `relative`), as bytes."""
    x = _check(x, bound)
    bound = abs_bound(x, bound, relative)
    lib = _lib(codec)
    if codec is EbCodec.SZ3:
        cfg = lib.szConfig()
        cfg.errorBoundMode = lib.szErrorBoundMode.ABS
        cfg.absErrorBound = float(bound)
        data, _ = lib.sz.compress(x, cfg)
        return bytes(np.asarray(data, dtype=np.uint8))
    return bytes(lib.compress_numpy(x, tolerance=float(bound)))


def decode(buf: bytes, codec: EbCodec, shape: tuple[int, ...]) -> np.ndarray:
    lib = _lib(codec)
    if codec is EbCodec.SZ3:
        out, _ = lib.sz.decompress(np.frombuffer(buf, dtype=np.uint8), np.float32, tuple(shape))
        return np.asarray(out, dtype=np.float32).reshape(shape)
    return np.asarray(lib.decompress_numpy(buf), dtype=np.float32).reshape(shape)


@dataclasses.dataclass(frozen=True)
class CodecStats:
    codec: str
    bound: float
    relative: bool  # bound x the value range (else absolute)
    ratio: float  # float32 bytes / compressed bytes
    max_abs_error: float
    rel_l2_error: float  # ||x - x'|| / ||x||
    encode_GBps: float  # float32 input bytes per second, this host, one thread
    decode_GBps: float

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def measure(x: np.ndarray, codec: EbCodec, bound: float, *, relative: bool = False, repeats: int = 3) -> CodecStats:
    """Ratio, errors and the best of `repeats` timings of both directions on `x`."""
    x = _check(x, bound)
    enc = dec = float("inf")
    buf, y = b"", x
    for _ in range(max(1, repeats)):
        t0 = time.perf_counter()
        buf = encode(x, codec, bound, relative=relative)
        t1 = time.perf_counter()
        y = decode(buf, codec, x.shape)
        t2 = time.perf_counter()
        enc, dec = min(enc, t1 - t0), min(dec, t2 - t1)
    err = np.abs(x.astype(np.float64) - y)
    norm = float(np.linalg.norm(x.astype(np.float64)))
    return CodecStats(codec=codec.value, bound=bound, relative=relative, ratio=x.nbytes / max(len(buf), 1), max_abs_error=float(err.max()),
                      rel_l2_error=float(np.linalg.norm(err)) / norm if norm else 0.0,
                      encode_GBps=x.nbytes / enc / 1e9, decode_GBps=x.nbytes / dec / 1e9)


@dataclasses.dataclass(frozen=True)
class EmbCompression:
    """Error-bounded compression of a DLRM's pooled-embedding all-to-alls, as priced by the step model
    (model/embedding_cost.py): the wire bytes of the forward rows and the backward gradients divided by
    the codec's measured ratios on each, and each rank's encode and decode time at the codec's rate."""

    label: str  # codec:bound, e.g. sz3:0.01
    ratio_fwd: float
    ratio_bwd: float
    encode_Bps: float
    decode_Bps: float
    loss_vs_uncompressed_pct: float  # the convergence check's final-loss change (benchmarks/eb_compress.py)


@functools.cache
def codec_table() -> dict[str, dict[str, float]]:
    """Measured codecs (compress/data/eb_codecs.json, written by benchmarks/eb_compress.py --write-data)."""
    text = resources.files("distscope.compress").joinpath("data/eb_codecs.json").read_text()
    return dict(json.loads(text)["codecs"])


def emb_compression(text: str, codec_gbps: float | None = None) -> EmbCompression:
    """`emb=CODEC:BOUND` (a measured entry of codec_table) as an EmbCompression; `codec_gbps` replaces the
    measured host throughput (a GPU codec's rate, GB of uncompressed input per second)."""
    table = codec_table()
    key = text.strip().lower().removeprefix("emb=")
    if not text.strip().lower().startswith("emb=") or key not in table:
        raise DistscopeError(f"--compress={text!r}: a recommendation model compresses its embedding all-to-all: "
                             f"emb=CODEC:BOUND, one of {', '.join('emb=' + k for k in table)} (measured by "
                             "benchmarks/eb_compress.py), or auto (plan){closest(key, table)}")
    if codec_gbps is not None and not (codec_gbps > 0 and np.isfinite(codec_gbps)):
        raise DistscopeError(f"--quant-gbps={codec_gbps} must be a finite number > 0")
    row = table[key]
    enc = row["encode_GBps"] * 1e9 if codec_gbps is None else codec_gbps * 1e9
    dec = row["decode_GBps"] * 1e9 if codec_gbps is None else codec_gbps * 1e9
    return EmbCompression(label=key, ratio_fwd=row["ratio_embeddings"], ratio_bwd=row["ratio_gradients"],
                          encode_Bps=enc, decode_Bps=dec,
                          loss_vs_uncompressed_pct=row["final_loss_vs_uncompressed_pct"])
