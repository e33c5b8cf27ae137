"""Execution traces: the per-rank graph type and Chakra ET I/O (optional extra `distscope[chakra]`).

`distscope.trace.capture(out_dir)` records a step of a running PyTorch job (needs torch; see recorder.py).
"""

from typing import Any

from distscope.trace.graph import CollKind, Node, NodeKind, RankGraph
from distscope.trace.traceset import TraceSet

__all__ = ["CollKind", "Node", "NodeKind", "RankGraph", "TraceSet", "capture"]


def __getattr__(name: str) -> Any:
    if name == "capture":  # imports torch: only on use
        from distscope.trace.recorder import capture

        return capture
    raise AttributeError(name)
