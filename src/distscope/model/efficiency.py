"""Device efficiency model: the achieved fraction of peak of GEMMs, fused attention and element-wise
passes, built from published kernel benchmarks (model/kernel_data.py, data/kernels/*.csv) and two
bounded global parameters fitted on end-to-end runs (data/calibration.json, benchmarks/calibrate.py).

GEMM time (roofline with a size-saturation term):
    η(M,N,K) = σ · η_kernel(device, dtype) · m / (m + m_half),   m = min(N, K),
    m_half = κ · peak / hbm_Bps   (κ · the machine balance in FLOP/byte)
    t = max(2MNK / (peak · η), bytes(M,N,K) / (hbm_Bps · η_mem)) + t_kernel
η_kernel is the largest matmul throughput measured on the device family and dtype over its peak
(A100 bf16 0.87, H100 bf16 0.80, H100 fp8 0.71, B200 bf16 0.78, MI300X bf16 0.60, MI300X fp8 0.49:
gemm.csv), so the model never exceeds what a kernel was measured to reach. N, K are the weight dims after tensor-
parallel sharding, so a thin shard loses efficiency the way cuBLAS tiles do: a tile's arithmetic
intensity grows with the reduction and output dims, and the dim at which it reaches the device's
machine balance scales with peak/bandwidth (A100 fp16: 153 FLOP/B; H100 bf16: 295; H100 fp8: 591).

Fused attention runs at the measured efficiency of its kernel (FlashAttention-2, cuDNN, FA3) for its
head dim, sequence, mask and pass (kernel_data.attention_efficiency), times σ.

The global parameters (fitted at once over all validation rows, bounded):
- σ (`sustained`): the share of a kernel benchmark's throughput a training job sustains: benchmarks
  run seconds at boost clock, a training step runs for hours at the power limit, where H100 SXM
  settles near 1.75 of its 1.98 GHz boost (and A100 near its 1.41 GHz). Bounds 0.70-1.0.
- κ: the GEMM saturation constant above. Bounds 0.2-0.95: the upper bound is the component data's
  (DeepGEMM's grouped-GEMM benchmarks, data/kernels/grouped_gemm.csv, stay within their tolerances in
  tests/core/test_grouped_gemm.py only for κ ≤ 0.95; a larger κ makes small-group GEMMs too slow), so
  an end-to-end fit cannot move the GEMM curve where the kernel measurements say it is not.
- ρ (`overlap_cost`): compute slowdown per second of communication hidden behind it. Bounds 0-0.6.
- π (`pytorch_stack`): the speed of a PyTorch-native stack's attention and element-wise kernels
  (software.KernelStack.PYTORCH: torchtitan, LLM Foundry) relative to the fused stack's
  (layer.LayerCost.slowed). GEMMs are cuBLAS in both and keep their time, as do FP8 casts (fused by TE,
  and by torch.compile into neighbouring kernels); Megatron/TE fuse norms, rotary and bias-activation
  into hand-written kernels, where PyTorch-native stacks run eager ops or Inductor/Triton kernels (and
  LLM Foundry's Triton FlashAttention). Prior 1.0 (no penalty); bounds 0.2-1.0. Only rows of such
  stacks inform it, so it is fitted on the combined published + evidence rows (benchmarks/calibrate.py),
  and its cross-validated error holds only where another PyTorch-native source is in the training folds.
"""

from __future__ import annotations

import json
from importlib import resources

from distscope.dtypes import DType
from distscope.model import kernel_data
from distscope.system.device import Device

# Sustained share of benchmarked kernel throughput (σ) and the GEMM saturation constant (κ); the
# fitted values in data/calibration.json replace these priors at import.
SUSTAINED = 0.90
GEMM_KAPPA = 0.63
# Compute slowdown per second of communication hidden behind it: NCCL kernels take SMs and HBM
# bandwidth from the compute they overlap (the reason overlapped collectives are not free).
OVERLAP_COST = 0.0
# Speed of a PyTorch-native stack's attention and element-wise kernels relative to the fused one (π above).
PYTORCH_STACK = 1.0

