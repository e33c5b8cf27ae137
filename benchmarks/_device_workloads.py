"""device_check.py's whole-workload comparisons: group norm kernels, diffusion inference and one GPU's DLRM step
(device_probe's group_norm, diffusion, diffusion_graph and dlrm_step sections) against what distscope prices.
Only the group norm's statistics rate (module_estimate.GN_ROW_ELEMS_PER_S, GN_ROWS_SAT) was read off these
files, from the group_norm section's largest NCHW shapes; the rest is out of sample.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from _device_layers import _pct, _stats, kernel_category
from distscope.dtypes import DType
from distscope.model import efficiency as eff
from distscope.model.module_estimate import group_norm_stats_s, infer_module, op_s
from distscope.system.device import get_device
from distscope.workload.module_graph import OpKind, load_factory, parse_inputs, trace_module

REPO = Path(__file__).resolve().parents[1]
# --host-op-us 50, read off the H200's eager SD 1.5 UNet (36.9 ms for 729 traced ops): the rest check it
EAGER_HOST_OP_S = 50e-6
# device_probe's diffusion cases: (model label, example file, factory, the --input spec's tail after the shapes)
_DIFFUSION = {"sd15-unet": ("sd15.py", "unet", "x:{}:fp16:nchw,ctx:2x77x768:fp16"),
              "sdxl-unet": ("sdxl.py", "unet", "x:{}:fp16:nchw,ctx:2x77x2048:fp16"),
              "vae-decoder": ("sdxl.py", "vae_decoder", "z:{}:fp16:nchw")}


def group_norm(probe: dict[str, Any], device: str) -> dict[str, Any]:
    """nn.GroupNorm(32, C) forward (NCHW fp16) against the statistics pass at its per-row rate plus the
    normalising pass at the streaming rate, and against the streaming price alone (three passes)."""
    dev = get_device(device)
    model, streaming = [], []
    for r in probe.get("group_norm", {}).get("rows", []):
        if r["layout"] != "nchw":
            continue
        elems = r["batch"] * r["channels"] * r["side"] ** 2
        nbytes = elems * DType.FP16.bytes
        t = group_norm_stats_s(elems, r["batch"] * r["groups"]) + eff.elementwise_s(dev, 2 * nbytes, 1)
        model.append(_pct(t, r["fwd_s"]))
        streaming.append(_pct(eff.elementwise_s(dev, 3 * nbytes, 1), r["fwd_s"]))
    return {"model": _stats(model), "streaming_only": _stats(streaming)} if model else {}


def _measured_categories(kernels: list[dict[str, Any]]) -> dict[str, float]:
    """Profiled ms per call by category; what the top kernels leave of the total goes to "other"."""
    out: dict[str, float] = defaultdict(float)
    for k in kernels[:-1]:
        low = k["kernel"].lower()
        if any(s in low for s in ("sdpa", "fmha", "flash", "attention")):
            cat = "attention"
        elif "rowwisemoments" in low or "groupnorm" in low:
            cat = "group_norm"
        else:
            c = kernel_category(k["kernel"])
            cat = {"conv_fwd": "conv", "layout": "conv", "gemm": "gemm"}.get(c or "", "other")
        out[cat] += k["us"] / 1e3
    out["other"] += kernels[-1]["us"] / 1e3 - sum(out.values())
    return out


def diffusion(probe: dict[str, Any], device: str) -> dict[str, Any]:
    """Each profiled NCHW denoiser / decoder call: kernel ms by category (measured / model), the whole call's
    GPU time (the CUDA-graph replay where diffusion_graph measured it, else the profiled kernels) against the
    model's GPU time, and the eager loop against the model's latency (its host floor included), at the
    default host time per op and at --host-op-us 50."""
    dev = get_device(device)
    graphs = {(r["model"], r["input"]): r for r in probe.get("diffusion_graph", {}).get("rows", [])}
    out: dict[str, Any] = {}
    for r in probe.get("diffusion", {}).get("rows", []):
        if "kernels" not in r:
            continue
        file, factory, spec = _DIFFUSION[r["model"]]
        factory_fn, name = load_factory(f"torch:{REPO / 'examples/modules' / file}:{factory}")
        graph = trace_module(factory_fn, parse_inputs(spec.format(r["input"])), name, inference=True)
        model: dict[str, float] = defaultdict(float)
        for op in graph.ops:
            cat = {OpKind.CONV: "conv", OpKind.GEMM: "gemm", OpKind.ATTENTION: "attention"}.get(op.kind)
            model[cat or ("group_norm" if op.reduce_rows else "other")] += op_s(op, dev, graph) * 1e3
        got = _measured_categories(r["kernels"])
        gpu_ms = graphs.get((r["model"], r["input"]), {}).get("graph_s", r["kernels"][-1]["us"] / 1e6) * 1e3
        latency_ms = infer_module(graph, dev).latency_s * 1e3
        at_50 = infer_module(graph, dataclasses.replace(dev, host_op_s=EAGER_HOST_OP_S)).latency_s * 1e3
        out[f"{r['model']}_{r['input']}"] = {
            "measured_ms": {c: round(v, 2) for c, v in sorted(got.items())},
            "model_ms": {c: round(model.get(c, 0.0), 2) for c in sorted(got)},
            "gpu_measured_ms": round(gpu_ms, 2), "gpu_model_ms": round(sum(model.values()), 2),
            "gpu_error_pct": round(_pct(sum(model.values()), gpu_ms), 1),
            "eager_measured_ms": round(r["wall_s"] * 1e3, 2), "latency_model_ms": round(latency_ms, 2),
            "eager_error_pct": round(_pct(latency_ms, r["wall_s"] * 1e3), 1),
            "latency_model_host_50us_ms": round(at_50, 2),
            "eager_error_host_50us_pct": round(_pct(at_50, r["wall_s"] * 1e3), 1),
            "ops": len(graph.ops), "kernels_per_call": r["kernels"][-1]["calls"]}
    return out


def dlrm(probe: dict[str, Any], cluster: str) -> dict[str, Any]:
    """The one-GPU DLRM step (fp16 table, the lower triangle by index_select) against `estimate` of
    mlperf_dlrm_v1.yaml on one GPU of `cluster` at the same batch: the CUDA-graph replay is the GPU time, the
    eager loop what a PyTorch step takes."""
    rows = []
    for r in probe.get("dlrm_step", {}).get("rows", []):
        if r.get("table_dtype") != "float16" or r.get("pairs_by") != "select" or "graph_s" not in r:
            continue
        cmd = [sys.executable, "-m", "distscope", "estimate", "--model", "dlrm:data/evidence/dlrm/mlperf_dlrm_v1.yaml",
               "--cluster", cluster, "--gpus", "1", "--global-batch", str(r["batch"]), "--json"]
        est = json.loads(subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, check=True).stdout)
        step = est["step_time_s"]
        rows.append({"batch": r["batch"], "model_ms": round(step * 1e3, 3), "graph_ms": round(r["graph_s"] * 1e3, 3),
                     "eager_ms": round(r["eager_wall_s"] * 1e3, 3), "kernels_per_step": r["kernels_per_step"],
                     "model_vs_graph_pct": round(_pct(step, r["graph_s"]), 1),
                     "eager_us_per_kernel": round(r["eager_wall_s"] / r["kernels_per_step"] * 1e6, 1)})
    return {"rows": rows}


def workload_checks(probe: dict[str, Any], device: str, cluster: str, result: dict[str, Any]) -> None:
    """device_check's entries (and printed lines) for the sections this file compares, where measured."""
    if "group_norm" in probe:
        result["group_norm"] = group_norm(probe, device)
        g = result["group_norm"]
        print(f"group norm forward (NCHW fp16), model vs measured: {g['model']['signed_mean_pct']:+}% mean, "
              f"{g['model']['mean_abs_pct']}% mean abs ({g['model']['min_pct']:+.0f}..{g['model']['max_pct']:+.0f}%); "
              f"at the streaming rate alone {g['streaming_only']['signed_mean_pct']:+}% mean")
    if "diffusion" in probe:
        result["diffusion"] = diffusion(probe, device)
        print("diffusion inference (NCHW fp16), kernel ms per call by category measured/model; GPU and eager:")
        for k, v in result["diffusion"].items():
            cats = ", ".join(f"{c} {v['measured_ms'][c]:.1f}/{v['model_ms'][c]:.1f}" for c in v["measured_ms"])
            print(f"  {k:28s} {cats}"
                  + f"; GPU {v['gpu_measured_ms']:.1f}/{v['gpu_model_ms']:.1f} ({v['gpu_error_pct']:+.0f}%), eager "
                  f"{v['eager_measured_ms']:.1f}/{v['latency_model_ms']:.1f} ({v['eager_error_pct']:+.0f}%; at 50 us "
                  f"per op {v['eager_error_host_50us_pct']:+.0f}%)")
    if "dlrm_step" in probe:
        result["dlrm_step"] = dlrm(probe, cluster)
        for r in result["dlrm_step"]["rows"]:
            print(f"DLRM step on one GPU, b={r['batch']}: model {r['model_ms']} ms vs CUDA graph {r['graph_ms']} ms "
                  f"({r['model_vs_graph_pct']:+}%), eager {r['eager_ms']} ms "
                  f"({r['eager_us_per_kernel']} us per kernel)")
