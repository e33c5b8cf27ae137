"""device_check.py's comparisons below the step: convolutions by precision and kind, where a training step's
GPU time goes (torch.profiler kernel times by category against the module model's ops), and one MoE
layer's routed experts (torchtitan-style eager block) against the layer model's pricing. Nothing here is
fitted: the model's figures are what it predicts today.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from distscope.dtypes import DType
from distscope.model import efficiency as eff
from distscope.model import kernel_data
from distscope.model.module_estimate import op_s
from distscope.system.device import Device, get_device
from distscope.workload.module_graph import OpKind, load_factory, parse_inputs, trace_module

REPO = Path(__file__).resolve().parents[1]
_DT = {"bf16": DType.BF16, "fp16": DType.FP16, "tf32": DType.TF32, "fp32": DType.FP32, "bf16-autocast": DType.BF16,
       "fp16-autocast": DType.FP16}


def _pct(model: float, measured: float) -> float:
    return 100.0 * (model / measured - 1.0)


def _stats(errs: list[float]) -> dict[str, float]:
    a = [abs(e) for e in errs]
    return {"n": len(errs), "mean_abs_pct": round(statistics.fmean(a), 1), "signed_mean_pct": round(statistics.fmean(errs), 1),
            "min_pct": round(min(errs), 1), "max_pct": round(max(errs), 1)}


def conv_kind(c_in: int, kernel: int, groups: int) -> str:
    """depthwise / grouped / stem (fewer than TENSOR_CORE_MIN_CHANNELS input channels) / 1x1 / kxk."""
    if groups > 1:
        return "depthwise" if groups == c_in else "grouped"
    if c_in < eff.TENSOR_CORE_MIN_CHANNELS:
        return "stem"
    return "1x1" if kernel == 1 else "kxk"


def conv_pair_s(r: dict[str, Any], dev: Device, dt: DType) -> tuple[float, float]:
    """(forward, backward) of one measured convolution row as efficiency.conv_time_s prices it at σ = 1: the
    implicit GEMM (N·H_out·W_out, C_out, C_in/groups·k²); the backward computes both gradients (twice the
    forward's FLOPs and bytes)."""
    g = r.get("groups", 1)
    m, n, k, taps = r["batch"] * r["h_out"] ** 2, r["c_out"], r["c_in"] // g * r["kernel"] ** 2, r["kernel"] ** 2
    nbytes = dt.bytes * (r["batch"] * r["h_in"] ** 2 * r["c_in"] + m * n + k * n)
    kw = dict(groups=g, peak_flops=dev.flops(dt), cuda_core_flops=dev.flops(DType.FP32), hbm_Bps=dev.hbm_Bps,
              eta_max=kernel_data.gemm_ceiling(dev.name, dt))
    fwd = eff.conv_time_s(m, n, k, taps, 2.0 * m * n * k, nbytes, **kw)
    return fwd, eff.conv_time_s(m, n, k, taps, 4.0 * m * n * k, 2 * nbytes, **kw)


def conv_layers(probe: dict[str, Any], device: str) -> dict[str, Any]:
    """Isolated cuDNN convolutions (sections conv_precision, grouped_conv, unet_conv) against the model, by
    precision, kind and pass: time errors, model / measured − 1."""
    dev = get_device(device)
    errs: dict[str, list[float]] = defaultdict(list)
    for sec in ("conv_precision", "grouped_conv", "unet_conv"):
        for r in probe.get(sec, {}).get("rows", []):
            f, b = conv_pair_s(r, dev, _DT[r["dtype"]])
            key = f"{r['dtype']} {conv_kind(r['c_in'], r['kernel'], r.get('groups', 1))}"
            errs[f"{key} fwd"].append(_pct(f, r["fwd_s"]))
            if "bwd_s" in r:
                errs[f"{key} bwd"].append(_pct(b, r["bwd_s"]))
    return {k: _stats(v) for k, v in sorted(errs.items())}


_SKIP = ("aten::", "Optimizer.", "Activity Buffer", "Command Buffer", "autograd::", "ProfilerStep", "cuda", "torch::")


def kernel_category(name: str) -> str | None:
    """A profiled CUDA kernel's category by its name (None: a host-side event, not a kernel)."""
    if name.startswith(_SKIP):
        return None
    k = name.lower()
    checks: tuple[tuple[str, Callable[[str], bool]], ...] = (
        ("conv_bwd", lambda k: "wgrad" in k or "dgrad" in k),
        ("conv_fwd", lambda k: "fprop" in k or "convolve" in k or "fft2d" in k or "nhwcaddpadding" in k),
        ("batch_norm", lambda k: "batch_norm" in k or "batchnorm" in k or "cudnn::bn_" in k),
        ("layout", lambda k: "nchwtonhwc" in k or "nhwctonchw" in k),
        ("optimizer", lambda k: "multi_tensor" in k),
        ("gemm", lambda k: any(s in k for s in ("nvjet", "gemm", "cublas", "cutlass", "xmma"))),
    )
    return next((cat for cat, hit in checks if hit(k)), "elementwise")


def _model_categories(model: str, dtype: str, batch: int, layout: str, device: str) -> dict[str, float]:
    factory, name = load_factory(f"torch:{REPO / 'examples/modules/resnet.py'}:{model}")
    graph = trace_module(factory, parse_inputs(f"x:{batch}x3x224x224:{_DT[dtype].value}:{'nchw' if layout == 'nchw' else 'channels_last'}"), name)
    dev = get_device(device)
    out: dict[str, float] = defaultdict(float)
    for op in graph.ops:
        if op.kind is OpKind.CONV:
            cat = "conv_fwd" if op.name == "convolution" else "conv_bwd"
        elif op.kind is OpKind.GEMM:
            cat = "gemm"
        else:
            cat = "batch_norm" if "batch_norm" in op.name else "elementwise"
        out[cat] += op_s(op, dev, graph)
    return out


def module_profile(probe: dict[str, Any], device: str) -> dict[str, Any]:
    """Kernel time per step by category (torch.profiler, section module_profile) against the module model's
    per-op prices (module_estimate.op_s, before the host-time floor), in ms per step. Each half-precision
    batch norm is PyTorch's own channels-last kernels (a Welford statistics pass, then the transform); fp32
    and TF32 get cuDNN's persistent NHWC kernels: which one runs is the software's choice, not the traced op's."""
    measured: dict[tuple[str, str, int, str], dict[str, float]] = defaultdict(lambda: defaultdict(float))
    steps: dict[tuple[str, str, int, str], float] = {}
    for r in probe.get("module_profile", {}).get("rows", []) + probe.get("module_profile_layouts", {}).get("rows", []):
        cat = kernel_category(r["kernel"])
        key = (r["model"], r["dtype"], r["batch"], r.get("layout", "nhwc"))
        steps[key] = r.get("step_s", 0.0)
        if cat is not None:
            measured[key][cat] += r["us_per_step"] / 1e3
    out: dict[str, Any] = {}
    for (model, dtype, batch, layout), got in measured.items():
        pred = _model_categories(model, dtype, batch, layout, device)
        cats = sorted(set(got) | set(pred))
        total, total_model = sum(got.values()), sum(pred.values()) * 1e3
        entry = out[f"{model}_{dtype}_b{batch}" + ("_nchw" if layout == "nchw" else "")] = {
            "measured_ms": {c: round(got.get(c, 0.0), 2) for c in cats},
            "model_ms": {c: round(pred.get(c, 0.0) * 1e3, 2) for c in cats},
            "total_measured_ms": round(total, 2), "total_model_ms": round(total_model, 2),
            "total_error_pct": round(_pct(total_model, total), 1)}
        if steps[(model, dtype, batch, layout)]:  # the unprofiled step, where the section timed it
            entry["step_ms"] = round(steps[(model, dtype, batch, layout)] * 1e3, 2)
    return out


def moe(probe: dict[str, Any], device: str) -> dict[str, Any]:
    """One MoE layer's routed experts (section moe_layer) against layer_cost's pricing at σ = 1: the two
    grouped GEMMs as one GEMM per local expert on the dense curve (backward twice the forward), and the rest of
    the block (router GEMM, softmax/top-k, sort, permute, unpermute) against the model's router GEMM plus its
    permute/unpermute bytes (4 · T·k·h·e forward, twice that backward) at the streaming rate. moe_stages gives
    the permute + unpermute forward and backward as multiples of the routed rows' bytes (T·k·h·e) moved at
    the streaming rate, against the model's 12."""
    dev = get_device(device)
    dt = DType.BF16
    ceiling = kernel_data.gemm_ceiling(dev.name, dt)

    def gemm(M: float, N: float, K: float) -> float:
        return eff.gemm_time_s(M, N, K, dt.bytes, dev.flops(dt), dev.hbm_Bps, ceiling)

    rows = []
    for r in probe.get("moe_layer", {}).get("rows", []):
        if "block_fwdbwd_s" not in r:
            continue
        T, h, f, E, k, L = r["tokens"], r["hidden"], r["expert_ffn"], r["experts"], r["top_k"], r["local_experts"]
        rows_e = T * k / L
        experts_fwd = L * (gemm(rows_e, 2 * f, h) + gemm(rows_e, h, f))
        routed_bytes = T * k * h * dt.bytes
        rest = 3 * (gemm(T, E, h) + eff.mem_time_s(4 * routed_bytes, dev.hbm_Bps))
        measured_rest = r["block_fwdbwd_s"] - r["grouped_fwdbwd_s"]
        rows.append({"model": r["model"], "tokens": T,
                     "experts_fwdbwd_error_pct": round(_pct(3 * experts_fwd, r["grouped_fwdbwd_s"]), 1),
                     "rest_measured_ms": round(measured_rest * 1e3, 2), "rest_model_ms": round(rest * 1e3, 2),
                     "rest_over_experts_measured": round(measured_rest / r["grouped_fwdbwd_s"], 2),
                     "block_error_pct": round(_pct(3 * experts_fwd + rest, r["block_fwdbwd_s"]), 1)})
    multiples = {}
    for r in probe.get("moe_stages", {}).get("rows", []):
        moved = (r["permute_fwdbwd_s"] + r["unpermute_fwdbwd_s"]) * dev.hbm_Bps * eff.MEM_ETA
        multiples[r["model"]] = round(moved / r["routed_row_bytes"], 1)
    return {"rows": rows, "experts_fwdbwd": _stats([r["experts_fwdbwd_error_pct"] for r in rows]) if rows else None,
            "block": _stats([r["block_error_pct"] for r in rows]) if rows else None,
            "permute_unpermute_bytes_multiple": multiples, "model_permute_unpermute_bytes_multiple": 12}


def inference(probe: dict[str, Any], device: str) -> dict[str, Any]:
    """The modules' inference passes (sections modules and modules_precision, mode "infer": eval mode, no
    gradient, channels-last) against `estimate --inference` (module_estimate.infer_module): latency errors,
    model / measured − 1, by batch size."""
    from distscope.model.module_estimate import infer_module

    dev = get_device(device)
    rows = []
    for sec in ("modules", "modules_precision"):
        for r in probe.get(sec, {}).get("rows", []):
            if r["mode"] != "infer":
                continue
            factory, name = load_factory(f"torch:{REPO / 'examples/modules/resnet.py'}:{r['model']}")
            spec = f"x:{r['batch']}x3x{r['resolution']}x{r['resolution']}:{_DT[r.get('dtype', 'bf16-autocast')].value}"
            pred = infer_module(trace_module(factory, parse_inputs(spec), name, inference=True), dev)
            rows.append({"model": r["model"], "dtype": r.get("dtype", "bf16-autocast"), "batch": r["batch"],
                         "measured_ms": round(r["step_s"] * 1e3, 3), "predicted_ms": round(pred.latency_s * 1e3, 3),
                         "utilization_predicted": round(pred.utilization, 3),
                         "error_pct": round(_pct(pred.latency_s, r["step_s"]), 1)})
    big = [r["error_pct"] for r in rows if r["batch"] >= 32]
    return {"rows": rows, "all": _stats([r["error_pct"] for r in rows]) if rows else None,
            "batch_ge_32": _stats(big) if big else None}
