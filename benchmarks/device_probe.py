"""Measure on a GPU what only a GPU can show, for the kernel and module models to be checked against.

    python benchmarks/device_probe.py --out probe.json           # on the GPU machine (one CUDA device)
    python benchmarks/device_probe.py --out /tmp/p.json --smoke  # tiny shapes on CPU: checks the script runs

Sections (each one's failure is recorded in the JSON and the next one still runs):
- grouped_gemm: `torch._grouped_mm` (bf16, 2D x 3D with per-group offsets: the MoE layout torchtitan and
  Megatron's grouped linear use) for the routed-expert GEMMs of published MoE models, against one dense
  `torch.matmul` of a single group's shape and against a Python loop of per-group matmuls.
- grouped_gemm_fp8: the same expert GEMMs in FP8 with row-wise scales (`torch._scaled_grouped_mm`, what
  torchao's float8 MoE training and torchtitan run), against one row-wise `torch._scaled_mm` of a group.
- mla_attention: `scaled_dot_product_attention` with DeepSeek-V3's MLA head shapes (query/key 192 = 128 + 64
  rotary, value 128), causal, bf16, forward and backward, 16 heads (128 over TP 8), 16k tokens per call.
- conv: cuDNN convolutions of ResNet-50's layer shapes (bf16, channels-last, cudnn.benchmark), forward and
  backward (input and weight gradients) at batch 128, for the module estimate's implicit-GEMM pricing.
- modules: training steps (forward, backward, SGD; bf16 autocast, channels-last) and inference passes of
  examples/modules/resnet.py over batch sizes, timed with CUDA events, median of the timed steps.
- codec: distscope's own quantize.encode / decode (compress/quantize.py) on a large fp32 buffer, eager,
  against a device-to-device copy of the same buffer (the HBM ceiling as torch reaches it).
- embedding_bag: pooled lookups forward and backward over dims 16-256 and pooling 1-64, against the bytes
  the DLRM step model (model/embedding_cost.py) prices them by.
- fp8_scaling: `torch._scaled_mm` (e4m3, bf16 output) with per-tensor, row-wise and DeepSeek-V3 block-wise
  scales (1x128 activations, 128x128 weights; cuBLAS, CUDA >= 12.9 on sm90) beside the bf16 GEMM of the same
  shape, for model/fp8.py's recipe GEMM rates.
- conv_precision: the same convolutions in fp32 (TF32 off), TF32 and fp16; grouped_conv: ResNeXt-101's grouped
  and MobileNetV2's depthwise 3x3 convolutions (bf16, TF32); unet_conv: Stable Diffusion UNets' 3x3
  convolutions, fp16 forward at batch 2.
- modules_precision: the modules' training steps in fp32 weights with TF32 on and off.
- moe_layer: one MoE layer's routed experts forward and backward as torchtitan runs them (router, top-k,
  permute, two grouped GEMMs, unpermute), beside the grouped GEMMs alone and one dense GEMM per projection;
  moe_stages: its router, index, permute and unpermute stages timed one by one; moe_fused_permute: the
  same permute and unpermute as Transformer Engine's fused kernels, where it is installed.
- module_profile: the modules' training steps under torch.profiler, device time per kernel name;
  module_profile_layouts: the same for fp16 autocast and NCHW, as DeepLearningExamples' published runs.
- dlrm_step (benchmarks/_probe_dlrm.py): MLPerf DLRM's training step on one GPU, eager, behind a GPU spin and
  as a CUDA graph, profiled; diffusion (benchmarks/_probe_diffusion.py): Stable Diffusion 1.5 / SDXL UNets and
  the VAE decoder, fp16 inference, NCHW and channels-last, as a loop and behind a GPU spin, profiled;
  gather_sweep: random-row index_select and index_add_ (fp16, fp32) over tables of 0.25-64 GiB.
- host: host microseconds per eager call on tiny tensors (the GPU never the bottleneck): a raw op, a
  functional linear and an nn.Linear call, with and without bf16 autocast (model/host.py's OP_S).
Timing: distscope measure kernels' timer (measure/kernels.py: CUDA events around back-to-back calls
queued behind a GPU spin, median of the samples); on CPU (--smoke) wall clock.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "examples" / "modules")]

from _probe_diffusion import diffusion, diffusion_graph, group_norm  # noqa: E402, F401  (sections are looked up by name in main)
from _probe_dlrm import dlrm_step, gather_sweep  # noqa: E402, F401

# (model, hidden, moe_intermediate): the routed experts of published MoE configs (HF config.json).
MOE_SHAPES = (
    ("deepseek-v3", 7168, 2048),
    ("qwen3-235b-a22b", 4096, 1536),
    ("qwen3-30b-a3b", 2048, 768),
    ("gpt-oss-120b", 2880, 2880),
    ("mixtral-8x7b", 4096, 14336),
)


def timer(dev: str, warmup: int, iters: int) -> Callable[[Callable[[], Any]], float]:
    """Seconds per call: distscope measure kernels' timer (back-to-back calls behind a GPU spin)."""
    from distscope.measure.kernels import make_timer

    t = make_timer(dev)
    return lambda fn: t(fn, warmup, iters)


