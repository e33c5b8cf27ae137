"""`distscope measure kernels`: time GEMMs, scaled-dot-product attention and element-wise passes with
torch on this machine and tabulate their throughput (schema: measure/kernel_profile.py).

- GEMM: `torch.matmul` of (M×K)·(K×N) over a grid of M (tokens per micro-batch: b·s/cp) and N, K
  (hidden and the TP-sharded projection widths plans produce). FP8 runs `torch._scaled_mm` (row-major
  A, column-major B, per-tensor scales, bf16 output), as Transformer Engine's FP8 GEMMs do, on GPUs
  with FP8 tensor cores (compute capability >= 8.9).
- Attention: `F.scaled_dot_product_attention` on (B, H, S, D) tensors, causal and not, over sequence
  length and head dim, forward and forward+backward; B·S tokens and H·D width held fixed as in
  FlashAttention's benchmark (Dao 2023: 16k tokens, width 2048).
- Element-wise: `torch.add(x, 1, out=y)` (read + write) over buffer sizes, against memory bandwidth.

Timing: on a GPU, CUDA events around a sample of back-to-back calls (enough for 2 ms, at most 100)
queued behind a `torch.cuda._sleep` spin, so that host launch overhead cannot starve the GPU between
calls: the time per call is the kernels' own. (Timing one call between events measured a 512x256x256
bf16 GEMM at 22 us on an H200, the host's launch time, not the kernel's.) Wall clock (perf_counter) on
CPU. The reported time is the median of `iters` samples. torch is imported inside the functions.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import platform
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from distscope.dtypes import DType
from distscope.errors import DistscopeError
from distscope.measure.kernel_profile import AttentionTable, Grid, KernelProfile


@dataclasses.dataclass(frozen=True, kw_only=True)
class KernelSweep:
    """What to measure. `quick()` is the CPU-sized sweep tests run; `full()` the GPU one."""

    gemm_m: tuple[int, ...]
    gemm_nk: tuple[int, ...]
    attn_seq: tuple[int, ...]
    attn_head_dim: tuple[int, ...]
    attn_tokens: int  # B·S per call
    attn_width: int  # H·D per call
    elementwise_bytes: tuple[int, ...]
    dtypes: tuple[DType, ...]
    warmup: int = 2
    iters: int = 5

    def __post_init__(self) -> None:
        for f in ("gemm_m", "gemm_nk", "attn_seq", "attn_head_dim", "elementwise_bytes"):
            v = getattr(self, f)
            if not v or any(x < 1 for x in v):
                raise DistscopeError(f"{f}={list(v)!r} must be a non-empty list of integers >= 1")
        if self.iters < 1 or self.warmup < 0:
            raise DistscopeError(f"iters={self.iters} must be >= 1 and warmup={self.warmup} >= 0")
        bad = [d.value for d in self.dtypes if d not in (DType.FP32, DType.FP16, DType.BF16, DType.FP8)]
        if bad or not self.dtypes:
            raise DistscopeError(f"dtypes={bad or []!r}: choose among fp32, fp16, bf16, fp8")

    @classmethod
    def quick(cls, dtypes: Sequence[DType] = (DType.FP32, DType.BF16)) -> KernelSweep:
        return cls(gemm_m=(64, 256), gemm_nk=(64, 256), attn_seq=(64, 128), attn_head_dim=(32, 64),
                   attn_tokens=256, attn_width=128, elementwise_bytes=(1 << 16, 1 << 20, 1 << 23),
                   dtypes=tuple(dtypes), warmup=1, iters=3)

    @classmethod
    def full(cls, dtypes: Sequence[DType] = (DType.BF16, DType.FP16, DType.FP8)) -> KernelSweep:
        return cls(gemm_m=(512, 2048, 8192, 32768), gemm_nk=(256, 1024, 4096, 16384, 32768),
                   attn_seq=(512, 1024, 2048, 4096, 8192, 16384), attn_head_dim=(64, 128, 256),
                   attn_tokens=16384, attn_width=2048,
                   elementwise_bytes=tuple(1 << k for k in range(20, 32, 2)), dtypes=tuple(dtypes), warmup=5, iters=20)


SAMPLE_S = 2e-3  # GPU time one timed sample spans at least (back-to-back calls of a short kernel)
MAX_CALLS = 100
# torch.cuda._sleep spins this many clock cycles per queued call: 50 us at 2 GHz, above a torch call's
# host cost, so the queue never runs dry while the host is still launching the sample
SLEEP_CYCLES_PER_CALL = 100_000


def calls_per_sample(one_call_s: float) -> int:
    """Back-to-back calls per timed sample: enough that a sample lasts SAMPLE_S, at most MAX_CALLS."""
    return int(min(MAX_CALLS, max(1, SAMPLE_S // max(one_call_s, 1e-7))))


def make_timer(device: str) -> Callable[[Callable[[], Any], int, int], float]:
    import torch

    def cuda_time(fn: Callable[[], Any], warmup: int, iters: int) -> float:
        for _ in range(warmup):
            fn()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        reps = calls_per_sample(start.elapsed_time(end) / 1e3)
        times = []
        for _ in range(iters):
            # hold the GPU while the host queues the sample's calls, so the events time the kernels and
            # not the host's launches (10-20 us per torch call: more than a small GEMM takes)
            torch.cuda._sleep(reps * SLEEP_CYCLES_PER_CALL)
            start.record()
            for _ in range(reps):
                fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3 / reps)
        return statistics.median(times)

    def cpu_time(fn: Callable[[], Any], warmup: int, iters: int) -> float:
        for _ in range(warmup):
            fn()
        times = []
        for _ in range(iters):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return statistics.median(times)

    return cuda_time if device.startswith("cuda") else cpu_time


def _torch_dtype(dt: DType) -> Any:
    import torch

    return {DType.FP32: torch.float32, DType.FP16: torch.float16, DType.BF16: torch.bfloat16}[dt]


def fp8_supported(device: str) -> bool:
    import torch

    return device.startswith("cuda") and torch.cuda.get_device_capability() >= (8, 9) and hasattr(torch, "_scaled_mm")


def _gemm_fn(device: str, dt: DType, M: int, N: int, K: int) -> Callable[[], Any]:
    import torch

    if dt is DType.FP8:
        a = torch.randn(M, K, device=device).to(torch.float8_e4m3fn)
        b = torch.randn(N, K, device=device).to(torch.float8_e4m3fn).t()  # column-major (K, N)
        one = torch.ones((), device=device)
        return lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    a = torch.randn(M, K, device=device, dtype=_torch_dtype(dt))
    b = torch.randn(K, N, device=device, dtype=_torch_dtype(dt))
    return lambda: torch.matmul(a, b)


def _attn_fns(device: str, dt: DType, seq: int, head_dim: int, tokens: int, width: int,
              causal: bool) -> tuple[Callable[[], Any], Callable[[], Any]]:
    import torch
    import torch.nn.functional as F

    batch = max(tokens // seq, 1)
    heads = max(width // head_dim, 1)
    shape = (batch, heads, seq, head_dim)
    q, k, v = (torch.randn(shape, device=device, dtype=_torch_dtype(dt), requires_grad=True) for _ in range(3))
    grad = torch.randn(shape, device=device, dtype=_torch_dtype(dt))

    def fwd() -> Any:
        with torch.no_grad():
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    def fwd_bwd() -> Any:
        out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        out.backward(grad)
        return out

    return fwd, fwd_bwd


def measure_kernels(sweep: KernelSweep, device: str = "", progress: Callable[[], None] | None = None) -> KernelProfile:
    """Run the sweep on `device` ('cuda', 'cpu'; default: cuda when present) and tabulate it."""
    import torch

    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise DistscopeError(f"--device={device!r}: torch sees no CUDA device")
    if device not in ("cpu",) and not device.startswith("cuda"):
        raise DistscopeError(f"--device={device!r} must be cpu or cuda[:N]")
    timer = make_timer(device)
    tick = progress or (lambda: None)
    dtypes = [d for d in sweep.dtypes if d is not DType.FP8 or fp8_supported(device)]
    if not dtypes:
        raise DistscopeError(f"dtypes={[d.value for d in sweep.dtypes]!r}: none runs on {device} (fp8 needs a GPU "
                             "with FP8 tensor cores)")
    gemm: dict[DType, Grid] = {}
    for dt in dtypes:
        vals = []
        for M in sweep.gemm_m:
            for N in sweep.gemm_nk:
                for K in sweep.gemm_nk:
                    t = timer(_gemm_fn(device, dt, M, N, K), sweep.warmup, sweep.iters)
                    vals.append(2.0 * M * N * K / t / 1e12)
                    tick()
        gemm[dt] = Grid(axes=(tuple(map(float, sweep.gemm_m)), tuple(map(float, sweep.gemm_nk)),
                              tuple(map(float, sweep.gemm_nk))), values=tuple(vals))
    attention: dict[tuple[DType, bool], AttentionTable] = {}
    for dt in (d for d in dtypes if d is not DType.FP8):  # FP8 attention needs TE/cuDNN, not SDPA
        for causal in (True, False):
            fwd_v, bwd_v = [], []
            for seq in sweep.attn_seq:
                for hd in sweep.attn_head_dim:
                    fwd, fwd_bwd = _attn_fns(device, dt, seq, hd, sweep.attn_tokens, sweep.attn_width, causal)
                    t_f = timer(fwd, sweep.warmup, sweep.iters)
                    t_fb = timer(fwd_bwd, sweep.warmup, sweep.iters)
                    batch, heads = max(sweep.attn_tokens // seq, 1), max(sweep.attn_width // hd, 1)
                    flops = 4.0 * batch * heads * seq * seq * hd * (0.5 if causal else 1.0)
                    fwd_v.append(flops / t_f / 1e12)
                    # backward alone = (forward+backward) - forward; floor at 10% of the pair so timer
                    # noise on tiny CPU shapes cannot produce a non-positive time
                    bwd_v.append(2.5 * flops / max(t_fb - t_f, 0.1 * t_fb) / 1e12)
                    tick()
            axes = (tuple(map(float, sweep.attn_seq)), tuple(map(float, sweep.attn_head_dim)))
            attention[(dt, causal)] = AttentionTable(fwd_tflops=Grid(axes=axes, values=tuple(fwd_v)),
                                                     bwd_tflops=Grid(axes=axes, values=tuple(bwd_v)))
    el = []
    for nbytes in sweep.elementwise_bytes:
        n = max(nbytes // 8, 1)  # fp32 in and out: 8 bytes moved per element
        x = torch.randn(n, device=device)
        y = torch.empty_like(x)
        t = timer(functools.partial(torch.add, x, 1.0, out=y), sweep.warmup, sweep.iters)
        el.append(8.0 * n / t / 1e9)
        tick()
    elementwise = Grid(axes=(tuple(8.0 * max(b // 8, 1) for b in sweep.elementwise_bytes),), values=tuple(el))
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d")
    threads = f", {torch.get_num_threads()} threads" if device == "cpu" else ""
    sdpa = ""
    if device.startswith("cuda") and attention:
        dt = next(d for d in dtypes if d is not DType.FP8)
        try:  # a label for the attention rows; the measurement stands without it
            sdpa = f", SDPA ran {'; '.join(sdpa_kernels(device, dt, sweep.attn_tokens, sweep.attn_width)) or 'no kernel'}"
        except Exception as exc:  # any profiler failure
            sdpa = f", SDPA kernels not read ({type(exc).__name__})"
    return KernelProfile(device=device_description(device), gemm=gemm, attention=attention, elementwise=elementwise,
                         source=f"distscope measure kernels, torch {torch.__version__}, {when}{threads}{sdpa}")


def sdpa_kernels(device: str, dt: DType, tokens: int, width: int) -> list[str]:
    """The device kernels one causal SDPA forward and backward launch (which backend torch chose: flash,
    cuDNN, memory-efficient), their names cut at the first '(' or '<'."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    _, fwd_bwd = _attn_fns(device, dt, 1024, 128, tokens, width, True)
    fwd_bwd()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fwd_bwd()
        torch.cuda.synchronize()
    names = []
    for e in prof.events():
        name = str(e.name).split("(")[0].split("<")[0].strip()
        if e.device_type == torch.autograd.DeviceType.CUDA and name and name not in names and not name.startswith(
                ("Memcpy", "Memset", "void at::native::vectorized", "void at::native::elementwise")):
            names.append(name)
    return names[:4]


def device_description(device: str) -> str:
    import torch

    if device.startswith("cuda"):
        return str(torch.cuda.get_device_name(torch.device(device)))
    return f"cpu: {platform.processor() or platform.machine()}"


def sweep_points(sweep: KernelSweep, fp8: bool) -> int:
    dts = [d for d in sweep.dtypes if d is not DType.FP8 or fp8]
    g = len(dts) * len(sweep.gemm_m) * len(sweep.gemm_nk) ** 2
    a = 2 * len([d for d in dts if d is not DType.FP8]) * len(sweep.attn_seq) * len(sweep.attn_head_dim)
    return g + a + len(sweep.elementwise_bytes)