# Achieved fraction of HBM bandwidth for streaming element-wise kernels (STREAM-like ~0.8-0.9).
MEM_ETA = 0.80

# Fixed cost per kernel: launch, tail effect and synchronisation (~4 us on CUDA without graphs).
KERNEL_S = 4e-6

# Fused attention relative to the GEMM ceiling, for callers that price attention without naming a
# kernel (FlashAttention-2 on A100: 0.73 / 0.87 of peak; cuDNN on H100: ~0.6 / 0.8).
FLASH_ETA_REL = 0.80

CALIBRATION: dict[str, float] = {"sustained": SUSTAINED, "kappa": GEMM_KAPPA, "overlap_cost": OVERLAP_COST,
                                  "pytorch_stack": PYTORCH_STACK}
BOUNDS: dict[str, tuple[float, float]] = {"sustained": (0.70, 1.0), "kappa": (0.2, 0.95), "overlap_cost": (0.0, 0.6),
                                          "pytorch_stack": (0.2, 1.0)}


PRIORS: dict[str, float] = dict(CALIBRATION)  # before any fit: what cross-validation folds start from


def set_calibration(values: dict[str, float]) -> None:
    """Install global parameters (callers that cache costs must clear their caches)."""
    global SUSTAINED, GEMM_KAPPA, OVERLAP_COST, PYTORCH_STACK
    unknown = set(values) - set(CALIBRATION)
    if unknown:
        raise ValueError(f"unknown calibration parameters {sorted(unknown)}; known: {sorted(CALIBRATION)}")
    CALIBRATION.update(values)
    SUSTAINED = CALIBRATION["sustained"]
    GEMM_KAPPA = CALIBRATION["kappa"]
    OVERLAP_COST = CALIBRATION["overlap_cost"]
    PYTORCH_STACK = CALIBRATION["pytorch_stack"]


def _load_calibration() -> None:
    f = resources.files("distscope.model").joinpath("data/calibration.json")
    if f.is_file():
        vals = {k: float(v) for k, v in json.loads(f.read_text()).items() if not k.startswith("_")}
        set_calibration({k: v for k, v in vals.items() if k in CALIBRATION})


def device_family(device_name: str) -> str:
    return kernel_data.family(device_name)


def gemm_eta_max(device_name: str, dtype: DType) -> float:
    """The largest GEMM efficiency a training job sustains: σ · the measured matmul ceiling."""
    return SUSTAINED * kernel_data.gemm_ceiling(device_name, dtype)


def gemm_time_s(M: float, N: float, K: float, elt_bytes: float, peak_flops: float, hbm_Bps: float,
                eta_max: float) -> float:
    """One GEMM (M×K)·(K×N): compute- or memory-bound, plus a kernel's fixed cost (see module doc)."""
    m = min(N, K)
    eta = eta_max * m / (m + GEMM_KAPPA * peak_flops / hbm_Bps)
    t_flops = 2.0 * M * N * K / (peak_flops * eta)
    t_mem = elt_bytes * (M * K + K * N + M * N) / (hbm_Bps * MEM_ETA)
    return max(t_flops, t_mem) + KERNEL_S


# Input channels per group below which a convolution cannot feed a tensor-core MMA, whose reduction
# slice is 8 (TF32) to 16 (FP16/BF16) elements: cuDNN runs it on the CUDA cores (NVIDIA Deep Learning
# Performance Guide, "Channels In and Out": multiples of 8 for Tensor Cores). On an H100 ResNet-50's
# 3-channel 7x7 stem ran at 33 TFLOP/s forward (probe.json "conv"), half the CUDA cores' 67 TFLOP/s.
# Grouped convolutions (ResNeXt's 4 channels per group) have cuDNN kernels of their own: not applied.
TENSOR_CORE_MIN_CHANNELS = 8


