"""Execution traces: the per-rank graph type and Chakra ET I/O (optional extra `distscope[chakra]`)."""

from distscope.trace.graph import CollKind, Node, NodeKind, RankGraph
from distscope.trace.traceset import TraceSet

__all__ = ["CollKind", "Node", "NodeKind", "RankGraph", "TraceSet"]
