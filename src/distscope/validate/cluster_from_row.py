"""A cluster for a CSV row: the row's device, GPUs per node and bandwidths on the matching preset's
topology template (latencies, link efficiencies and NVLS capability come from the preset)."""

from __future__ import annotations

import dataclasses

from distscope.system.device import get_device
from distscope.system.presets import get_cluster
from distscope.system.topology import Cluster

TEMPLATE_BY_FAMILY = {
    "a100": "dgx-a100", "v100": "dgx-a100", "h100": "dgx-h100", "h800": "dgx-h100", "h200": "dgx-h200",
    "b200": "dgx-b200", "b300": "dgx-b300", "gb200": "gb200-nvl72", "gb300": "gb300-nvl72", "mi250x": "frontier",
    "mi300x": "dgx-h100", "mi325x": "mi325x-oam", "mi355x": "mi355x-oam",
}


def cluster_for(gpu: str, num_gpus: int, gpus_per_node: int, intra_GBps: float, inter_GBps: float) -> Cluster:
    device = get_device(gpu)
    family = next((f for f in TEMPLATE_BY_FAMILY if gpu.startswith(f)), "h100")
    tmpl = get_cluster(TEMPLATE_BY_FAMILY[family])
    inner, outer = tmpl.levels[0], tmpl.levels[-1]
    nvls = inner.nvls_efficiency > 0 and "pcie" not in gpu
    levels = (
        dataclasses.replace(inner, size=gpus_per_node, bw_GBps=intra_GBps,
                            nvls_efficiency=inner.nvls_efficiency if nvls else 0.0),
        dataclasses.replace(outer, bw_GBps=inter_GBps),
    )
    return Cluster(name=f"{gpu}x{num_gpus}", device=device, levels=levels, num_gpus=num_gpus)
