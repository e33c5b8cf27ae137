"""device_probe's diffusion section: one denoiser evaluation and one VAE decode, as serve diffusion prices them.

examples/modules' Stable Diffusion 1.5 UNet (latent 64: 512 px), SDXL UNet (latent 128: 1024 px), both at
batch 2 (classifier-free guidance's two halves), and the VAE decoder at latent 64 and 128 (batch 1), in fp16
weights (the pipelines' `torch_dtype=torch.float16`), random weights, `torch.no_grad`, diffusers' default
attention processor (scaled_dot_product_attention), in NCHW (the pipelines' default) and channels-last.
Each is timed as a plain loop (`wall_s`: the host issues op by op, as a pipeline does) and behind a GPU
spin (`gpu_s`: device_probe's timer, the kernels alone), and profiled once in NCHW (device time per kernel
name), so the module model's convolution, attention and normalization prices can be checked against it.
"""

from __future__ import annotations

from typing import Any

import torch


def _cases(dev: str, smoke: bool) -> list[tuple[str, str, str, tuple[tuple[int, ...], ...]]]:
    """(name, example file, factory, input shapes)."""
    if smoke:
        return [("sd15-unet", "sd15", "unet", ((2, 4, 16, 16), (2, 77, 768)))]
    return [("sd15-unet", "sd15", "unet", ((2, 4, 64, 64), (2, 77, 768))),
            ("sdxl-unet", "sdxl", "unet", ((2, 4, 128, 128), (2, 77, 2048))),
            ("vae-decoder", "sdxl", "vae_decoder", ((1, 4, 64, 64),)),
            ("vae-decoder", "sdxl", "vae_decoder", ((1, 4, 128, 128),))]


def _build(file: str, factory: str, dev: str, dt: torch.dtype) -> torch.nn.Module:
    """examples/modules/<file>.py's `factory`, its random weights made on the device (not in fp32 on the
    host), in `dt`, in eval mode."""
    import importlib

    with torch.device(dev):
        return getattr(importlib.import_module(file), factory)().to(dev, dt).eval()


def diffusion(dev: str, smoke: bool) -> list[dict[str, Any]]:
    from _probe_dlrm import wall_s
    from device_probe import timer

    dt = torch.float16 if dev == "cuda" else torch.float32
    t = timer(dev, 3, 10)
    rows: list[dict[str, Any]] = []
    built: dict[tuple[str, str], torch.nn.Module] = {}
    for name, file, factory, shapes in _cases(dev, smoke):
        key = (file, factory)
        if key not in built:
            built.clear()  # one model on the GPU at a time
            built[key] = _build(file, factory, dev, dt)
        model = built[key]
        g = torch.Generator(device=dev).manual_seed(0)
        xs = [torch.randn(s, device=dev, dtype=dt, generator=g) for s in shapes]
        for layout in ("nchw", "channels_last"):
            fmt = torch.channels_last if layout == "channels_last" else torch.contiguous_format
            model.to(memory_format=fmt)
            args = [x.to(memory_format=fmt) if x.dim() == 4 else x for x in xs]

            def call(model: torch.nn.Module = model, args: list[torch.Tensor] = args) -> Any:
                with torch.no_grad():
                    return model(*args)

            row: dict[str, Any] = {"model": name, "input": "x".join(map(str, shapes[0])), "dtype": str(dt)[6:],
                                   "layout": layout, "wall_s": wall_s(dev, call, 3 if smoke else 20),
                                   "gpu_s": t(call)}
            if layout == "nchw":
                row["kernels"] = _profile(call, dev)
            rows.append(row)
            print(f"  {name} {row['input']} {layout}: wall {row['wall_s'] * 1e3:.2f} ms, "
                  f"kernels {row['gpu_s'] * 1e3:.2f} ms", flush=True)
    return rows


