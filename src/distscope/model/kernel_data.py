"""Published kernel benchmarks (data/kernels/*.csv) as efficiency lookups: the component-level data
the efficiency model is calibrated on. No end-to-end run enters here.

GEMM ceiling: the largest achieved matmul TFLOP/s measured on a device family in a dtype, over that
device's dense peak (gemm.csv). fp16 uses the bf16 rows (every device here runs both at one
tensor-core rate); a dtype without rows falls back to the family's bf16 ceiling, a family without
rows to DEFAULT_CEILING.

Block-scaled FP8: a block-scaled recipe's GEMM throughput over the per-tensor one on the device family
(fp8_scaling.csv); 1 for per-tensor recipes and for a family without a row (named in missing_scaling).
Blackwell parts without a row of their own take the B300's (SCALING_ARCH: the same block-scaled MMA
generation), named in a warning. NVFP4 has no per-tensor twin: the fp4 rows of gemm.csv are NVFP4 kernels.

Fused attention: achieved fraction of the dtype's dense peak per (kernel, causal, head dim,
sequence, pass), interpolated in log(sequence) and log(head dim) and clamped at the measured range
(attention.csv). A family with rows of its own uses them within the head dims they cover; a family
with only a few anchor rows (A100: FlashAttention-2's 73% figure of merit; Blackwell: cuDNN at head dims
64 and 128, and FlashAttention-2, which has no tcgen05 path on SM100 and runs near its Hopper speed, at
head dims 64 and 128; GB300: cuDNN and FlashAttention-2 causal at head dim 128) takes the H100 curve of
the same kernel scaled to pass through its anchors of the same (causal, pass), else its non-causal
forwards, else any it has, at every head dim and pass its rows do not cover; any other family takes the
H100 curve scaled by the ratio of the two devices' GEMM ceilings (the kernel reaches the same share of
what the device's matmul reaches).
B200 and GB200 carry the same GPU die, so they share attention rows (ATTENTION_DIE), each row as a
share of the peak of the device it was measured on, applied to each device's own peak.
A (causal, pass) without rows is derived: causal backward = non-causal backward x (causal forward /
non-causal forward) at the same head dim and sequence.
"""

from __future__ import annotations

import bisect
import csv
import functools
import io
import math
from importlib import resources

from distscope.dtypes import DType, Scaling
from distscope.system.device import get_device

DEFAULT_CEILING = 0.70  # a family/dtype without published GEMM data: a typical vendor-library figure
REFERENCE_FAMILY = "h100"  # the family whose attention curves are measured in full
ATTENTION_DIE = {"b200": "gb200"}  # same Blackwell GPU die (DGX B200 at 1000 W, GB200 at 1200 W)
# a dtype one of the two has no GEMM rows for takes the other's share of peak (GB200's fp4: B200's)
SAME_DIE = ATTENTION_DIE | {v: k for k, v in ATTENTION_DIE.items()}
# block-scaled over per-tensor GEMM rates: one Blackwell tensor-core generation (sm_100 / sm_103 run the
# same block-scaled MMA); the only same-shape comparison published is Transformer Engine's on a B300
SCALING_ARCH = {"b200": "b300", "gb200": "b300", "gb300": "b300"}
# data-centre Blackwell: compute capability 10.x (B200 / GB200 sm_100, B300 / GB300 sm_103)
SM100_FAMILIES = frozenset({"b200", "b300", "gb200", "gb300"})
FAMILY_ALIAS = {"h800": "h100", "h200": "h100"}  # same SMs and clocks (H200/H800 differ in memory/links only)
# no published measurement: the nearest measured part, named in a warning (missing_tables)
FALLBACK_FAMILY = {"gb300": "b300", "mi355x": "mi300x", "mi325x": "mi300x"}
FAMILIES = ("a100", "h100", "h200", "h800", "b200", "b300", "gb200", "gb300", "v100", "mi250x", "mi300x", "mi325x",
            "mi355x")


def family(device_name: str) -> str:
    for fam in FAMILIES:
        if device_name.startswith(fam):
            return fam
    return device_name


def is_sm100(device_name: str) -> bool:
    """A data-centre Blackwell GPU (compute capability 10.x: SM100_FAMILIES)."""
    return family(device_name) in SM100_FAMILIES


def _own_families(device_name: str) -> tuple[str, str]:
    """The device's family and its same-silicon alias (itself when it has none), in lookup order."""
    fam = family(device_name)
    return fam, FAMILY_ALIAS.get(fam, fam)


def _rows(name: str) -> list[dict[str, str]]:
    text = resources.files("distscope.model").joinpath(f"data/kernels/{name}").read_text()
    return list(csv.DictReader(io.StringIO(text)))


@functools.cache
def _gemm_ceilings() -> dict[tuple[str, DType], float]:
    out: dict[tuple[str, DType], float] = {}
    for r in _rows("gemm.csv"):
        dt = DType(r["dtype"])
        frac = float(r["tflops"]) * 1e12 / get_device(r["device"]).flops(dt)
        key = (family(r["device"]), dt)
        out[key] = max(out.get(key, 0.0), frac)
    return out


