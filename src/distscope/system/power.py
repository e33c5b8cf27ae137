"""Board power per device (data/device_power.json, each value with its datasheet source).

The energy objective of `distscope explore` is E = gpus · tdp_W · time: the datasheet maximum, so an
upper bound on the GPUs' own draw (no host, network or cooling power).
"""

from __future__ import annotations

import functools
import json
from importlib import resources

from distscope.errors import DistscopeError, closest


@functools.cache
def _power() -> dict[str, float]:
    raw = json.loads(resources.files("distscope.system").joinpath("data/device_power.json").read_text())
    return {k: float(v["tdp_W"]) for k, v in raw.items() if not k.startswith("_")}


def tdp_W(device: str) -> float:
    """Maximum board power of a known device, in watts."""
    try:
        return _power()[device]
    except KeyError:
        raise DistscopeError(f"device={device!r} has no TDP on record{closest(device, _power())}; "
                             "give one with --tdp") from None
