"""distscope.measure: real collectives on torch.distributed, nccl-tests ingestion, alpha-beta calibration,
and a comm logger.

Importing this package does not import torch; `CommLogger` (which does) is loaded on first access.
"""

from __future__ import annotations

from typing import Any

__all__ = ["CommLogger"]


def __getattr__(name: str) -> Any:
    if name == "CommLogger":
        from distscope.measure.logger import CommLogger

        return CommLogger
    raise AttributeError(name)