def _expert_gemms(smoke: bool) -> Iterator[tuple[dict[str, Any], int, int, int, int]]:
    """The routed-expert GEMMs both grouped sections time: (the row's identifying fields, groups, rows per
    group, N, K) for each model's up and down projection, 8 and 32 groups of 128-8,192 rows."""
    for name, hidden, inter in MOE_SHAPES[:1] if smoke else MOE_SHAPES:
        h, f = (64, 32) if smoke else (hidden, inter)
        for gemm, n, k in (("up", 2 * f, h), ("down", h, f)):
            for g in (2,) if smoke else (8, 32):
                for m in (16,) if smoke else (128, 512, 2048, 8192):
                    yield {"model": name, "gemm": gemm, "groups": g, "m_per_group": m, "n": n, "k": k}, g, m, n, k


def grouped_gemm(dev: str, smoke: bool) -> list[dict[str, Any]]:
    t = timer(dev, 3, 10)
    rows = []
    dt = torch.bfloat16
    for row, g, m, n, k in _expert_gemms(smoke):
        a = torch.randn(g * m, k, device=dev, dtype=dt)
        w = torch.randn(g, n, k, device=dev, dtype=dt)  # weights stored (out, in), as nn.Linear
        offs = torch.arange(m, g * m + 1, m, device=dev, dtype=torch.int32)
        flops = 2.0 * g * m * n * k
        try:
            bt = w.transpose(-2, -1)
            row["grouped_s"] = t(lambda a=a, bt=bt, offs=offs: torch._grouped_mm(a, bt, offs=offs))
            row["grouped_tflops"] = flops / row["grouped_s"] / 1e12
        except Exception as e:  # not every build has it (CPU builds, older torch)
            row["grouped_error"] = f"{type(e).__name__}: {e}"[:300]
        a1, b1 = a[:m], w[0].t()
        row["dense_one_s"] = t(lambda a1=a1, b1=b1: torch.matmul(a1, b1))
        row["dense_one_tflops"] = 2.0 * m * n * k / row["dense_one_s"] / 1e12
        row["loop_s"] = t(lambda a=a, w=w, g=g, m=m: [torch.matmul(a[i * m:(i + 1) * m], w[i].t()) for i in range(g)])
        row["loop_tflops"] = flops / row["loop_s"] / 1e12
        rows.append(row)
        del a, w
    return rows


def grouped_gemm_fp8(dev: str, smoke: bool) -> list[dict[str, Any]]:
    t = timer(dev, 3, 10)
    f8, rows = torch.float8_e4m3fn, []
    for row, g, m, n, k in _expert_gemms(smoke):
        a = torch.randn(g * m, k, device=dev).to(f8)
        w = torch.randn(g, n, k, device=dev).to(f8)
        offs = torch.arange(m, g * m + 1, m, device=dev, dtype=torch.int32)
        sa, sb = torch.ones(g * m, device=dev), torch.ones(g, n, device=dev)
        try:
            row["grouped_s"] = t(lambda a=a, w=w, sa=sa, sb=sb, offs=offs: torch._scaled_grouped_mm(
                a, w.transpose(-2, -1), sa, sb, offs=offs, out_dtype=torch.bfloat16))
            row["grouped_tflops"] = 2.0 * g * m * n * k / row["grouped_s"] / 1e12
            a1, w1 = a[:m], w[0]
            s1a, s1b = torch.ones(m, 1, device=dev), torch.ones(1, n, device=dev)
            row["dense_one_s"] = t(lambda a1=a1, w1=w1, s1a=s1a, s1b=s1b: torch._scaled_mm(
                a1, w1.t(), scale_a=s1a, scale_b=s1b, out_dtype=torch.bfloat16))
            row["dense_one_tflops"] = 2.0 * m * n * k / row["dense_one_s"] / 1e12
        except Exception as e:  # CPU builds, sm < 90
            row["error"] = f"{type(e).__name__}: {e}"[:300]
        rows.append(row)
        del a, w
    return rows