def gemm_ceiling(device_name: str, dtype: DType) -> float:
    """Largest measured matmul throughput / dense peak for the device family and dtype."""
    table = _gemm_ceilings()
    for key in _gemm_keys(device_name, dtype):
        if key in table:
            return table[key]
    return DEFAULT_CEILING


def _gemm_keys(device_name: str, dtype: DType) -> list[tuple[str, DType]]:
    """Where a ceiling is looked up, best first: the family's own dtype, its same-silicon alias, the
    same die's other part, the family's bf16 ceiling (a dtype without rows), then the fallback part's."""
    own = _own_families(device_name)
    fam = own[0]
    dt: DType = DType.BF16 if dtype is DType.FP16 else dtype
    die = [(SAME_DIE[fam], dt)] if fam in SAME_DIE else []
    keys = [(f, dt) for f in own] + die + [(f, DType.BF16) for f in own]
    if fam in FALLBACK_FAMILY:
        keys += [(FALLBACK_FAMILY[fam], dt), (FALLBACK_FAMILY[fam], DType.BF16)]
    return keys


def missing_tables(device_name: str, dtypes: list[DType]) -> list[str]:
    """One sentence per GEMM dtype that has no published ceiling of the device's own family: which
    table stands in for it (data/kernels/gemm.csv). Empty when every dtype is measured."""
    table = _gemm_ceilings()
    out = []
    for dt in dict.fromkeys(DType.BF16 if d is DType.FP16 else d for d in dtypes):
        keys = _gemm_keys(device_name, dt)
        if any(k in table for k in keys[:2]):
            continue
        used = next((k for k in keys if k in table), None)
        instead = (f"the {used[0]} {used[1].value} ceiling ({table[used]:.1%} of peak)" if used
                   else f"the default ceiling {DEFAULT_CEILING:.0%}")
        out.append(f"no published {dt.value} GEMM measurement for {device_name} in data/kernels/gemm.csv; "
                   f"using {instead}")
    return out


@functools.cache
def _scaling_factors() -> dict[tuple[str, Scaling], float]:
    return {(family(r["device"]), Scaling(r["scaling"])): float(r["over_per_tensor"]) for r in _rows("fp8_scaling.csv")}


def _scaling_row(device_name: str, scaling: Scaling) -> tuple[float, str] | None:
    """The measured rate and the family it was measured on: the device's own, else SCALING_ARCH's."""
    table = _scaling_factors()
    fams = [*_own_families(device_name), SCALING_ARCH.get(family(device_name), "")]
    return next(((table[(f, scaling)], f) for f in fams if (f, scaling) in table), None)


def scaled_gemm_factor(device_name: str, scaling: Scaling) -> float:
    """A low-precision GEMM's throughput under `scaling` over the same GEMM with per-tensor scales."""
    if not scaling.block_scaled:
        return 1.0
    found = _scaling_row(device_name, scaling)
    return 1.0 if found is None else found[0]


def missing_scaling(device_name: str, scaling: Scaling) -> str | None:
    """One sentence when a block-scaled recipe on the device has no measured GEMM rate of its own
    (fp8_scaling.csv). NVFP4 never does: its rate is the fp4 GEMM ceiling (missing_tables names a gap)."""
    if not scaling.block_scaled or scaling is Scaling.NVFP4:
        return None
    found = _scaling_row(device_name, scaling)
    if found is not None and found[1] in _own_families(device_name):
        return None
    head = f"no measured {scaling.value}-scaled GEMM rate for {device_name} in data/kernels/fp8_scaling.csv; "
    if found is None:
        return head + "priced at its per-tensor rate"
    return head + f"using the {found[1]} measurement ({found[0]:.3f} of the per-tensor rate)"


Curve = dict[int, tuple[tuple[float, ...], tuple[float, ...]]]  # head_dim -> (seqs, efficiencies)


@functools.cache
def _attention() -> dict[tuple[str, DType, str, bool, str], Curve]:
    pts: dict[tuple[str, DType, str, bool, str], dict[int, list[tuple[float, float]]]] = {}
    for r in _rows("attention.csv"):
        dt = DType(r["dtype"])
        frac = float(r["tflops"]) * 1e12 / get_device(r["device"]).flops(dt)
        fam = family(r["device"])  # filed under the die's family (ATTENTION_DIE), as a share of its own peak
        key = (ATTENTION_DIE.get(fam, fam), dt, r["kernel"], r["causal"] == "1", r["pass"])
        pts.setdefault(key, {}).setdefault(int(r["head_dim"]), []).append((float(r["seq"]), frac))
    return {k: {hd: tuple(zip(*sorted(v), strict=True)) for hd, v in c.items()} for k, c in pts.items()}  # type: ignore[misc]


def _interp(xs: tuple[float, ...], ys: tuple[float, ...], x: float) -> float:
    if x <= xs[0]:
        return ys[0]
    if x >= xs[-1]:
        return ys[-1]
    i = bisect.bisect_right(xs, x)
    t = math.log(x / xs[i - 1]) / math.log(xs[i] / xs[i - 1])
    return ys[i - 1] + t * (ys[i] - ys[i - 1])


