"""Collective communication cost models (α-β per topology level) and NCCL-style algorithm choice."""

from distscope.comm.collective import Algorithm, Collective
from distscope.comm.group import GroupNet, group_net
from distscope.comm.select import collective_s, collective_time

__all__ = ["Algorithm", "Collective", "GroupNet", "collective_s", "collective_time", "group_net"]
