"""Parametric hardware: a cluster preset with some device and topology values replaced.

"NVLink" is the preset's first topology level (the scale-up domain: NVLink, xGMI), "NIC" its
outermost level (the scale-out network: IB, RoCE, Slingshot); bandwidths are per GPU per direction at
line rate, as in data/clusters.json, and keep the level's efficiency. HBM capacity scales the
driver-reported usable memory by the preset device's usable/HBM ratio (the driver's reservation is a
fixed fraction of the stacks). The device keeps its name, so the GEMM efficiency calibrated for its
family still applies; a different peak or bandwidth moves the machine balance it is computed from.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from distscope.dtypes import DType
from distscope.errors import DistscopeError
from distscope.explore.axes import Axis
from distscope.system.topology import Cluster

GiB = 2**30

PEAK_AXES: dict[Axis, DType] = {
    Axis.TFLOPS_FP32: DType.FP32, Axis.TFLOPS_TF32: DType.TF32, Axis.TFLOPS_FP16: DType.FP16,
    Axis.TFLOPS_BF16: DType.BF16, Axis.TFLOPS_FP8: DType.FP8,
}
_LEVEL_AXES = (Axis.NVLINK_SIZE, Axis.NVLINK_GBPS, Axis.NVLINK_LATENCY_US, Axis.NIC_GBPS, Axis.NIC_LATENCY_US)


def apply_hardware(cluster: Cluster, hw: Mapping[Axis, float]) -> Cluster:
    """`cluster` with the hardware axes in `hw` replaced (module docstring); validates the result."""
    if not hw:
        return cluster
    dev = cluster.device
    by_dtype = {dt: hw[a] * 1e12 for a, dt in PEAK_AXES.items() if a in hw}
    peaks = tuple((dt, by_dtype.get(dt, v)) for dt, v in dev.peak_flops)
    device = dev
    if any(a in hw for a in (*PEAK_AXES, Axis.HBM_GIB, Axis.HBM_GBPS)):
        hbm = hw[Axis.HBM_GIB] * GiB if Axis.HBM_GIB in hw else dev.hbm_bytes
        device = dataclasses.replace(
            dev, peak_flops=peaks, hbm_bytes=hbm, usable_bytes=hbm * dev.usable_bytes / dev.hbm_bytes,
            hbm_Bps=hw[Axis.HBM_GBPS] * 1e9 if Axis.HBM_GBPS in hw else dev.hbm_Bps)
    levels = list(cluster.levels)
    if any(a in hw for a in _LEVEL_AXES):
        if len(levels) < 2:
            raise DistscopeError(f"cluster {cluster.name} has one topology level; the nvlink_* and nic_* axes "
                                 "need a scale-up and a scale-out level")
        first, last = levels[0], levels[-1]
        levels[0] = dataclasses.replace(
            first, size=int(hw.get(Axis.NVLINK_SIZE, first.size)), bw_GBps=hw.get(Axis.NVLINK_GBPS, first.bw_GBps),
            latency_s=hw[Axis.NVLINK_LATENCY_US] * 1e-6 if Axis.NVLINK_LATENCY_US in hw else first.latency_s)
        levels[-1] = dataclasses.replace(
            last, bw_GBps=hw.get(Axis.NIC_GBPS, last.bw_GBps),
            latency_s=hw[Axis.NIC_LATENCY_US] * 1e-6 if Axis.NIC_LATENCY_US in hw else last.latency_s)
    return dataclasses.replace(cluster, device=device, levels=tuple(levels))


def resolved(cluster: Cluster, gemm_dtype: DType) -> dict[str, float]:
    """The hardware values a point ran on (for the output table)."""
    dev, first, last = cluster.device, cluster.levels[0], cluster.levels[-1]
    return {
        "peak_tflops": float(dict(dev.peak_flops).get(gemm_dtype, 0.0)) / 1e12,
        "hbm_GiB": float(dev.hbm_bytes) / GiB,
        "hbm_GBps": float(dev.hbm_Bps) / 1e9,
        "nvlink_size": int(first.size),
        "nvlink_GBps": float(first.bw_GBps),
        "nvlink_latency_us": float(first.latency_s) * 1e6,
        "nic_GBps": float(last.bw_GBps),
        "nic_latency_us": float(last.latency_s) * 1e6,
    }
