"""Software profiles (named presets with sources): see presets.py."""

from distscope.software.presets import SoftwareProfile, from_framework, get_software, software_names

__all__ = ["SoftwareProfile", "from_framework", "get_software", "software_names"]