def _profile(call: Any, dev: str) -> list[dict[str, Any]]:
    """Device time per call of each kernel name over 2 calls (top 40), and the number of kernels per call."""
    from torch.profiler import ProfilerActivity, profile

    acts = [ProfilerActivity.CPU, ProfilerActivity.CUDA] if dev == "cuda" else [ProfilerActivity.CPU]
    with profile(activities=acts) as prof:
        for _ in range(2):
            call()
        if dev == "cuda":
            torch.cuda.synchronize()
    out = [{"kernel": e.key[:200], "calls": e.count / 2, "us": e.self_device_time_total / 2}
           for e in prof.key_averages()
           if dev == "cuda" and e.self_device_time_total > 0 and not e.key.startswith(("aten::", "cuda"))]
    out.sort(key=lambda r: -r["us"])
    return [*out[:40], {"kernel": "(all)", "calls": sum(r["calls"] for r in out), "us": sum(r["us"] for r in out)}]


# (batch, channels, side): the Stable Diffusion UNets' and VAE decoder's group-norm inputs (32 groups), and
# a few more rows per group (batch 8) to show how the kernel's parallelism over batch x groups sets its rate
GROUP_NORM_SHAPES = ((2, 320, 64), (2, 640, 32), (2, 1280, 16), (2, 320, 128), (2, 640, 64), (2, 1280, 32),
                     (1, 512, 64), (1, 512, 128), (1, 512, 256), (1, 256, 512), (1, 128, 1024), (1, 512, 512),
                     (8, 320, 64), (8, 512, 128), (16, 512, 128))


def group_norm(dev: str, smoke: bool) -> list[dict[str, Any]]:
    """nn.GroupNorm(32, C) forward, fp16, NCHW and channels-last, on the diffusion models' shapes: seconds and
    the rate at which it moves its input and output once (the streaming price the module model gives it)."""
    from device_probe import timer

    t = timer(dev, 3, 10)
    dt = torch.float16 if dev == "cuda" else torch.float32
    rows = []
    for n, c, s in ((1, 64, 16),) if smoke else GROUP_NORM_SHAPES:
        gn = torch.nn.GroupNorm(32, c).to(dev, dt)
        for layout, fmt in (("nchw", torch.contiguous_format), ("channels_last", torch.channels_last)):
            x = torch.randn(n, c, s, s, device=dev, dtype=dt).to(memory_format=fmt)
            with torch.no_grad():
                sec = t(lambda gn=gn, x=x: gn(x))
            moved = 2.0 * x.numel() * x.element_size()
            rows.append({"batch": n, "channels": c, "side": s, "groups": 32, "layout": layout, "dtype": str(dt)[6:],
                         "fwd_s": sec, "GBps_in_out": moved / sec / 1e9})
            print(f"  n={n} c={c} {s}x{s} {layout}: {sec * 1e6:.1f} us, {moved / sec / 1e9:.0f} GB/s", flush=True)
            del x
    return rows


def diffusion_graph(dev: str, smoke: bool) -> list[dict[str, Any]]:
    """The Stable Diffusion 1.5 and SDXL UNets (NCHW, fp16, batch 2) captured as one CUDA graph and replayed:
    their GPU time without the host's eager issue (what torch.compile's reduce-overhead mode and distrifuser
    run); beside it the eager loop again."""
    from _probe_dlrm import graph_s, wall_s

    dt = torch.float16 if dev == "cuda" else torch.float32
    rows = []
    for name, file, factory, shapes in _cases(dev, smoke)[:2]:
        model = _build(file, factory, dev, dt)
        g = torch.Generator(device=dev).manual_seed(0)
        xs = [torch.randn(s, device=dev, dtype=dt, generator=g) for s in shapes]

        def call(model: torch.nn.Module = model, xs: list[torch.Tensor] = xs) -> Any:
            with torch.no_grad():
                return model(*xs)

        row: dict[str, Any] = {"model": name, "input": "x".join(map(str, shapes[0])), "dtype": str(dt)[6:],
                               "layout": "nchw", "eager_wall_s": wall_s(dev, call, 3 if smoke else 20)}
        if dev == "cuda":
            try:
                row["graph_s"] = graph_s(call, 20)
            except Exception as e:  # a capture this build refuses: recorded
                row["graph_error"] = f"{type(e).__name__}: {e}"[:300]
        rows.append(row)
        graph_ms = row.get("graph_s", float("nan")) * 1e3
        print(f"  {name}: eager {row['eager_wall_s'] * 1e3:.2f} ms, graph {graph_ms:.2f} ms", flush=True)
        del model
    return rows
