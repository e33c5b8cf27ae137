"""Kernel profile: measured GEMM, attention and element-wise throughput tables (torch-free loader).

`distscope measure kernels` writes it as the `kernels` section of a `distscope.system_profile/1` file
(measure/profile.py), so one `--profile` file carries both the α-β links and the kernel tables:

    "kernels": {
      "format": "distscope.kernels/1",
      "device": "<what ran: torch.cuda.get_device_name() or 'cpu: <processor>'>",
      "source": "<tool, torch version, date, threads>",
      "gemm": {"<dtype>": {"m": [M...], "n": [N...], "k": [K...],
                           "tflops": [[[achieved TFLOP/s at (m_i, n_j, k_l)]]]}},
      "attention": {"<dtype>": {"causal" | "full": {"seq": [S...], "head_dim": [D...],
                                                    "fwd_tflops": [[...]], "bwd_tflops": [[...]]}}},
      "elementwise": {"bytes": [moved bytes...], "GBps": [achieved GB/s...]}
    }

GEMM (M×K)·(K×N) does 2·M·N·K FLOPs. Attention FLOPs follow FlashAttention's benchmark convention
(Dao 2023, benchmarks/benchmark_flash_attention.py): forward 4·B·H·S²·D, halved when causal; backward
2.5x forward. Element-wise bytes are read + written bytes.

Lookups interpolate multilinearly in log(coordinate) and log(throughput) on the measured grid and
clamp outside it (a shape beyond the grid runs at the nearest edge's throughput), so a prediction
never claims more throughput than some measured kernel reached.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
from collections.abc import Sequence
from typing import Any

from distscope.dtypes import DType
from distscope.errors import DistscopeError

FORMAT = "distscope.kernels/1"
FLASH_BWD_FLOPS_RATIO = 2.5  # FlashAttention convention: backward = 2.5x forward FLOPs (5 matmuls vs 2)


@dataclasses.dataclass(frozen=True, eq=False)
class Grid:
    """A positive quantity tabulated on a regular grid; interpolated in log-log, clamped at the edges."""

    axes: tuple[tuple[float, ...], ...]
    values: tuple[float, ...]  # row-major over axes

    def __post_init__(self) -> None:
        n = 1
        for ax in self.axes:
            if not ax or any(not (0 < x < math.inf) for x in ax) or list(ax) != sorted(set(ax)):
                raise DistscopeError(f"grid axis {list(ax)!r} must be increasing positive numbers")
            n *= len(ax)
        if len(self.values) != n or any(not (0 < v < math.inf) for v in self.values):
            raise DistscopeError(f"grid has {len(self.values)} values for {n} points; each must be a finite number > 0")

    def at(self, *coords: float) -> float:
        """Multilinear interpolation of log(value) over log(coords), clamped to the grid."""
        corners: list[tuple[int, float]] = [(0, 1.0)]  # (flat index, weight)
        stride = len(self.values)
        for ax, x in zip(self.axes, coords, strict=True):
            stride //= len(ax)
            if x <= ax[0]:
                lo, hi, t = 0, 0, 0.0
            elif x >= ax[-1]:
                lo = hi = len(ax) - 1
                t = 0.0
            else:
                hi = bisect.bisect_right(ax, x)
                lo = hi - 1
                t = math.log(x / ax[lo]) / math.log(ax[hi] / ax[lo])
            nxt = [(i + lo * stride, w * (1 - t)) for i, w in corners]
            if t > 0:
                nxt += [(i + hi * stride, w * t) for i, w in corners]
            corners = nxt
        return math.exp(sum(w * math.log(self.values[i]) for i, w in corners))

    @property
    def max_value(self) -> float:
        return max(self.values)


@dataclasses.dataclass(frozen=True, eq=False)
class AttentionTable:
    fwd_tflops: Grid  # axes (seq, head_dim)
    bwd_tflops: Grid


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class KernelProfile:
    """Measured kernel throughput of one device. Hashes by identity (it rides on a Device in caches)."""

    device: str
    source: str = ""
    gemm: dict[DType, Grid]  # axes (M, N, K) -> TFLOP/s
    attention: dict[tuple[DType, bool], AttentionTable]  # (dtype, causal)
    elementwise: Grid | None = None  # axis (bytes moved) -> GB/s

    def __post_init__(self) -> None:
        if not self.gemm and not self.attention and self.elementwise is None:
            raise DistscopeError(f"kernel profile of device={self.device!r} has no gemm, attention or elementwise table")

    def has_gemm(self, dtype: DType) -> bool:
        return dtype in self.gemm

    def gemm_time_s(self, dtype: DType, M: float, N: float, K: float) -> float:
        """2·M·N·K / measured throughput at (M, N, K)."""
        return 2.0 * M * N * K / (self.gemm[dtype].at(M, N, K) * 1e12)

    def has_attention(self, dtype: DType, causal: bool) -> bool:
        return (dtype, causal) in self.attention

    def attention_time_s(self, dtype: DType, causal: bool, batch_heads: float, seq_q: float, seq_kv: float,
                         head_dim: float) -> tuple[float, float]:
        """(forward, backward) seconds of fused attention over batch·heads sequences, FlashAttention's
        FLOP convention: forward 4·BH·s_q·s_kv·d (halved when causal and s_q == s_kv), backward 2.5x."""
        tab = self.attention[(dtype, causal)]
        fwd_flops = 4.0 * batch_heads * seq_q * seq_kv * head_dim * (0.5 if causal else 1.0)
        s = math.sqrt(seq_q * seq_kv)
        return (fwd_flops / (tab.fwd_tflops.at(s, head_dim) * 1e12),
                FLASH_BWD_FLOPS_RATIO * fwd_flops / (tab.bwd_tflops.at(s, head_dim) * 1e12))

    def mem_time_s(self, nbytes: float) -> float:
        """Bytes read + written by a streaming element-wise kernel / measured bandwidth at that size."""
        assert self.elementwise is not None
        return nbytes / (self.elementwise.at(max(nbytes, 1.0)) * 1e9)

    def to_dict(self) -> dict[str, Any]:
        def nest(g: Grid) -> Any:
            return _nest(list(g.values), [len(a) for a in g.axes])

        d: dict[str, Any] = {"format": FORMAT, "device": self.device, "source": self.source, "gemm": {}, "attention": {}}
        for dt, g in self.gemm.items():
            d["gemm"][dt.value] = {"m": list(g.axes[0]), "n": list(g.axes[1]), "k": list(g.axes[2]), "tflops": nest(g)}
        for (dt, causal), t in self.attention.items():
            d["attention"].setdefault(dt.value, {})["causal" if causal else "full"] = {
                "seq": list(t.fwd_tflops.axes[0]), "head_dim": list(t.fwd_tflops.axes[1]),
                "fwd_tflops": nest(t.fwd_tflops), "bwd_tflops": nest(t.bwd_tflops)}
        if self.elementwise is not None:
            d["elementwise"] = {"bytes": list(self.elementwise.axes[0]), "GBps": nest(self.elementwise)}
        return d

    @classmethod
    def from_dict(cls, d: Any, where: str = "kernels") -> KernelProfile:
        if not isinstance(d, dict):
            raise DistscopeError(f"{where}: must be an object, got {type(d).__name__}")
        if d.get("format") != FORMAT:
            raise DistscopeError(f"{where}: format={d.get('format')!r}, expected {FORMAT!r}")
        device = d.get("device")
        if not isinstance(device, str) or not device.strip():
            raise DistscopeError(f"{where}: device={device!r} must name the device the kernels ran on")
        gemm: dict[DType, Grid] = {}
        attn: dict[tuple[DType, bool], AttentionTable] = {}
        for key, t in _obj(d.get("gemm", {}), f"{where}.gemm").items():
            w = f"{where}.gemm.{key}"
            t = _obj(t, w)
            gemm[DType.parse(key, f"{where}.gemm dtype")] = _grid(t, ("m", "n", "k"), "tflops", w)
        for key, kinds in _obj(d.get("attention", {}), f"{where}.attention").items():
            dt = DType.parse(key, f"{where}.attention dtype")
            for kind, t in _obj(kinds, f"{where}.attention.{key}").items():
                w = f"{where}.attention.{key}.{kind}"
                if kind not in ("causal", "full"):
                    raise DistscopeError(f"{w}: must be 'causal' or 'full'")
                t = _obj(t, w)
                attn[(dt, kind == "causal")] = AttentionTable(
                    fwd_tflops=_grid(t, ("seq", "head_dim"), "fwd_tflops", w),
                    bwd_tflops=_grid(t, ("seq", "head_dim"), "bwd_tflops", w))
        el = None
        if "elementwise" in d:
            e = _obj(d["elementwise"], f"{where}.elementwise")
            el = _grid(e, ("bytes",), "GBps", f"{where}.elementwise")
        return cls(device=device.strip(), source=str(d.get("source", "")), gemm=gemm, attention=attn, elementwise=el)


def _obj(v: Any, where: str) -> dict[str, Any]:
    if not isinstance(v, dict):
        raise DistscopeError(f"{where}: must be an object, got {type(v).__name__}")
    return v


def _num(x: Any, where: str) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not (0 < x < math.inf):
        raise DistscopeError(f"{where}: {x!r} must be a finite number > 0")
    return float(x)


def _nest(flat: list[float], shape: Sequence[int]) -> Any:
    if len(shape) == 1:
        return [float(f"{x:.5g}") for x in flat]
    step = len(flat) // shape[0]
    return [_nest(flat[i * step:(i + 1) * step], shape[1:]) for i in range(shape[0])]


def _flatten(v: Any, shape: Sequence[int], where: str) -> list[float]:
    if not isinstance(v, list) or len(v) != shape[0]:
        raise DistscopeError(f"{where}: expected a list of {shape[0]} entries")
    if len(shape) == 1:
        return [_num(x, where) for x in v]
    return [x for sub in v for x in _flatten(sub, shape[1:], where)]


def _grid(t: dict[str, Any], axes: tuple[str, ...], values: str, where: str) -> Grid:
    try:
        ax = tuple(tuple(_num(x, f"{where}.{a}") for x in _list(t[a], f"{where}.{a}")) for a in axes)
        vals = _flatten(t[values], [len(a) for a in ax], f"{where}.{values}")
    except KeyError as exc:
        raise DistscopeError(f"{where}: missing field {exc.args[0]!r}") from None
    try:
        return Grid(axes=ax, values=tuple(vals))
    except DistscopeError as exc:
        raise DistscopeError(f"{where}: {exc}") from None


def _list(v: Any, where: str) -> list[Any]:
    if not isinstance(v, list) or not v:
        raise DistscopeError(f"{where}: must be a non-empty list")
    return v


def kernel_device_warning(kp: KernelProfile, device_name: str) -> str | None:
    """A warning when the kernels were measured on another kind of device than the one predicted."""
    family = device_name.split("-")[0].lower()
    if family in kp.device.lower().replace(" ", "").replace("-", ""):
        return None
    return (f"kernel profile measured on {kp.device!r} is applied to a {device_name}: its measured kernel "
            "throughput replaces the device's efficiency model")
