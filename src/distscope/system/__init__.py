"""System: devices, topology levels and cluster presets."""

from distscope.system.device import Device, get_device
from distscope.system.presets import cluster_names, get_cluster
from distscope.system.topology import Cluster, Level

__all__ = ["Cluster", "Device", "Level", "cluster_names", "get_cluster", "get_device"]
