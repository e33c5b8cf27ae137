"""distscope's models against what a real GPU measured (data/device/<device>-<date>/, made by
data/device/run_gpu_checks.sh). Nothing here was fitted to these measurements: every figure is out of sample.

- GEMM: the analytic model (model/efficiency.py: the published MAMF ceiling, the size-saturation curve)
  against `distscope measure kernels`' grid of 100 shapes per dtype, as a kernel benchmark (σ = 1).
- Attention: the published-kernel curves (model/kernel_data.py: FA2, cuDNN, FA3 on H100) against
  torch's scaled_dot_product_attention as measured.
- Grouped GEMM: the routed-expert pricing (one GEMM per local expert on the dense curve) against
  torch._grouped_mm for five published MoE shapes, and that op against one dense GEMM of a group.
- Modules: `estimate` of ResNet-50 / ResNeXt-101 training steps (model/module_estimate.py) against the
  measured steps (module_runs.csv beside the data).
- Codec: distscope's int8 / int4 quantizer (compress/quantize.py, eager torch) against the throughput
  the estimator assumes for a GPU codec (compress/spec.py GPU_QUANT_GBps).
- FP8 grouped GEMM and MLA attention: the routed experts in FP8 against torch._scaled_grouped_mm, and
  DeepSeek-V3's MLA head shapes against SDPA, where the session measured them.
- Convolutions: ResNet-50's layers on the implicit-GEMM pricing against cuDNN, where measured; by precision
  (fp32, TF32, fp16), kind (1x1, kxk, stem, grouped, depthwise) and pass, where measured (_device_layers.py).
- Where a training step's GPU time goes: torch.profiler kernel time by category (convolution forward and
  backward, batch norm, other element-wise, GEMM, optimizer) against the module model's ops.
- Inference passes (eval mode, no gradient) against `estimate --inference`, by batch size, where measured.
- One MoE layer's routed experts as an eager torchtitan-style block: its grouped GEMMs and the rest (router,
  top-k, sort, permute, unpermute) against the layer model's pricing.
- Embedding lookups: the DLRM model's lookup forward (model/embedding_cost.py: its bytes at the HBM
  streaming rate) against torch.nn.EmbeddingBag, where the session measured it.
- FP8 scaling recipes: torch._scaled_mm with per-tensor, row-wise and block-wise scales, where measured
  (printed, not checked: the H100's block-wise ratio is the source of model/data/kernels/fp8_scaling.csv).
- Group norm, diffusion inference and one GPU's DLRM step (_device_workloads.py): nn.GroupNorm against the
  statistics pass's per-row rate; the Stable Diffusion UNets and VAE decoder by kernel category, as GPU time
  (CUDA graph) and as the eager loop; the DLRM training step against `estimate` on one GPU.
- Captures: `simulate` of each captured job (trace capture, on the GPU and on the same host's CPU cores)
  against the job's own unprofiled step; the 2-rank CPU capture scaled to 8 ranks (`--dp 8`).
Writes benchmarks/results/device_check_<gpu>.json per session (benchmarks/_device.py lists them).

    python benchmarks/device_check.py [--data data/device/nvidia-h100-2026-11-26]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from _device import SESSIONS, Host, host, sessions
from _device_layers import _pct, conv_layers, conv_pair_s, inference, module_profile, moe
from _device_workloads import workload_checks
from _results import save
from distscope.compress.spec import GPU_QUANT_GBps
from distscope.dtypes import DType
from distscope.model import efficiency as eff
from distscope.model import kernel_data
from distscope.system.device import get_device
from distscope.trace.capture_files import postprocess
from distscope.validate.module_rows import predict_file

REPO = Path(__file__).resolve().parents[1]


def _stats(errs: list[float]) -> dict[str, float]:
    a = [abs(e) for e in errs]
    return {"n": len(errs), "mean_abs_pct": round(statistics.fmean(a), 1), "median_abs_pct": round(statistics.median(a), 1),
            "max_abs_pct": round(max(a), 1), "signed_mean_pct": round(statistics.fmean(errs), 1)}


def grid_errors(g: dict[str, Any], dev: Any, dt: DType, ceiling: float) -> list[tuple[float, float]]:
    """(model / measured − 1 in %, the GEMM's smallest dim) for every shape of one measured grid, at the
    saturation constant efficiency.GEMM_KAPPA holds now."""
    return [(_pct(2.0 * m * n * k / eff.gemm_time_s(m, n, k, dt.bytes, dev.flops(dt), dev.hbm_Bps, ceiling) / 1e12,
                  g["tflops"][a][b][c]), min(m, n, k))
            for a, m in enumerate(g["m"]) for b, n in enumerate(g["n"]) for c, k in enumerate(g["k"])]


def gemm(kernels: dict[str, Any], h: Host) -> dict[str, Any]:
    dev = get_device(h.device)
    out: dict[str, Any] = {}
    for dt_name, g in kernels["gemm"].items():
        dt = DType(dt_name)
        ceiling = kernel_data.gemm_ceiling(dev.name, dt)
        errs = grid_errors(g, dev, dt, ceiling)
        best = max(max(max(r) for r in plane) for plane in g["tflops"])
        out[dt_name] = {"all": _stats([e for e, _ in errs]), "all_dims_ge_1024": _stats([e for e, d in errs if d >= 1024]),
                        "measured_best_tflops": round(best, 1),
                        "model_ceiling_tflops": round(ceiling * dev.flops(dt) / 1e12, 1),
                        "kernel_level_kappa": _kappa(g, dev, dt, ceiling)}
    return out


def _kappa(g: dict[str, Any], dev: Any, dt: DType, ceiling: float) -> dict[str, float]:
    """The saturation constant κ this grid alone would pick (least mean |error| over a 0.05 grid; the
    shipped κ is fitted to training runs), and the saturation size κ·peak/HBM it implies, in elements."""
    shipped = eff.GEMM_KAPPA
    scores = {}
    try:
        for i in range(2, 41):
            eff.GEMM_KAPPA = 0.05 * i
            scores[eff.GEMM_KAPPA] = statistics.fmean(abs(e) / 100 for e, _ in grid_errors(g, dev, dt, ceiling))
    finally:
        eff.GEMM_KAPPA = shipped
    best = min(scores, key=scores.__getitem__)
    return {"shipped": round(shipped, 3), "best": round(best, 2), "best_mean_abs_pct": round(100 * scores[best], 1),
            "shipped_saturation_elements": round(shipped * dev.flops(dt) / dev.hbm_Bps),
            "best_saturation_elements": round(best * dev.flops(dt) / dev.hbm_Bps)}


def attention(kernels: dict[str, Any], h: Host) -> dict[str, Any]:
    dev = get_device(h.device)
    out: dict[str, Any] = {}
    for dt_name, by_mask in kernels["attention"].items():
        dt = DType(dt_name)
        for mask, t in by_mask.items():
            causal = mask == "causal"
            for kernel in ("fa2", "cudnn", "fa3"):
                for pss, key in (("fwd", "fwd_tflops"), ("bwd", "bwd_tflops")):
                    errs = []
                    for i, seq in enumerate(t["seq"]):
                        for j, hd in enumerate(t["head_dim"]):
                            e = kernel_data.attention_efficiency(dev.name, dt, kernel, causal, hd, seq, pss)
                            errs.append(_pct(e * dev.flops(dt) / 1e12, t[key][i][j]))
                    out[f"{dt_name} {mask} {kernel} {pss}"] = _stats(errs)
    return out


def _spread(ratios: list[float]) -> dict[str, float]:
    return {"median": round(statistics.median(ratios), 2), "min": round(min(ratios), 2), "max": round(max(ratios), 2)}


def grouped(probe: dict[str, Any], h: Host, section: str = "grouped_gemm", dt: DType = DType.BF16) -> dict[str, Any]:
    """The routed experts as the model prices them (one GEMM per expert on the dense curve of `dt`, per-tensor
    scales in FP8) against the grouped kernel `section` measured: torch._grouped_mm (bf16) or
    torch._scaled_grouped_mm (FP8, row-wise scales); and that kernel against one dense GEMM of a group (and a
    Python loop of them, where measured)."""
    dev = get_device(h.device)
    ceiling = kernel_data.gemm_ceiling(dev.name, dt)
    rows = [r for r in probe[section]["rows"] if "grouped_tflops" in r]
    errs, per_row = [], []
    for r in rows:
        g, m, n, k = r["groups"], r["m_per_group"], r["n"], r["k"]
        t = g * eff.gemm_time_s(m, n, k, dt.bytes, dev.flops(dt), dev.hbm_Bps, ceiling)
        e = _pct(2.0 * g * m * n * k / t / 1e12, r["grouped_tflops"])
        errs.append(e)
        per_row.append({k2: r[k2] for k2 in ("model", "gemm", "groups", "m_per_group")} | {
            "measured_tflops": round(r["grouped_tflops"], 1), "model_error_pct": round(e, 1)})
    big = [e for e, r in zip(errs, rows, strict=True) if r["m_per_group"] >= 2048]
    out = {"model_vs_grouped_mm": _stats(errs), "m_per_group_ge_2048": _stats(big),
           "grouped_over_one_dense_gemm": _spread([r["grouped_tflops"] / r["dense_one_tflops"] for r in rows])}
    if all("loop_tflops" in r for r in rows):
        out["grouped_over_python_loop"] = _spread([r["grouped_tflops"] / r["loop_tflops"] for r in rows])
    return out | {"rows": per_row}


def modules(data: Path) -> dict[str, Any]:
    res = predict_file(data / "module_runs.csv", REPO)
    rows = [{"run_id": r.run_id, "measured_s": round(r.measured_step_time_s, 5), "predicted_s": round(r.predicted_step_time_s, 5),
             "error_pct": round(r.error_pct, 1)} for r in res]
    for r in rows:
        print(f"  {r['run_id']:28s} measured {r['measured_s'] * 1e3:7.2f} ms  predicted {r['predicted_s'] * 1e3:7.2f} ms  "
              f"{r['error_pct']:+.1f}%")
    b256 = [r["error_pct"] for r in rows if r["run_id"].endswith("-B256")]
    return {"all": _stats([r["error_pct"] for r in rows]), "batch_256": _stats(b256) if b256 else None, "rows": rows}


def codec(probe: dict[str, Any]) -> dict[str, Any]:
    rows = probe["codec"]["rows"]
    copy = next(r for r in rows if r["kernel"] == "copy")
    out: dict[str, Any] = {"copy_GBps_moved": round(copy["GBps_moved"]), "estimator_gpu_quant_GBps": round(GPU_QUANT_GBps)}
    for r in rows:
        if r["kernel"] != "copy":
            out[r["kernel"].replace(" g=", "_g")] = {"encode_GBps_fp32_input": round(r["encode_GBps_input"]),
                                "decode_GBps_fp32_output": round(r["decode_GBps_output"]),
                                # the estimator's figure is per GB of bf16 input: half the bytes of fp32 per element
                                "encode_vs_estimator": round(r["encode_GBps_input"] / 2 / GPU_QUANT_GBps, 3)}
    return out


def mla(probe: dict[str, Any], h: Host) -> dict[str, Any]:
    """DeepSeek-V3's MLA head shapes (query/key 192, value 128) on the published-kernel attention curves
    (kernel_data.attention_efficiency at their mean head dim, as efficiency.flash_attention_s prices them, at
    σ = 1) against SDPA as measured: time errors, model / measured − 1."""
    dev = get_device(h.device)
    peak = dev.flops(DType.BF16) / 1e12
    out: dict[str, Any] = {}
    for kernel in ("fa2", "cudnn", "fa3"):
        errs: dict[str, list[float]] = {"fwd": [], "bwd": []}
        for r in probe["mla_attention"]["rows"]:
            for pss, got in errs.items():
                e = kernel_data.attention_efficiency(dev.name, DType.BF16, kernel, True, (r["d_qk"] + r["d_v"]) / 2,
                                                     r["seq"], pss)
                got.append(_pct(r[f"{pss}_tflops"], e * peak))
        out[kernel] = {"fwd_time": _stats(errs["fwd"]), "bwd_time": _stats(errs["bwd"]), "both": _stats(errs["fwd"] + errs["bwd"])}
    return out


def conv(probe: dict[str, Any], h: Host) -> dict[str, Any]:
    """ResNet-50's convolutions as module_estimate prices them (efficiency.conv_time_s: the implicit GEMM
    N·H_out·W_out, C_out, C_in·k², at σ = 1; backward twice the forward) against cuDNN, by kernel size."""
    dev, dt = get_device(h.device), DType.BF16
    out: dict[str, Any] = {}
    for label, pick in (("1x1", lambda r: r["kernel"] == 1), ("3x3", lambda r: r["kernel"] == 3),
                        ("stem_7x7", lambda r: r["kernel"] == 7)):
        errs = []
        for r in filter(pick, probe["conv"]["rows"]):
            f, b = conv_pair_s(r, dev, dt)
            errs += [_pct(f, r["fwd_s"]), _pct(b, r["bwd_s"])]
        out[label] = _stats(errs)
    return out


def embedding(probe: dict[str, Any], h: Host) -> dict[str, Any]:
    """The lookup forward as model/embedding_cost.py prices it (its bytes for the bag, fp32 rows, at the
    analytic HBM rate: efficiency.elementwise_s on a device without a measured table) against
    torch.nn.EmbeddingBag (sum). FBGEMM's TBE, which TorchRec runs, was not installed there."""
    dev = get_device(h.device)
    rows = []
    for r in probe["embedding_bag"]["rows"]:
        model_s = eff.elementwise_s(dev, r["fwd_model_bytes"], 1)
        rows.append({"dim": r["dim"], "pooling": r["pooling"], "measured_fwd_us": round(r["fwd_s"] * 1e6, 1),
                     "model_fwd_us": round(model_s * 1e6, 1), "error_pct": round(_pct(model_s, r["fwd_s"]), 1),
                     "measured_GBps_model_bytes": round(r["fwd_GBps_model_bytes"])})
    big = [r["error_pct"] for r in rows if r["pooling"] >= 16 and r["dim"] >= 32]
    summary = {"all": _stats([r["error_pct"] for r in rows]), "pooling_ge_16_dim_ge_32": _stats(big)}
    return {"summary": summary, "rows": rows}


