"""Device efficiency model: the achieved fraction of peak as a function of kernel shape and dtype.

All parameters are physical and global (one value per device generation and dtype, never per run).
They were fitted by least squares over every row of data/validation/published_runs.csv at once
(benchmarks/calibrate.py re-runs the fit); the comments give the physical reading and a sanity
check against public microbenchmarks.

GEMM time (roofline with a size-saturation term):
    η(M,N,K) = η_max(device, dtype) · m / (m + m_half),   m = min(N, K),
    m_half = κ · peak / hbm_Bps   (κ · the machine balance in FLOP/byte)
    t = max(2MNK / (peak · η), bytes(M,N,K) / (hbm_Bps · η_mem)) + t_kernel
where N, K are the weight dims after tensor-parallel sharding, so a thin shard loses efficiency the
way cuBLAS tiles do: a tile's arithmetic intensity grows with the reduction and output dims, and the
dim at which it reaches the device's machine balance scales with peak/bandwidth (A100 fp16: 153
FLOP/B; H100 bf16: 295; H100 fp8: 591), so faster chips need larger GEMMs to saturate.
"""

from __future__ import annotations

import json
from importlib import resources

from distscope.dtypes import DType
from distscope.system.device import Device

# Largest-GEMM efficiency per device family and dtype. Sanity: cuBLAS on A100 reaches ~270 of 312
# TFLOP/s fp16 (0.87) for 8k cubes; H100 SXM ~700-800 of 989 bf16 (0.7-0.8) and ~1300-1450 of 1979
# fp8 (0.65-0.73) in public GEMM sweeps.
GEMM_ETA_MAX: dict[tuple[str, DType], float] = {
    ("a100", DType.FP16): 0.80,
    ("a100", DType.BF16): 0.80,
    ("h100", DType.BF16): 0.74,
    ("h100", DType.FP16): 0.74,
    ("h100", DType.FP8): 0.60,
}
GEMM_ETA_MAX_DEFAULT = 0.70  # other devices/dtypes: a typical vendor-library figure

# m_half / machine balance: the GEMM dim reaching half of η_max, per FLOP/byte of machine balance.
GEMM_KAPPA = 0.63

# Achieved fraction of HBM bandwidth for streaming element-wise kernels (STREAM-like ~0.8-0.9).
MEM_ETA = 0.80

# Fixed cost per kernel: launch, tail effect and synchronisation (~4 us on CUDA without graphs).
KERNEL_S = 4e-6

# Fused attention (FlashAttention-2/cuDNN) reaches a lower fraction of peak than a plain GEMM:
# FA2 forward ~0.6-0.7 of A100 peak (Dao 2023), FA3/cuDNN ~0.6-0.75 of H100 bf16; backward ~0.8x that.
FLASH_ETA_REL = 0.80


# Fitted values (data/calibration.json, written by benchmarks/calibrate.py) override the defaults above.
CALIBRATION: dict[str, float] = {
    "a100_fp16": GEMM_ETA_MAX[("a100", DType.FP16)], "h100_bf16": GEMM_ETA_MAX[("h100", DType.BF16)],
    "h100_fp8": GEMM_ETA_MAX[("h100", DType.FP8)], "kappa": GEMM_KAPPA, "flash_rel": FLASH_ETA_REL,
}


def set_calibration(values: dict[str, float]) -> None:
    """Install fitted parameters (callers that cache costs must clear their caches)."""
    global GEMM_KAPPA, FLASH_ETA_REL
    CALIBRATION.update(values)
    for dt in (DType.FP16, DType.BF16):
        GEMM_ETA_MAX[("a100", dt)] = CALIBRATION["a100_fp16"]
        GEMM_ETA_MAX[("h100", dt)] = CALIBRATION["h100_bf16"]
    GEMM_ETA_MAX[("h100", DType.FP8)] = CALIBRATION["h100_fp8"]
    GEMM_KAPPA = CALIBRATION["kappa"]
    FLASH_ETA_REL = CALIBRATION["flash_rel"]


