"""distscope: how a model will run on a cluster, where the time goes, and what to change."""

__version__ = "0.1.0"