def mla_attention(dev: str, smoke: bool) -> list[dict[str, Any]]:
    t = timer(dev, 3, 10)
    rows = []
    heads, d_qk, d_v = (2, 24, 16) if smoke else (16, 192, 128)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    for seq in (128,) if smoke else (1024, 2048, 4096, 8192):
        b = max(1, (256 if smoke else 16384) // seq)
        q, k = (torch.randn(b, heads, seq, d_qk, device=dev, dtype=torch.bfloat16, requires_grad=True) for _ in range(2))
        v = torch.randn(b, heads, seq, d_v, device=dev, dtype=torch.bfloat16, requires_grad=True)
        flops = 2.0 * b * heads * seq * seq * (d_qk + d_v) * 0.5  # FlashAttention's convention, halved: causal
        row: dict[str, Any] = {"batch": b, "heads": heads, "seq": seq, "d_qk": d_qk, "d_v": d_v, "causal": True}
        try:
            row["fwd_s"] = t(lambda q=q, k=k, v=v: sdpa(q, k, v, is_causal=True))
            o = sdpa(q, k, v, is_causal=True)
            go = torch.ones_like(o)
            row["bwd_s"] = t(lambda o=o, go=go, q=q, k=k, v=v: torch.autograd.grad(o, (q, k, v), go, retain_graph=True))
            row["fwd_tflops"], row["bwd_tflops"] = flops / row["fwd_s"] / 1e12, 2.5 * flops / row["bwd_s"] / 1e12
        except Exception as e:  # a backend without unequal head dims
            row["error"] = f"{type(e).__name__}: {e}"[:300]
        rows.append(row)
    return rows


# (C_in, C_out, kernel, stride, H_in): every distinct convolution of ResNet-50 v1.5 (stride in the 3x3)
RESNET50_CONVS = ((3, 64, 7, 2, 224),
                  (64, 64, 1, 1, 56), (64, 64, 3, 1, 56), (64, 256, 1, 1, 56), (256, 64, 1, 1, 56),
                  (256, 128, 1, 1, 56), (128, 128, 3, 2, 56), (128, 128, 3, 1, 28), (128, 512, 1, 1, 28),
                  (512, 128, 1, 1, 28), (256, 512, 1, 2, 56),
                  (512, 256, 1, 1, 28), (256, 256, 3, 2, 28), (256, 256, 3, 1, 14), (256, 1024, 1, 1, 14),
                  (1024, 256, 1, 1, 14), (512, 1024, 1, 2, 28),
                  (1024, 512, 1, 1, 14), (512, 512, 3, 2, 14), (512, 512, 3, 1, 7), (512, 2048, 1, 1, 7),
                  (2048, 512, 1, 1, 7), (1024, 2048, 1, 2, 14))


# (C_in, C_out, kernel, stride, H_in, groups): the grouped 3x3 convolutions of ResNeXt-101 32x4d (32 groups of
# width 4 per 64 channels; stride 2 in each stage's first block) and MobileNetV2's depthwise 3x3s
GROUPED_CONVS = ((128, 128, 3, 1, 56, 32), (256, 256, 3, 2, 56, 32), (256, 256, 3, 1, 28, 32),
                 (512, 512, 3, 2, 28, 32), (512, 512, 3, 1, 14, 32), (1024, 1024, 3, 2, 14, 32),
                 (1024, 1024, 3, 1, 7, 32),
                 (96, 96, 3, 2, 112, 96), (144, 144, 3, 1, 56, 144), (192, 192, 3, 1, 28, 192),
                 (384, 384, 3, 1, 14, 384), (576, 576, 3, 1, 14, 576), (960, 960, 3, 1, 7, 960))
# Stable Diffusion UNets' 3x3 convolutions at 512 px (latent 64: SD 1.5) and 1024 px (latent 128: SDXL)
UNET_CONVS = ((320, 320, 3, 1, 64, 1), (640, 640, 3, 1, 32, 1), (1280, 1280, 3, 1, 16, 1), (1280, 1280, 3, 1, 8, 1),
              (320, 320, 3, 1, 128, 1), (640, 640, 3, 1, 64, 1), (1280, 1280, 3, 1, 32, 1))


def _conv_rows(dev: str, smoke: bool, shapes: Any, dtype: torch.dtype, label: str, batch: int,
               backward: bool = True) -> list[dict[str, Any]]:
    """cuDNN convolutions (channels-last, cudnn.benchmark) of `shapes` in `dtype`; `label` "tf32" lets cuDNN
    use TF32 tensor cores for fp32, "fp32" forbids it."""
    t = timer(dev, 3, 10)
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = label == "tf32"
    rows = []
    batch = 2 if smoke else batch
    for c_in, c_out, k, stride, h, *grp in shapes[:2] if smoke else shapes:
        groups = grp[0] if grp else 1
        h = h // 8 if smoke else h
        layer = torch.nn.Conv2d(c_in, c_out, k, stride, padding=k // 2, groups=groups, bias=False).to(dev, dtype)
        layer = layer.to(memory_format=torch.channels_last)
        x = torch.randn(batch, c_in, h, h, device=dev, dtype=dtype).to(memory_format=torch.channels_last)
        x.requires_grad_(backward)
        y = layer(x)
        h_out = y.shape[-1]
        flops = 2.0 * batch * h_out * h_out * c_out * c_in // groups * k * k
        fwd = t(lambda layer=layer, x=x: layer(x))
        row = {"batch": batch, "c_in": c_in, "c_out": c_out, "kernel": k, "stride": stride, "h_in": h,
               "h_out": h_out, "groups": groups, "dtype": label, "fwd_s": fwd, "fwd_tflops": flops / fwd / 1e12}
        if backward:
            g = torch.ones_like(y)
            bwd = t(lambda y=y, g=g, x=x, w=layer.weight: torch.autograd.grad(y, (x, w), g, retain_graph=True))
            row.update(bwd_s=bwd, bwd_tflops=2 * flops / bwd / 1e12)
        rows.append(row)
    torch.backends.cudnn.allow_tf32 = True
    return rows


def conv(dev: str, smoke: bool) -> list[dict[str, Any]]:
    return _conv_rows(dev, smoke, RESNET50_CONVS, torch.bfloat16, "bf16", 128)


def conv_precision(dev: str, smoke: bool) -> list[dict[str, Any]]:
    """ResNet-50's convolutions in fp32 (TF32 off), TF32 and fp16: the rates behind FP32/TF32 CNN runs."""
    return [r for dt, label in ((torch.float32, "fp32"), (torch.float32, "tf32"), (torch.float16, "fp16"))
            for r in _conv_rows(dev, smoke, RESNET50_CONVS, dt, label, 128)]


def grouped_conv(dev: str, smoke: bool) -> list[dict[str, Any]]:
    """ResNeXt's grouped and MobileNetV2's depthwise 3x3 convolutions, bf16 and TF32, batch 128."""
    return [r for dt, label in ((torch.bfloat16, "bf16"), (torch.float32, "tf32"))
            for r in _conv_rows(dev, smoke, GROUPED_CONVS, dt, label, 128)]


def unet_conv(dev: str, smoke: bool) -> list[dict[str, Any]]:
    """Stable Diffusion UNets' 3x3 convolutions, fp16 forward at batch 2 (one prompt with classifier-free
    guidance), as diffusion inference runs them."""
    return _conv_rows(dev, smoke, UNET_CONVS, torch.float16, "fp16", 2, backward=False)


# probe.json's precision label -> the autocast dtype (None: fp32 weights and activations, TF32 by the flags)
_AUTOCAST = {"bf16-autocast": torch.bfloat16, "fp16-autocast": torch.float16, "tf32": None, "fp32": None}


@contextlib.contextmanager
def _precision(label: str) -> Iterator[None]:
    """cudnn.benchmark on; TF32 tensor cores allowed unless `label` is "fp32"; PyTorch's defaults after."""
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = label != "fp32"
    try:
        yield
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = True, False


class _ResNetRun:
    """One examples/modules/resnet.py model on the device in `fmt`, with SGD momentum, its training step and
    inference pass under `label`'s autocast."""

    def __init__(self, dev: str, factory: str, label: str, fmt: torch.memory_format) -> None:
        import resnet

        self.dev, self.fmt, self.amp = dev, fmt, _AUTOCAST[label]
        self.model = getattr(resnet, factory)().to(dev).to(memory_format=fmt)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.01, momentum=0.9)

    def batch(self, b: int, res: int) -> tuple[torch.Tensor, torch.Tensor]:
        return (torch.randn(b, 3, res, res, device=self.dev).to(memory_format=self.fmt),
                torch.randint(0, 1000, (b,), device=self.dev))

    def _autocast(self) -> Any:
        return torch.autocast(self.dev, dtype=self.amp or torch.bfloat16, enabled=self.amp is not None)

    def train_step(self, x: torch.Tensor, y: torch.Tensor) -> None:
        self.opt.zero_grad(set_to_none=True)
        with self._autocast():
            loss = torch.nn.functional.cross_entropy(self.model(x), y)
        loss.backward()
        self.opt.step()

    def infer(self, x: torch.Tensor) -> None:
        with torch.no_grad(), self._autocast():
            self.model(x)


def _module_rows(dev: str, smoke: bool, factories: tuple[str, ...], train: tuple[int, ...],
                 infer: tuple[int, ...], label: str) -> list[dict[str, Any]]:
    """Training steps and inference passes of examples/modules/resnet.py, channels-last; `label`
    "bf16-autocast", "tf32" (fp32 weights, TF32 tensor cores allowed) or "fp32" (TF32 off)."""
    rows = []
    t = timer(dev, 3 if smoke else 5, 3 if smoke else 15)
    with _precision(label):
        for factory in factories[:1] if smoke else factories:
            run = _ResNetRun(dev, factory, label, torch.channels_last)
            res = 32 if smoke else 224
            for mode, batches in (("train", (2,) if smoke else train), ("infer", (1,) if smoke else infer)):
                for b in batches:
                    x, y = run.batch(b, res)
                    run.model.train(mode == "train")
                    s = t(functools.partial(run.train_step, x, y) if mode == "train" else functools.partial(run.infer, x))
                    rows.append({"model": factory, "mode": mode, "batch": b, "resolution": res, "dtype": label,
                                 "step_s": s, "images_per_s": b / s})
                    print(f"  {factory} {label} {mode} b={b}: {s * 1e3:.2f} ms", flush=True)
    return rows


def modules(dev: str, smoke: bool) -> list[dict[str, Any]]:
    """bf16 autocast, channels-last: ResNet-50 and ResNeXt-101 32x4d over batch sizes."""
    return _module_rows(dev, smoke, ("resnet50", "resnext101_32x4d"), (32, 64, 128, 256), (1, 8, 32, 128, 256),
                        "bf16-autocast")


def modules_precision(dev: str, smoke: bool) -> list[dict[str, Any]]:
    """The same training steps in fp32 weights and activations, with TF32 tensor cores and without."""
    return [r for label in ("tf32", "fp32")
            for r in _module_rows(dev, smoke, ("resnet50", "resnext101_32x4d"), (64, 128), (128,), label)]


# (model, hidden, expert width, experts, top-k, experts on this rank): one MoE layer's routed experts as
# torchtitan runs them on one GPU; DeepSeek-V3 as one rank of EP 8 (32 of 256 experts, which receive as
# many routed rows as the rank sends: T x top-k when the load is even)
MOE_LAYERS = (("qwen3-30b-a3b", 2048, 768, 128, 8, 128), ("qwen3-235b-a22b", 4096, 1536, 128, 8, 16),
              ("gpt-oss-120b", 2880, 2880, 128, 4, 32), ("deepseek-v3", 7168, 2048, 256, 8, 32))
ALIGN_M = 16  # rows per expert group padded to a multiple of this (torchtitan's permute for _grouped_mm)


def _permute_index(topi: torch.Tensor, L: int, k: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """torchtitan-style routing of top-k expert ids onto `L` local experts: each routed row's destination in
    the padded buffer (groups aligned to ALIGN_M rows), its token, the sort order and the groups' end offsets.
    The per-expert counts are a scatter-add, not a bincount, so nothing waits for the host."""
    ids = (topi % L).flatten()
    sorted_ids, order = ids.sort(stable=True)
    counts = torch.zeros(L, device=ids.device, dtype=torch.long).scatter_add_(0, ids, torch.ones_like(ids))
    padded = (counts + ALIGN_M - 1) // ALIGN_M * ALIGN_M
    pstart, start = padded.cumsum(0) - padded, counts.cumsum(0) - counts
    dest = pstart[sorted_ids] + torch.arange(ids.numel(), device=ids.device) - start[sorted_ids]
    return dest, order // k, order, padded.cumsum(0).to(torch.int32)


def _moe_times(t: Callable[[Callable[[], Any]], float], dev: str, h: int, f: int, E: int, k: int, L: int,
               T: int) -> dict[str, float]:
    """moe_layer's timings of one layer shape at T tokens (its docstring)."""
    dt, g0 = torch.bfloat16, torch.Generator(device=dev).manual_seed(0)
    x = torch.randn(T, h, device=dev, dtype=dt, generator=g0).requires_grad_(True)
    wr = (torch.randn(E, h, device=dev, dtype=dt, generator=g0) * h ** -0.5).requires_grad_(True)
    w1 = (torch.randn(L, h, 2 * f, device=dev, dtype=dt, generator=g0) * h ** -0.5).requires_grad_(True)
    w2 = (torch.randn(L, f, h, device=dev, dtype=dt, generator=g0) * f ** -0.5).requires_grad_(True)
    n, m_pad = T * k, T * k + ALIGN_M * L

    def experts_mm(xg: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
        u, v = torch._grouped_mm(xg, w1, offs=offs).chunk(2, dim=-1)
        return torch._grouped_mm(torch.nn.functional.silu(u) * v, w2, offs=offs)

    def block() -> tuple[torch.Tensor, torch.Tensor]:
        probs = (x @ wr.t()).float().softmax(-1)
        topv, topi = probs.topk(k, dim=-1)
        dest, tok, order, offs = _permute_index(topi, L, k)
        xg = x.new_zeros(m_pad, h).index_copy(0, dest, x[tok])
        out = experts_mm(xg, offs)[dest] * topv.flatten()[order, None].to(x.dtype)
        return x.new_zeros(T, h).index_add(0, tok, out), offs

    y, offs = block()
    gy = torch.randn_like(y)
    xg = torch.randn(m_pad, h, device=dev, dtype=dt, generator=g0).requires_grad_(True)
    gg = torch.randn_like(experts_mm(xg, offs))
    a1, a2 = torch.randn(n, h, device=dev, dtype=dt, generator=g0), torch.randn(n, f, device=dev, dtype=dt, generator=g0)
    d1, d2 = w1[0].detach(), w2[0].detach()
    return {"block_fwd_s": t(block),
            "block_fwdbwd_s": t(lambda: torch.autograd.grad(block()[0], (x, wr, w1, w2), gy)),
            "grouped_fwd_s": t(lambda: experts_mm(xg, offs)),
            "grouped_fwdbwd_s": t(lambda: torch.autograd.grad(experts_mm(xg, offs), (xg, w1, w2), gg)),
            "dense_fwd_s": t(lambda: (a1 @ d1, a2 @ d2))}


def moe_layer(dev: str, smoke: bool) -> list[dict[str, Any]]:
    """One MoE layer's routed experts, forward and backward, as torchtitan computes them: router GEMM, softmax
    top-k, expert ids to this rank's experts, sort, padded permute (groups aligned to ALIGN_M rows), two
    `torch._grouped_mm` with SwiGLU between, weighted unpermute (index_add). Timed whole and as its two
    grouped GEMMs with SwiGLU alone, beside the same rows as one dense GEMM per projection: what the
    non-GEMM work and the grouping cost over the dense curve."""
    t = timer(dev, 3, 10)
    rows = []
    for name, hidden, inter, experts, k, local in MOE_LAYERS[:1] if smoke else MOE_LAYERS:
        h, f, E, L = (64, 32, 8, 8) if smoke else (hidden, inter, experts, local)
        for T in (64,) if smoke else (4096, 16384):
            row: dict[str, Any] = {"model": name, "tokens": T, "hidden": h, "expert_ffn": f, "experts": E,
                                   "top_k": k, "local_experts": L, "expert_flops": 2.0 * T * k * 3 * h * f}
            try:
                row.update(_moe_times(t, dev, h, f, E, k, L, T))
                row["grouped_fwd_tflops"] = row["expert_flops"] / row["grouped_fwd_s"] / 1e12
                row["dense_fwd_tflops"] = row["expert_flops"] / row["dense_fwd_s"] / 1e12
                print(f"  {name} T={T}: block {row['block_fwdbwd_s'] * 1e3:.2f} ms fwd+bwd, grouped "
                      f"{row['grouped_fwdbwd_s'] * 1e3:.2f} ms, dense fwd {row['dense_fwd_s'] * 1e3:.2f} ms", flush=True)
            except Exception as e:  # CPU builds without _grouped_mm backward, sm < 90
                row["error"] = f"{type(e).__name__}: {e}"[:300]
            rows.append(row)
            if dev == "cuda":
                torch.cuda.empty_cache()
    return rows


def _profile_rows(dev: str, smoke: bool, configs: tuple[tuple[str, str, str], ...]) -> list[dict[str, Any]]:
    """torch.profiler (CPU + CUDA activity) over 3 training steps at batch 128 after 5 warm-up steps, for each
    (model, precision, layout): one row per event name with its calls and device time per step (host-side
    events included: their names start with aten::, Optimizer. ...), and the unprofiled step's time."""
    from torch.profiler import ProfilerActivity, profile

    rows: list[dict[str, Any]] = []
    acts = [ProfilerActivity.CPU, ProfilerActivity.CUDA] if dev == "cuda" else [ProfilerActivity.CPU]
    t = timer(dev, 3, 10)
    for factory, label, layout in configs[:1] if smoke else configs:
        with _precision(label):
            run = _ResNetRun(dev, factory, label, torch.channels_last if layout == "nhwc" else torch.contiguous_format)
            b, res = (2, 32) if smoke else (128, 224)
            x, y = run.batch(b, res)
            step_s = t(functools.partial(run.train_step, x, y))
            if dev == "cuda":
                torch.cuda.synchronize()
            with profile(activities=acts) as prof:
                for _ in range(3):
                    run.train_step(x, y)
                if dev == "cuda":
                    torch.cuda.synchronize()
        n0 = len(rows)
        for e in prof.key_averages():
            us = getattr(e, "self_device_time_total", 0.0) if dev == "cuda" else e.self_cpu_time_total
            if us > 0:
                rows.append({"model": factory, "dtype": label, "layout": layout, "batch": b, "kernel": e.key[:240],
                             "calls_per_step": e.count / 3, "us_per_step": us / 3, "step_s": step_s})
        total = sum(r["us_per_step"] for r in rows[n0:])
        print(f"  {factory} {label} {layout}: step {step_s * 1e3:.2f} ms; {total / 1e3:.2f} ms of events", flush=True)
    return rows


def module_profile(dev: str, smoke: bool) -> list[dict[str, Any]]:
    """Where a training step's GPU time goes: ResNet-50 and ResNeXt-101 32x4d at batch 128 in bf16 autocast,
    TF32 and fp32, channels-last (_profile_rows)."""
    return _profile_rows(dev, smoke, tuple((m, d, "nhwc") for m in ("resnet50", "resnext101_32x4d")
                                           for d in ("bf16-autocast", "tf32", "fp32")))


def module_profile_layouts(dev: str, smoke: bool) -> list[dict[str, Any]]:
    """The precisions and layouts NVIDIA DeepLearningExamples' published ResNet runs use: fp16 autocast
    (fp32 weights: cuDNN's batch norm) channels-last, and TF32 and fp16 in NCHW (_profile_rows)."""
    return _profile_rows(dev, smoke, (("resnet50", "fp16-autocast", "nhwc"), ("resnet50", "tf32", "nchw"),
                                      ("resnet50", "fp16-autocast", "nchw"), ("resnext101_32x4d", "fp16-autocast", "nhwc"),
                                      ("resnext101_32x4d", "tf32", "nchw")))


def moe_stages(dev: str, smoke: bool) -> list[dict[str, Any]]:
    """moe_layer's block split into its stages, each timed forward and forward + backward on its own inputs:
    router (GEMM, softmax, top-k), index (sort, per-expert counts, padded destinations; no gradient),
    permute (gather of the routed rows into the padded buffer), experts (the two grouped GEMMs and SwiGLU),
    unpermute (gather back, weight, index_add into the tokens). Qwen3-30B-A3B and DeepSeek-V3 (32 local
    experts) at 16k tokens."""
    t = timer(dev, 3, 10)
    dt, rows = torch.bfloat16, []
    for name, hidden, _, experts, k, local in (MOE_LAYERS[:1] if smoke else (MOE_LAYERS[0], MOE_LAYERS[3])):
        h, E, L, T = (64, 8, 8, 64) if smoke else (hidden, experts, local, 16384)
        n, m_pad = T * k, T * k + ALIGN_M * L
        g0 = torch.Generator(device=dev).manual_seed(0)
        x = torch.randn(T, h, device=dev, dtype=dt, generator=g0).requires_grad_(True)
        wr = (torch.randn(E, h, device=dev, dtype=dt, generator=g0) * h ** -0.5).requires_grad_(True)

        def router(x: torch.Tensor = x, wr: torch.Tensor = wr, k: int = k) -> tuple[torch.Tensor, torch.Tensor]:
            return (x @ wr.t()).float().softmax(-1).topk(k, dim=-1)

        topv, topi = router()
        dest, tok, order, _ = _permute_index(topi, L, k)
        wts = topv.flatten()[order, None].to(dt).detach().requires_grad_(True)
        out = torch.randn(m_pad, h, device=dev, dtype=dt, generator=g0).requires_grad_(True)

        def permute(x: torch.Tensor = x, dest: torch.Tensor = dest, tok: torch.Tensor = tok,
                    m_pad: int = m_pad) -> torch.Tensor:
            return x.new_zeros(m_pad, x.shape[1]).index_copy(0, dest, x[tok])

        def unpermute(out: torch.Tensor = out, dest: torch.Tensor = dest, tok: torch.Tensor = tok,
                      wts: torch.Tensor = wts, T: int = T) -> torch.Tensor:
            return out.new_zeros(T, out.shape[1]).index_add(0, tok, out[dest] * wts)

        row: dict[str, Any] = {"model": name, "tokens": T, "hidden": h, "top_k": k, "local_experts": L,
                               "routed_row_bytes": float(n * h * 2)}
        gr, gp, gu = torch.randn(T, k, device=dev), torch.randn(m_pad, h, device=dev, dtype=dt), torch.randn_like(x)
        for stage, fn, wrt, g in (("router", lambda: router()[0], (x, wr), gr), ("permute", permute, (x,), gp),
                                  ("unpermute", unpermute, (out, wts), gu)):
            row[f"{stage}_fwd_s"] = t(fn)
            row[f"{stage}_fwdbwd_s"] = t(lambda fn=fn, wrt=wrt, g=g: torch.autograd.grad(fn(), wrt, g))
        row["index_fwd_s"] = t(lambda topi=topi, L=L, k=k: _permute_index(topi, L, k))
        rows.append(row)
        print(f"  {name}: " + ", ".join(f"{k_} {v * 1e3:.2f} ms" for k_, v in row.items() if k_.endswith("_s")), flush=True)
    return rows


def _fused_permute_times(t: Callable[[Callable[[], Any]], float], dev: str, h: int, E: int, k: int, L: int,
                         T: int) -> dict[str, float]:
    """moe_fused_permute's timings of one shape (its docstring)."""
    from transformer_engine.pytorch import moe_permute, moe_unpermute

    g0 = torch.Generator(device=dev).manual_seed(0)
    x = torch.randn(T, h, device=dev, dtype=torch.bfloat16, generator=g0).requires_grad_(True)
    topi = torch.rand(T, E, device=dev, generator=g0).topk(k, dim=-1).indices % L
    mask = torch.zeros(T, L, device=dev, dtype=torch.bool).scatter_(1, topi, True)
    probs = (torch.rand(T, L, device=dev, generator=g0) * mask).requires_grad_(True)
    n = int(mask.sum())

    def permute() -> Any:
        return moe_permute(x, mask, num_out_tokens=n, map_type="mask")

    out, row_map = permute()
    go = torch.randn_like(out)
    y = out.detach().requires_grad_(True)

    def unpermute() -> Any:
        return moe_unpermute(y, row_map, merging_probs=probs, map_type="mask")

    gb = torch.randn_like(unpermute())
    return {"permute_fwd_s": t(permute), "permute_fwdbwd_s": t(lambda: torch.autograd.grad(permute()[0], (x,), go)),
            "unpermute_fwd_s": t(unpermute),
            "unpermute_fwdbwd_s": t(lambda: torch.autograd.grad(unpermute(), (y, probs), gb))}


def moe_fused_permute(dev: str, smoke: bool) -> list[dict[str, Any]]:
    """Transformer Engine's fused MoE permute and unpermute (`moe_permute` / `moe_unpermute` with a routing
    mask, what Megatron-Core's --moe-permute-fusion runs), forward and forward + backward, on moe_stages'
    shapes; the row records the error where Transformer Engine is not installed."""
    t = timer(dev, 3, 10)
    rows: list[dict[str, Any]] = []
    for name, hidden, _, experts, k, local in (MOE_LAYERS[:1] if smoke else (MOE_LAYERS[0], MOE_LAYERS[3])):
        h, E, L, T = (64, 8, 8, 64) if smoke else (hidden, experts, local, 16384)
        row: dict[str, Any] = {"model": name, "tokens": T, "hidden": h, "top_k": k, "local_experts": L,
                               "routed_row_bytes": float(T * k * h * 2)}
        try:
            row.update(_fused_permute_times(t, dev, h, E, k, L, T))
        except Exception as e:  # not installed, or another API version
            row["error"] = f"{type(e).__name__}: {e}"[:300]
        rows.append(row)
        print(f"  {name}: " + ", ".join(f"{k_} {v}" for k_, v in row.items() if k_.endswith(("_s", "error"))), flush=True)
    return rows


def codec(dev: str, smoke: bool) -> list[dict[str, Any]]:
    from distscope.compress.quantize import QuantConfig, decode, encode

    t = timer(dev, 3, 10)
    numel = 1 << (14 if smoke else 27)  # 128M fp32 = 512 MiB: far past the L2
    x = torch.randn(1, numel, device=dev)
    copy_s = t(lambda: x.clone())
    rows = [{"kernel": "copy", "numel": numel, "s": copy_s, "GBps_moved": 8.0 * numel / copy_s / 1e9}]
    for bits, group in ((8, 2048), (4, 128)):
        cfg = QuantConfig(bits=bits, group_size=group)
        wire = encode(x, cfg)
        enc_s = t(lambda cfg=cfg: encode(x, cfg))
        dec_s = t(lambda cfg=cfg, wire=wire: decode(wire, numel, cfg))
        rows.append({"kernel": f"int{bits} g={group}", "numel": numel, "input": "fp32", "encode_s": enc_s,
                     "decode_s": dec_s, "encode_GBps_input": 4.0 * numel / enc_s / 1e9,
                     "decode_GBps_output": 4.0 * numel / dec_s / 1e9, "wire_bytes": int(wire.numel())})
    return rows


def embedding_bag(dev: str, smoke: bool) -> list[dict[str, Any]]:
    """Pooled lookups (torch.nn.EmbeddingBag, sum, fp32 table: the kernel TorchRec's DP and the reference
    DLRM use; FBGEMM's TBE where installed is faster) forward and backward over dims and pooling, with the
    HBM bytes model/embedding_cost.lookup_bytes counts for them, for its streaming-rate assumption."""
    from distscope.dtypes import DType
    from distscope.model.embedding_cost import ID_BYTES, row_bytes

    t = timer(dev, 3, 10)
    rows_n = 1 << (12 if smoke else 22)  # 4M rows: the table far past the L2
    batch = 64 if smoke else 16384
    out = []
    for dim in ((16,) if smoke else (16, 32, 64, 128, 256)):
        bag = torch.nn.EmbeddingBag(rows_n, dim, mode="sum", sparse=True).to(dev)  # a sparse gradient: no full-table fill
        for pooling in ((1, 4) if smoke else (1, 4, 16, 64)):
            ids = torch.randint(0, rows_n, (batch, pooling), device=dev)
            fwd = t(lambda bag=bag, ids=ids: bag(ids))
            y = bag(ids)
            g = torch.ones_like(y)
            bwd = t(lambda y=y, g=g, w=bag.weight: torch.autograd.grad(y, w, g, retain_graph=True))
            read = batch * pooling * (ID_BYTES + float(row_bytes(dim, DType.FP32))) + batch * dim * 4
            out.append({"dim": dim, "pooling": pooling, "batch": batch, "rows": rows_n, "fwd_s": fwd, "bwd_s": bwd,
                        "fwd_model_bytes": read, "fwd_GBps_model_bytes": read / fwd / 1e9})
    return out


# (M, N, K): square GEMMs and DeepSeek-V3's dense projections at 8,192 tokens (HF config.json: hidden 7,168,
# MLP 18,432, q_lora 1,536)
FP8_SHAPES = ((2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192), (16384, 16384, 16384),
              (8192, 18432, 7168), (8192, 7168, 18432), (8192, 1536, 7168), (8192, 7168, 2048))


def fp8_scaling(dev: str, smoke: bool) -> list[dict[str, Any]]:
    """Seconds per GEMM for each FP8 scaling recipe (scale values are ones: the kernel is what is timed)."""
    t = timer(dev, 3, 10)
    f8 = torch.float8_e4m3fn
    rows = []
    for M, N, K in ((256, 256, 256),) if smoke else FP8_SHAPES:
        a16 = torch.randn(M, K, device=dev, dtype=torch.bfloat16)
        w16 = torch.randn(N, K, device=dev, dtype=torch.bfloat16)  # (out, in), as nn.Linear
        a, b = a16.to(f8), w16.to(f8).t()  # row-major A, column-major B: what _scaled_mm takes
        one = torch.ones((), device=dev)
        scales = {
            "tensorwise": (one, one),
            "rowwise": (torch.ones(M, 1, device=dev), torch.ones(1, N, device=dev)),
            # 1x128 scales outer-dim-major (stride 1 along M), 128x128 as (K/128, N/128) for B = W^T
            "blockwise_1x128_128x128": (torch.ones(K // 128, M, device=dev).t(),
                                        torch.ones(N // 128, K // 128, device=dev).t()),
            "blockwise_1x128_1x128": (torch.ones(K // 128, M, device=dev).t(), torch.ones(K // 128, N, device=dev)),
        }
        flops = 2.0 * M * N * K
        row: dict[str, Any] = {"m": M, "n": N, "k": K}
        row["bf16_s"] = t(lambda a16=a16, w16=w16: torch.matmul(a16, w16.t()))
        row["bf16_tflops"] = flops / row["bf16_s"] / 1e12
        for name, (sa, sb) in scales.items():
            try:
                row[f"{name}_s"] = t(lambda a=a, b=b, sa=sa, sb=sb: torch._scaled_mm(
                    a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16))
                row[f"{name}_tflops"] = flops / row[f"{name}_s"] / 1e12
            except Exception as e:  # CPU builds, older CUDA, or a layout this build refuses
                row[f"{name}_error"] = f"{type(e).__name__}: {e}"[:300]
        rows.append(row)
        del a16, w16, a, b
    return rows


def host(dev: str, smoke: bool) -> list[dict[str, Any]]:
    """Host seconds per eager call when the GPU is never the bottleneck (tiny tensors, no sync inside the
    loop): what model/host.py's OP_S stands for, raw and as a module call, with and without autocast."""
    n = 200 if smoke else 5000
    x = torch.randn(8, 64, device=dev)
    lin = torch.nn.Linear(64, 64).to(dev)
    cases: dict[str, Any] = {
        "aten::add": lambda: torch.add(x, x),
        "F.linear": lambda: torch.nn.functional.linear(x, lin.weight, lin.bias),
        "nn.Linear call": lambda: lin(x),
    }
    rows = []
    for name, fn in cases.items():
        for amp in (False, True):
            for _ in range(50):
                fn()
            if dev == "cuda":
                torch.cuda.synchronize()
            with torch.autocast(dev, dtype=torch.bfloat16, enabled=amp):
                t0 = time.perf_counter()
                for _ in range(n):
                    fn()
                t1 = time.perf_counter()
            if dev == "cuda":
                torch.cuda.synchronize()
            rows.append({"call": name, "autocast_bf16": amp, "host_us_per_call": round((t1 - t0) / n * 1e6, 2)})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--smoke", action="store_true", help="tiny shapes on CPU")
    ap.add_argument("--sections", default="grouped_gemm,grouped_gemm_fp8,modules,codec,host,embedding_bag,fp8_scaling,mla_attention,conv,"
                    "conv_precision,grouped_conv,unet_conv,modules_precision,moe_layer,moe_stages,module_profile,"
                    "module_profile_layouts,moe_fused_permute,dlrm_step,diffusion,"
                    "group_norm,diffusion_graph,gather_sweep")
    args = ap.parse_args()
    dev = "cpu" if args.smoke or not torch.cuda.is_available() else "cuda"
    result: dict[str, Any] = {
        "format": "distscope.device_probe/1",
        "device": torch.cuda.get_device_name() if dev == "cuda" else "cpu",
        "torch": torch.__version__, "cuda": torch.version.cuda,
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
    }
    for name in args.sections.split(","):
        t0 = time.perf_counter()
        print(f"[{name}] ...", flush=True)
        try:
            result[name] = {"rows": globals()[name](dev, args.smoke)}
        except Exception:
            result[name] = {"error": traceback.format_exc()[-2000:]}
            print(result[name]["error"], flush=True)
        result[name]["wall_s"] = round(time.perf_counter() - t0, 1)
        args.out.write_text(json.dumps(result, indent=1) + "\n")
        print(f"[{name}] {result[name]['wall_s']} s", flush=True)


if __name__ == "__main__":
    main()