def _load_calibration() -> None:
    f = resources.files("distscope.model").joinpath("data/calibration.json")
    if f.is_file():
        set_calibration({k: float(v) for k, v in json.loads(f.read_text()).items() if not k.startswith("_")})


def device_family(device_name: str) -> str:
    for fam in ("a100", "h100", "h200", "h800", "b200", "v100", "mi250x", "mi300x"):
        if device_name.startswith(fam):
            return "h100" if fam in ("h200", "h800") else fam
    return device_name


def gemm_eta_max(device_name: str, dtype: DType) -> float:
    return GEMM_ETA_MAX.get((device_family(device_name), dtype), GEMM_ETA_MAX_DEFAULT)


def gemm_time_s(M: float, N: float, K: float, elt_bytes: float, peak_flops: float, hbm_Bps: float,
                eta_max: float) -> float:
    """One GEMM (M×K)·(K×N): compute- or memory-bound, plus a kernel's fixed cost (see module doc)."""
    m = min(N, K)
    eta = eta_max * m / (m + GEMM_KAPPA * peak_flops / hbm_Bps)
    t_flops = 2.0 * M * N * K / (peak_flops * eta)
    t_mem = elt_bytes * (M * K + K * N + M * N) / (hbm_Bps * MEM_ETA)
    return max(t_flops, t_mem) + KERNEL_S


def mem_time_s(nbytes: float, hbm_Bps: float) -> float:
    return nbytes / (hbm_Bps * MEM_ETA)



# --- device-level entry points: a measured kernel profile (Device.kernels) wins where it has a table ---

def gemm_s(device: Device, dtype: DType, M: float, N: float, K: float) -> float:
    """One GEMM (M×K)·(K×N) in `dtype` on `device`: the measured table if the device carries one for
    that dtype (`--profile` with a kernels section), else the analytic model above."""
    kp = device.kernels
    if kp is not None and kp.has_gemm(dtype):
        return kp.gemm_time_s(dtype, M, N, K)
    return gemm_time_s(M, N, K, dtype.bytes, device.flops(dtype), device.hbm_Bps, gemm_eta_max(device.name, dtype))


def flash_attention_s(device: Device, dtype: DType, batch_heads: float, seq_q: float, seq_kv: float,
                      d_qk: float, d_v: float, causal: bool = True) -> tuple[float, float]:
    """(forward, backward) time of fused attention over batch·heads sequences: the measured table when
    the device carries one, else core FLOPs 2·BH·s_q·s_kv·(d_qk + d_v) (halved when causal) at η_max·
    FLASH_ETA_REL of peak, backward 2.5x forward (FlashAttention-2: five matmuls against two)."""
    kp = device.kernels
    if kp is not None and kp.has_attention(dtype, causal):
        return kp.attention_time_s(dtype, causal, batch_heads, seq_q, seq_kv, (d_qk + d_v) / 2)
    flops = 2.0 * batch_heads * seq_q * seq_kv * (d_qk + d_v) * (0.5 if causal else 1.0)
    fwd = flops / (device.flops(dtype) * gemm_eta_max(device.name, dtype) * FLASH_ETA_REL) + KERNEL_S
    return fwd, 2.5 * fwd


def elementwise_s(device: Device, nbytes: float, kernels: int = 1) -> float:
    """`kernels` streaming element-wise passes moving `nbytes` in all (read + written): the measured
    bandwidth at each pass's size when the device carries an element-wise table (launch costs are in
    the measurement), else MEM_ETA of the HBM bandwidth plus KERNEL_S per pass."""
    kp = device.kernels
    if kp is not None and kp.elementwise is not None:
        n = max(kernels, 1)  # 0: bytes of a pass fused into another kernel, priced as one pass
        return n * kp.mem_time_s(nbytes / n) if nbytes > 0 else 0.0
    return mem_time_s(nbytes, device.hbm_Bps) + kernels * KERNEL_S


_load_calibration()
