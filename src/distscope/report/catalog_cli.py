"""`distscope models`, `distscope clusters`, `distscope devices`: what is built in."""

from __future__ import annotations

from rich.table import Table

from distscope.dtypes import DType
from distscope.report.console import out


def models_cmd() -> None:
    """List the model catalog with parameter counts and shapes."""
    from distscope.workload.catalog import get_model, model_names
    from distscope.workload.params import active_params, total_params

    t = Table(title="Model catalog (use the key with --model)")
    t.add_column("key", no_wrap=True)  # what users type: never cut, other columns narrow first
    for c in ("params", "active", "layers", "hidden", "heads/kv", "ffn", "attention", "moe", "vocab"):
        t.add_column(c)
    for k in model_names():
        s = get_model(k)
        moe = "" if s.moe is None else f"{s.moe.experts}e top{s.moe.top_k}" + (f" +{s.moe.shared_experts}sh" if s.moe.shared_experts else "")
        moe += f" latent {s.moe.latent}" if s.moe is not None and s.moe.latent else ""
        band = s.local_attention
        attn = s.attention.value + ("" if band is None else f", {band.layers} {band.kind.value} {band.size}")
        if (lm := s.linear_mixer) is not None:  # a hybrid: how many mixers of each kind
            attn = f"{lm.attention_layers} {s.attention.value} + {lm.layers} {lm.kind.value}"
        if (sa := s.sparse_attention) is not None:  # DSA: its top-k and the layers running an indexer
            attn += f" + dsa top{sa.topk}" + (f" ({sa.indexer_layers} indexers)" if sa.indexer_layers else "")
        if (ca := s.compressed_attention) is not None:  # DeepSeek-V4: its layers of each kind
            rest = s.layers - ca.sparse_layers - ca.heavy_layers
            attn = f"{rest} window {ca.window} + {ca.sparse_layers} csa + {ca.heavy_layers} hca"
        t.add_row(k, f"{total_params(s) / 1e9:.1f}B", f"{active_params(s) / 1e9:.1f}B", str(s.layers), str(s.hidden),
                  f"{s.heads}/{s.kv_heads}", f"{s.ffn.value} {s.ffn_hidden}", attn, moe, str(s.vocab))
    out.print(t)


def clusters_cmd() -> None:
    """List the cluster presets and the device catalog."""
    from distscope.system.presets import cluster_names, get_cluster

    t = Table(title="Cluster presets (use with --cluster; scale with --gpus, override with --link)")
    t.add_column("key", no_wrap=True)
    for col in ("device", "levels (size x GB/s per GPU per dir, latency, efficiency)", "default gpus"):
        t.add_column(col)
    for k in cluster_names():
        cl = get_cluster(k)
        lv = "; ".join(f"{x.name} {x.size or '∞'}x{x.bw_GBps:g} {x.latency_s * 1e6:g}us η{x.efficiency:g}"
                       + (" NVLS" if x.nvls_efficiency else "") for x in cl.levels)
        t.add_row(k, cl.device.name, lv, str(cl.num_gpus))
    out.print(t)
    d = Table(title="Devices (dense peak TFLOP/s, TOPS for int8/int4; — = unsupported; HBM)")
    header, rows = device_rows()
    for i, c in enumerate(header):
        d.add_column(c, no_wrap=i == 0)
    for r in rows:
        d.add_row(*r)
    out.print(d)


# One column per dtype, always in this order: a device that lacks a dtype shows "—" in its column, so no
# value can slide into its neighbour's column.
_PEAK_COLUMNS = (DType.FP32, DType.TF32, DType.FP16, DType.BF16, DType.FP8, DType.FP4, DType.INT8, DType.INT4)


def device_rows() -> tuple[list[str], list[list[str]]]:
    """The device table's header and rows: key, peak per dtype (T of FLOP/s or OPS), HBM GiB, usable GiB
    (the driver's total, which plans must fit in), HBM GB/s."""
    from distscope.system.device import device_names, get_device

    header = ["key", *(x.value for x in _PEAK_COLUMNS), "HBM GiB", "usable GiB", "HBM GB/s"]
    rows = []
    for k in device_names():
        dev = get_device(k)
        peaks = dict(dev.peak_flops)
        rows.append([k, *(f"{peaks[x] / 1e12:g}" if peaks.get(x) else "—" for x in _PEAK_COLUMNS),
                     f"{dev.hbm_bytes / 2**30:g}", f"{dev.usable_bytes / 2**30:.4g}", f"{dev.hbm_Bps / 1e9:g}"])
    return header, rows
