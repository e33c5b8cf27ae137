"""`distscope serve diffusion`: one image's denoising loop on 1..N GPUs under patch parallelism
(model/patch_parallel.py), its latency and speed-up per GPU count and mode."""

from __future__ import annotations

import dataclasses
from typing import Any

from distscope.errors import DistscopeError
from distscope.model import host


@dataclasses.dataclass(frozen=True)
class DiffusionFlags:
    """What `serve diffusion` reads from its flags."""

    model: str
    input: str | None
    cluster: str
    gpus: str  # comma list
    modes: str  # comma list of PatchMode values, or "all"
    steps: int
    warmup_steps: int
    pcpp_ratio: float
    cfg_split: bool
    cuda_graph: bool
    vae: str | None = None  # a decoder module priced once after the loop, on every GPU (not split)
    vae_input: str | None = None
    host_op_us: float | None = None  # --host-op-us: the eager host floor's time per op (SystemFlags)


def _gpu_counts(text: str) -> list[int]:
    try:
        counts = [int(x) for x in text.split(",")]
    except ValueError:
        raise DistscopeError(f"--gpus={text!r} must be a comma list of positive integers, e.g. 1,2,4,8") from None
    if not counts or any(c < 1 for c in counts):
        raise DistscopeError(f"--gpus={text!r} must be a comma list of positive integers, e.g. 1,2,4,8")
    return sorted(set(counts))


def diffusion_sweep(f: DiffusionFlags, progress: Any = None) -> dict[str, Any]:
    """Every (mode, GPU count) of the flags, as one JSON-ready dict (one line on bad input)."""
    from distscope.enums import parse_list
    from distscope.model.patch_parallel import PatchMode, PatchPlan, decode_s, sweep
    from distscope.scenario import SystemFlags, build_cluster
    from distscope.workload.module_graph import is_module_ref, parse_inputs, trace_ref

    if not is_module_ref(f.model):
        raise DistscopeError(f"--model {f.model!r}: serve diffusion prices a torch module's denoising loop: "
                             "--model torch:FILE.py:FACTORY (e.g. examples/modules/sdxl.py:unet)")
    try:
        import torch  # noqa: F401  (the module is traced with it)
    except ImportError:
        raise DistscopeError("serve diffusion traces a torch module and needs PyTorch: pip install 'distscope[torch]'") \
            from None
    counts = _gpu_counts(f.gpus)
    modes = list(PatchMode) if f.modes.strip().lower() == "all" else parse_list(PatchMode, f.modes, "--mode",
                                                                              "patch-parallel mode")
    inputs = parse_inputs(f.input)
    cluster = build_cluster(SystemFlags(cluster=f.cluster, gpus=max(counts), host_op_us=f.host_op_us))
    plans = [PatchPlan(gpus=g, mode=m, steps=f.steps, warmup_steps=f.warmup_steps, cfg_split=f.cfg_split,
                       pcpp_ratio=f.pcpp_ratio, cuda_graph=f.cuda_graph) for m in modes for g in counts]
    decode = 0.0
    if f.vae is not None:
        if not is_module_ref(f.vae) or not f.vae_input:
            raise DistscopeError(f"--vae {f.vae!r}: give the decoder as torch:FILE.py:FACTORY and its latent with "
                                 "--vae-input (e.g. --vae torch:examples/modules/sdxl.py:vae_decoder --vae-input "
                                 "z:1x4x128x128:tf32:nchw)")
        decode = decode_s(trace_ref(f.vae, parse_inputs(f.vae_input), inference=True), cluster.device, f.cuda_graph)
    elif f.vae_input is not None:
        raise DistscopeError("--vae-input is the decoder's latent: give --vae too")
    runs = sweep(lambda x: trace_ref(f.model, x, inference=True), inputs, cluster, plans, progress, decode)
    return {"model": f.model, "input": f.input, "cluster": cluster.name, "device": cluster.device.name,
            "vae": f.vae, "vae_input": f.vae_input, "decode_s": decode,
            "steps": f.steps, "warmup_steps": f.warmup_steps, "cfg_split": f.cfg_split, "cuda_graph": f.cuda_graph,
            "pcpp_ratio": f.pcpp_ratio, "runs": [r.to_dict() for r in runs]}


def diffusion_cmd(f: DiffusionFlags, *, as_json: bool) -> None:
    from rich.table import Table

    from distscope.report.console import out, print_json
    from distscope.report.progress import progress

    with progress(None, "tracing the denoiser per patch shape") as bar:
        res = diffusion_sweep(f, bar)
    if as_json:
        print_json(res)
        return
    t = Table(title=f"{f.model}: {f.steps} steps on {res['device']} ({res['cluster']}), "
                    f"CFG split {'on' if f.cfg_split else 'off'}, CUDA graphs {'on' if f.cuda_graph else 'off'}")
    for c in ("mode", "GPUs", "patches", "latency s", "speed-up", "efficiency", "compute ms/step",
              "exchange MB/step", "comm ms/step", "sync steps"):
        t.add_column(c, justify="left" if c == "mode" else "right")
    for r in res["runs"]:
        t.add_row(r["mode"], str(r["gpus"]), str(r["patches"]), f"{r['latency_s']:.3f}", f"{r['speedup']:.2f}x",
                  f"{r['efficiency']:.0%}", f"{r['compute_s_per_step'] * 1e3:.1f}",
                  f"{r['exchange_bytes_per_step'] / 1e6:.1f}", f"{r['async_comm_s_per_step'] * 1e3:.2f}",
                  str(r["sync_steps"]))
    out.print(t)
    out.print("comm ms/step: the overlapped exchange of a step (a step takes the larger of it and the compute); "
              "sync steps block on one collective per layer", markup=False)
    if f.vae is not None:
        out.print(f"latency includes one decode of {res['decode_s']:.3f} s after the loop ({f.vae}), whole on every "
                  "GPU: it is not split, so it caps the speed-up", markup=False)
    if not f.cuda_graph:
        out.print(f"--eager: {host.EAGER_MODULE_NOTE}", markup=False)
