"""Communication compression: quantized collectives, DDP hooks, and their cost in the step-time model.

This package root imports no torch (the core uses `spec`); torch code lives in the submodules
`quantize`, `hadamard`, `collectives`, `hooks`, `sharded_dp`, `bench`, `convergence`.
"""

from distscope.compress.spec import (
    METHOD_SPECS,
    CommClass,
    CompressedCost,
    CompressionConfig,
    CompressionMethod,
    MethodSpec,
    compressed_comm_cost,
    parse_compression_config,
    parse_method,
    ratio_vs,
    ratio_vs_bf16,
)

__all__ = [
    "METHOD_SPECS",
    "CommClass",
    "CompressedCost",
    "CompressionConfig",
    "CompressionMethod",
    "MethodSpec",
    "compressed_comm_cost",
    "parse_compression_config",
    "parse_method",
    "ratio_vs",
    "ratio_vs_bf16",
]