# Winograd's minimal filtering F(2x2, 3x3) computes a 2x2 output tile of a 3x3 convolution with 16
# multiplies instead of 36: 2.25x fewer (Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks",
# CVPR 2016, whose fused kernel cuDNN ships as its WINOGRAD algorithms for forward, data and filter
# gradients, since cuDNN 5). cuDNN takes it for ungrouped 3x3 unit-stride convolutions on the CUDA cores
# (FP32); tensor-core convolutions (FP16, BF16, TF32) run implicit GEMM. The transforms are adds, fused in
# the kernel: the arithmetic shrinks by the factor, the HBM floor does not. Check (out of sample, the
# factor is the algorithm's, not fitted): DeepLearningExamples' FP32 ResNet-50 on V100 (M2), whose 3x3
# layers are ungrouped, against ResNeXt-101's and SE-ResNeXt-101's grouped 3x3 layers on the same GPUs
# (benchmarks/module_accuracy.py).
WINOGRAD_F2X2_3X3 = 2.25


def conv_on_cuda_cores(K: float, taps: float, groups: int) -> bool:
    """An ungrouped convolution of fewer than TENSOR_CORE_MIN_CHANNELS input channels (K / taps of them)."""
    return groups == 1 and K / taps < TENSOR_CORE_MIN_CHANNELS


def conv_time_s(M: float, N: float, K: float, taps: float, flops: float, nbytes: float, *, groups: int,
                peak_flops: float, cuda_core_flops: float, hbm_Bps: float, eta_max: float,
                winograd: bool = False) -> float:
    """One convolution as cuDNN runs it, an implicit GEMM of (M, N, K) = (N·H_out·W_out, C_out,
    C_in/groups·k_h·k_w) that never materialises its im2col matrix: each input pixel a tile loads
    serves all k_h·k_w `taps` of the filter, so the tile's arithmetic intensity saturates at
    m = min(N·taps, K) instead of a GEMM's min(N, K); the HBM floor is the tensors it moves (`nbytes`:
    input, weights, output), not im2col's M·K. `flops` as recorded (a backward computing both gradients
    is twice the forward's 2MNK). An ungrouped convolution of fewer than TENSOR_CORE_MIN_CHANNELS input
    channels runs at the CUDA cores' `cuda_core_flops`. Component check: ResNet-50's convolutions on an
    H100 (data/device/nvidia-h100-2026-11-26 probe.json "conv", cuDNN, bf16, batch 128), where the
    GEMM form made the 3x3 layers 78% too slow (tests/measure/test_device_data.py). `winograd`: an FP32
    3x3 unit-stride convolution, whose arithmetic is WINOGRAD_F2X2_3X3 times smaller."""
    if conv_on_cuda_cores(K, taps, groups):
        peak_flops = cuda_core_flops
    m = min(N * taps, K)
    eta = eta_max * m / (m + GEMM_KAPPA * peak_flops / hbm_Bps)
    math_flops = flops / WINOGRAD_F2X2_3X3 if winograd else flops
    return max(math_flops / (peak_flops * eta), nbytes / (hbm_Bps * MEM_ETA)) + KERNEL_S


def conv_s(device: Device, dtype: DType, M: float, N: float, K: float, taps: float, flops: float,
           nbytes: float, groups: int = 1, winograd_shape: bool = False) -> float:
    """conv_time_s on `device` at σ · its GEMM ceiling; a measured GEMM table (--profile) keeps the GEMM
    form (the table's rate at the implicit-GEMM dims). `winograd_shape`: an ungrouped 3x3 unit-stride
    convolution, which cuDNN runs as Winograd in FP32."""
    winograd = winograd_shape and dtype is DType.FP32
    kp = device.kernels
    if kp is not None and kp.has_gemm(dtype):
        math_flops = flops / WINOGRAD_F2X2_3X3 if winograd else flops
        return gemm_s(device, dtype, M, N, K) * math_flops / (2.0 * M * N * K)
    return conv_time_s(M, N, K, taps, flops, nbytes, groups=groups, peak_flops=device.flops(dtype),
                       cuda_core_flops=dict(device.peak_flops).get(DType.FP32, 0.0) or device.flops(dtype),
                       hbm_Bps=device.hbm_Bps,
                       eta_max=gemm_eta_max(device.name, dtype), winograd=winograd)


