"""Built-in cluster presets (data/clusters.json): dgx-a100, dgx-h100, h100-roce, frontier, ...

Frontier: 8 MI250X GCDs per node joined by Infinity Fabric (50 GB/s per direction per GCD-GCD link),
4x Slingshot-11 200 Gb/s NICs per node = 100 GB/s per node = 12.5 GB/s per GCD.
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any

from distscope.errors import DistscopeError, closest
from distscope.system.device import get_device
from distscope.system.topology import Cluster, Level


@functools.cache
def _raw() -> dict[str, Any]:
    data = json.loads(resources.files("distscope.system").joinpath("data/clusters.json").read_text())
    return {k: v for k, v in data.items() if not k.startswith("_")}


def cluster_names() -> list[str]:
    return list(_raw())


def get_cluster(name: str, gpus: int | None = None) -> Cluster:
    key = name.strip().lower()
    raw = _raw().get(key)
    if raw is None:
        raise DistscopeError(f"cluster={name!r} is not a preset{closest(key, _raw())}")
    return Cluster(
        name=key,
        device=get_device(raw["device"]),
        levels=tuple(Level(**lv) for lv in raw["levels"]),
        num_gpus=gpus if gpus is not None else int(raw["default_gpus"]),
    )
