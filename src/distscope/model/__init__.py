"""The analytical estimator: compute, memory, communication, pipeline schedule and overlap."""

from distscope.model.estimate import estimate
from distscope.model.result import Estimate

__all__ = ["Estimate", "estimate"]