def _curve_at(c: Curve, head_dim: float, seq: float) -> float:
    hds = sorted(c)
    if head_dim <= hds[0] or len(hds) == 1:
        return _interp(*c[hds[0]], seq)
    if head_dim >= hds[-1]:
        return _interp(*c[hds[-1]], seq)
    i = bisect.bisect_right(hds, head_dim)
    lo, hi = hds[i - 1], hds[i]
    t = math.log(head_dim / lo) / math.log(hi / lo)
    return (1 - t) * _interp(*c[lo], seq) + t * _interp(*c[hi], seq)


def _measured(fam: str, dt: DType, kernel: str, causal: bool, pss: str, head_dim: float, seq: float) -> float | None:
    """Efficiency from a family's own rows, deriving a missing (causal, pass) as documented above."""
    tab = _attention()
    key = (fam, dt, kernel, causal, pss)
    if key in tab:
        return _curve_at(tab[key], head_dim, seq)
    if causal and pss == "bwd":
        bwd = _measured(fam, dt, kernel, False, "bwd", head_dim, seq)
        f_c, f_n = (_measured(fam, dt, kernel, c, "fwd", head_dim, seq) for c in (True, False))
        if bwd is not None and f_c is not None and f_n:
            return bwd * f_c / f_n
    return None


def _head_dims(fam: str, dt: DType, kernel: str, causal: bool, pss: str) -> list[int]:
    """Head dims the family's own rows of this (kernel, causal, pass) measure; a causal backward without
    rows is derived (_measured) where the non-causal backward and both forwards are measured."""
    tab = _attention()
    if (fam, dt, kernel, causal, pss) in tab:
        return list(tab[(fam, dt, kernel, causal, pss)])
    if causal and pss == "bwd":
        spans = [set(tab.get((fam, dt, kernel, c, p), {})) for c, p in ((False, "bwd"), (True, "fwd"), (False, "fwd"))]
        return sorted(spans[0] & spans[1] & spans[2])
    return []


@functools.cache
def _covers(fam: str, dt: DType, kernel: str, causal: bool, pss: str, head_dim: float) -> bool:
    """The family's own rows of this (kernel, causal, pass) span `head_dim` (else the reference curve is scaled
    through them)."""
    hds = _head_dims(fam, dt, kernel, causal, pss)
    return bool(hds) and min(hds) <= head_dim <= max(hds)


def _anchors(fam: str, dt: DType, kernel: str, causal: bool, pss: str) -> list[tuple[int, float, float, bool, str]]:
    """(head dim, sequence, efficiency, causal, pass) of the family's rows the reference curve is scaled
    through: those of the same (causal, pass) where the family has any, else its non-causal forwards, else
    whatever (causal, pass) it measured."""
    tab = _attention()
    order = [(causal, pss), (False, "fwd")] + [(c, p) for (f, d, k, c, p) in tab if (f, d, k) == (fam, dt, kernel)]
    for c, p in order:
        cur = tab.get((fam, dt, kernel, c, p))
        if cur:
            return [(hd, s, e, c, p) for hd, (ss, es) in cur.items() for s, e in zip(ss, es, strict=True)]
    return []


def attention_efficiency(device_name: str, dtype: DType, kernel: str, causal: bool, head_dim: float, seq: float,
                         pss: str) -> float:
    """Achieved fraction of the dtype's dense peak of one fused-attention pass ('fwd' or 'bwd'). FP16 reads
    the BF16 rows: the two have one tensor-core rate and FlashAttention and cuDNN run one kernel template
    for both (FlashAttention-2's own benchmarks, the source of several rows, are FP16)."""
    if dtype is DType.FP16:
        dtype = DType.BF16
    fam = _own_families(device_name)[1]
    fam = ATTENTION_DIE.get(fam, fam)
    ref = _measured(REFERENCE_FAMILY, dtype, kernel, causal, pss, head_dim, seq)
    if ref is None:  # no such kernel/dtype measured on the reference device: FlashAttention-2 in bf16
        ref = _measured(REFERENCE_FAMILY, DType.BF16, "fa2", causal, pss, head_dim, seq)
        assert ref is not None
    if fam == REFERENCE_FAMILY:
        return ref
    if _covers(fam, dtype, kernel, causal, pss, head_dim):
        own = _measured(fam, dtype, kernel, causal, pss, head_dim, seq)
        if own is not None:
            return own
    for k in (kernel, "fa2"):  # a kernel the family has no data for (FA3 is Hopper-only): its FlashAttention-2
        anchors = _anchors(fam, dtype, k, causal, pss)
        if anchors:  # scale the reference curve of that kernel through the family's own measurements
            base = _measured(REFERENCE_FAMILY, dtype, k, causal, pss, head_dim, seq) or ref
            scale = sum(e / (_measured(REFERENCE_FAMILY, dtype, k, c, p, hd, s) or e) for hd, s, e, c, p in anchors)
            return base * scale / len(anchors)
    return ref * gemm_ceiling(device_name, dtype) / gemm_ceiling(REFERENCE_FAMILY, dtype)