def mem_time_s(nbytes: float, hbm_Bps: float) -> float:
    return nbytes / (hbm_Bps * MEM_ETA)


# --- device-level entry points: a measured kernel profile (Device.kernels) wins where it has a table ---

def gemm_s(device: Device, dtype: DType, M: float, N: float, K: float) -> float:
    """One GEMM (M×K)·(K×N) in `dtype` on `device`: the measured table if the device carries one for
    that dtype (`--profile` with a kernels section), else the analytic model above. Either is a kernel
    benchmark, so a training job runs it at σ of that: on an H200 the analytic curve at σ = 1 came within
    -4% (signed mean) of 100 measured bf16 GEMMs (benchmarks/device_check.py), so without σ a measured
    table would make the same job 1/σ faster than the model does."""
    if min(N, K) <= 0:  # an empty GEMM (DeepSeek-V4's indexer below its ratio): no kernel runs
        return 0.0
    kp = device.kernels
    if kp is not None and kp.has_gemm(dtype):
        return kp.gemm_time_s(dtype, M, N, K) / SUSTAINED
    return gemm_time_s(M, N, K, dtype.bytes, device.flops(dtype), device.hbm_Bps, gemm_eta_max(device.name, dtype))


# FlashAttention-2's kernels are compiled for these head dims (flash-attn csrc/flash_attn/src/static_switch.h
# HEADDIM_SWITCH, vendored by PyTorch's SDPA flash backend); a smaller dim runs the next template, padded
FA2_HEAD_DIMS = (32, 64, 96, 128, 160, 192, 224, 256)


def fa2_head_dim(d: float) -> float:
    """The head dim FlashAttention-2 computes for a head of `d` (FA2_HEAD_DIMS; beyond 256 unchanged)."""
    return next((t for t in FA2_HEAD_DIMS if t >= d), d)


def flash_attention_s(device: Device, dtype: DType, batch_heads: float, seq_q: float, seq_kv: float,
                      d_qk: float, d_v: float, causal: bool = True, kernel: str = "fa2") -> tuple[float, float]:
    """(forward, backward) time of fused attention over batch·heads sequences: the measured table when
    the device carries one, else FlashAttention's FLOPs (forward 2·BH·s_q·s_kv·(d_qk + d_v), halved
    when causal; backward 2.5x) at the published efficiency of `kernel` (fa2, cudnn, fa3) for that
    head dim and sequence, times σ (kernel_data.attention_efficiency). FlashAttention-2 computes a
    head of d at its template head dim at or above d (fa2_head_dim: 40 runs as 64, 80 as 96)."""
    kp = device.kernels
    if kp is not None and kp.has_attention(dtype, causal):  # a kernel benchmark: σ of it, as for GEMMs
        fwd, bwd = kp.attention_time_s(dtype, causal, batch_heads, seq_q, seq_kv, (d_qk + d_v) / 2)
        return fwd / SUSTAINED, bwd / SUSTAINED
    if kernel == "fa2":  # FlashAttention-2 runs the smallest head-dim template at or above each dim
        d_qk, d_v = fa2_head_dim(d_qk), fa2_head_dim(d_v)
    flops = 2.0 * batch_heads * seq_q * seq_kv * (d_qk + d_v) * (0.5 if causal else 1.0)
    hd, s = (d_qk + d_v) / 2, (seq_q * seq_kv) ** 0.5
    peak = device.flops(dtype) * SUSTAINED
    fwd = flops / (peak * kernel_data.attention_efficiency(device.name, dtype, kernel, causal, hd, s, "fwd"))
    bwd = 2.5 * flops / (peak * kernel_data.attention_efficiency(device.name, dtype, kernel, causal, hd, s, "bwd"))
    return fwd + KERNEL_S, bwd + 2 * KERNEL_S


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
