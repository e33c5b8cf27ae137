"""Workload: model architecture (spec, catalog, HF import), parameter counts and training shape."""

from distscope.workload.catalog import get_model, model_names
from distscope.workload.spec import AttentionKind, FfnKind, ModelSpec, MoESpec
from distscope.workload.training import TrainingShape

__all__ = ["AttentionKind", "FfnKind", "MoESpec", "ModelSpec", "TrainingShape", "get_model", "model_names"]