def fp8_scaling(probe: dict[str, Any]) -> dict[str, Any]:
    """Each recipe's GEMM throughput over the per-tensor one (and bf16's), median and range over the shapes."""
    rows = probe["fp8_scaling"]["rows"]
    recipes = sorted({k[:-7] for r in rows for k in r if k.endswith("_tflops") and k != "tensorwise_tflops"})
    ratios = {name: [r[f"{name}_tflops"] / r["tensorwise_tflops"] for r in rows if f"{name}_tflops" in r]
              for name in recipes}
    return {"median_over_tensorwise": {k: round(statistics.median(v), 3) for k, v in ratios.items() if v},
            "range_over_tensorwise": {k: [round(min(v), 3), round(max(v), 3)] for k, v in ratios.items() if v},
            "rows": rows}


def _simulate(cap: Path, *args: str) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-m", "distscope", "simulate", str(cap), "--json", *args], capture_output=True,
                          text=True, cwd=REPO, timeout=600)
    if proc.returncode != 0:
        raise SystemExit(f"device_check: simulate {cap.name} failed: {proc.stderr.strip()[-400:]}")
    return json.loads(proc.stdout)


def captures(data: Path, h: Host) -> dict[str, Any]:
    out: dict[str, Any] = {"gpu": [], "cpu": []}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        with tarfile.open(data / "captures.tar.gz") as tar:
            tar.extractall(root, filter="data")
        for cap in sorted(p for p in root.iterdir() if p.is_dir()):
            postprocess(cap, convert=False)
            gpu = cap.name.startswith("gpu_")
            res = _simulate(cap, *(("--cluster", h.cluster, "--gpus", "8") if gpu else
                                   ("--profile", str(root / "cpu_profile8.json"))))
            summary = json.loads((cap / "capture.json").read_text())
            row = {"capture": cap.name, "unprofiled_step_s": round(res["measured_step_s"], 5),
                   "unprofiled_spread_pct": round(100 * (max(summary["unprofiled_steps_s"]) - min(summary["unprofiled_steps_s"]))
                                                  / res["measured_step_s"], 1),
                   "profiled_over_unprofiled": round(res["profiled_step_s"] / res["measured_step_s"], 2),
                   "simulated_step_s": round(res["step_time_s"], 5),
                   "error_pct": round(_pct(res["step_time_s"], res["measured_step_s"]), 1)}
            out["gpu" if gpu else "cpu"].append(row)
            print(f"  {cap.name:26s} unprofiled {row['unprofiled_step_s'] * 1e3:7.2f} ms (profiled x{row['profiled_over_unprofiled']}) "
                  f"simulated {row['simulated_step_s'] * 1e3:7.2f} ms  {row['error_pct']:+.1f}%")
        truth = json.loads((root / "cpu_ddp_8" / "capture.json").read_text())["unprofiled_step_s"]
        pred = _simulate(root / "cpu_ddp_2", "--profile", str(root / "cpu_profile8.json"), "--dp", "8")["step_time_s"]
        out["cpu_scale_2_to_8"] = {"predicted_s": round(pred, 5), "measured_s": round(truth, 5),
                                   "error_pct": round(_pct(pred, truth), 1)}
        print(f"  scale-out 2 -> 8 gloo ranks: predicted {pred * 1e3:.2f} ms, measured {truth * 1e3:.2f} ms "
              f"({out['cpu_scale_2_to_8']['error_pct']:+.1f}%)")
    # compute-bound: the GPU is busy for most of the step (profiling stretched it by < 10%)
    bound = [r for r in out["gpu"] if r["profiled_over_unprofiled"] < 1.1]
    launch = [r for r in out["gpu"] if r["profiled_over_unprofiled"] >= 1.1]
    out["gpu_compute_bound"] = _stats([r["error_pct"] for r in bound]) if bound else None
    out["gpu_launch_bound"] = _stats([r["error_pct"] for r in launch]) if launch else None
    return out


def check(data: Path) -> None:
    """Every comparison the session's files allow (a probe-only session has no kernels.json or captures)."""
    h = host(data)
    print(f"== {data.name} ({h.device})")
    probe = json.loads((data / "probe.json").read_text())
    result: dict[str, Any] = {"data": str(data.relative_to(REPO)), "device": probe["device"]}
    if (data / "kernels.json").exists():
        _kernel_checks(json.loads((data / "kernels.json").read_text())["kernels"], h, result)
    if "grouped_gemm" in probe:
        result["grouped_gemm"] = grouped(probe, h)
        g = result["grouped_gemm"]
        print(f"grouped GEMM (bf16 torch._grouped_mm, {g['model_vs_grouped_mm']['n']} shapes): model mean |err| "
              f"{g['model_vs_grouped_mm']['mean_abs_pct']}% (m/group >= 2048: {g['m_per_group_ge_2048']['mean_abs_pct']}%); "
              f"grouped / one dense GEMM median {g['grouped_over_one_dense_gemm']['median']}")
    if "grouped_gemm_fp8" in probe:
        result["grouped_gemm_fp8"] = grouped(probe, h, "grouped_gemm_fp8", DType.FP8)
        g8 = result["grouped_gemm_fp8"]
        print(f"grouped GEMM fp8 (row-wise torch._scaled_grouped_mm): model mean |err| "
              f"{g8['model_vs_grouped_mm']['mean_abs_pct']}% (m/group >= 2048: {g8['m_per_group_ge_2048']['mean_abs_pct']}%)")
    if "mla_attention" in probe:
        result["mla_attention"] = mla(probe, h)
        print("MLA attention, step time model vs SDPA: " + ", ".join(
            f"{k} {v['both']['mean_abs_pct']}% (fwd {v['fwd_time']['signed_mean_pct']:+}%, bwd {v['bwd_time']['signed_mean_pct']:+}%)"
            for k, v in result["mla_attention"].items()))
    if "conv" in probe:
        result["conv"] = conv(probe, h)
        print("convolutions, time model vs cuDNN (+ = model slower): " + ", ".join(
            f"{k} {v['signed_mean_pct']:+}% (mean abs {v['mean_abs_pct']}%, {v['n']})" for k, v in result["conv"].items()))
    if any(s in probe for s in ("conv_precision", "grouped_conv", "unet_conv")):
        result["conv_layers"] = conv_layers(probe, h.device)
        print("isolated convolutions by precision, kind and pass, time model vs cuDNN (+ = model slower):")
        for k, v in result["conv_layers"].items():
            print(f"  {k:22s} {v['signed_mean_pct']:+6.1f}% (mean abs {v['mean_abs_pct']}%, {v['n']}, {v['min_pct']:+.0f}..{v['max_pct']:+.0f}%)")
    if "module_profile" in probe:
        result["module_profile"] = module_profile(probe, h.device)
        print("training step kernel time by category, measured (torch.profiler) / model ms per step:")
        for k, v in result["module_profile"].items():
            print(f"  {k:32s} " + ", ".join(f"{c} {v['measured_ms'][c]:.1f}/{v['model_ms'][c]:.1f}" for c in v["measured_ms"])
                  + f"; total {v['total_measured_ms']:.1f}/{v['total_model_ms']:.1f}")
    if "moe_layer" in probe:
        result["moe_layer"] = moe(probe, h.device)
        m = result["moe_layer"]
        print(f"MoE routed experts, eager block fwd+bwd (model vs measured): grouped GEMMs {m['experts_fwdbwd']['signed_mean_pct']:+}% "
              f"mean, whole block {m['block']['signed_mean_pct']:+}% mean; permute + unpermute moved "
              f"{m['permute_unpermute_bytes_multiple']} x the routed bytes (model {m['model_permute_unpermute_bytes_multiple']})")
        for r in m["rows"]:
            print(f"  {r['model']:16s} T={r['tokens']:5d}: experts {r['experts_fwdbwd_error_pct']:+.1f}%, rest measured "
                  f"{r['rest_measured_ms']:.2f} ms vs model {r['rest_model_ms']:.2f} ms, block {r['block_error_pct']:+.1f}%")
    if "embedding_bag" in probe:
        result["embedding_bag"] = embedding(probe, h)
        print(f"embedding lookups: {result['embedding_bag']['summary']}")
    if "fp8_scaling" in probe:
        result["fp8_scaling"] = fp8_scaling(probe)
        print(f"fp8 scaling recipes (median throughput / per-tensor): {result['fp8_scaling']['median_over_tensorwise']}")
    if (data / "module_runs.csv").exists():
        print("modules (ResNet training steps):")
        result["modules"] = modules(data)
    if any(r.get("mode") == "infer" for sec in ("modules", "modules_precision") for r in probe.get(sec, {}).get("rows", [])):
        result["inference"] = inference(probe, h.device)
        inf = result["inference"]
        print(f"inference passes vs estimate --inference: batch >= 32 {inf['batch_ge_32']['signed_mean_pct']:+}% mean "
              f"({inf['batch_ge_32']['min_pct']:+.0f}..{inf['batch_ge_32']['max_pct']:+.0f}%, {inf['batch_ge_32']['n']}); all "
              f"{inf['all']['mean_abs_pct']}% mean abs"
              + (f" (batch < 32 host-bound: down to {inf['all']['min_pct']:+.0f}%)" if inf["all"]["n"] > inf["batch_ge_32"]["n"] else ""))
    workload_checks(probe, h.device, h.cluster, result)
    if "codec" in probe:
        result["codec"] = codec(probe)
        print(f"codec: {result['codec']}")
    if (data / "captures.tar.gz").exists():
        print("captures (simulate vs the job's own unprofiled step):")
        result["captures"] = captures(data, h)
    save(SESSIONS[data.name], result)


def _kernel_checks(kernels: dict[str, Any], h: Host, result: dict[str, Any]) -> None:
    """`distscope measure kernels`' GEMM and attention sweeps against the analytic model."""
    result["source"] = kernels["source"]
    result["gemm"] = gemm(kernels, h)
    for dt, s in result["gemm"].items():
        print(f"GEMM {dt}: model vs measured over {s['all']['n']} shapes: mean |err| {s['all']['mean_abs_pct']}%, "
              f"max {s['all']['max_abs_pct']}%, signed mean {s['all']['signed_mean_pct']}% (all dims >= 1024: "
              f"{s['all_dims_ge_1024']['mean_abs_pct']}%); best measured {s['measured_best_tflops']} vs ceiling "
              f"{s['model_ceiling_tflops']} TFLOP/s; kernel-level kappa {s['kernel_level_kappa']}")
    result["attention"] = attention(kernels, h)
    for key, s in result["attention"].items():
        if key.startswith("bf16"):
            print(f"attention {key}: mean |err| {s['mean_abs_pct']}%, signed {s['signed_mean_pct']}%")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, action="append", help="a session folder (default: every one)")
    args = ap.parse_args()
    for data in args.data or sessions():
        check(data.resolve())


if __name__ == "__main__":
    main()
