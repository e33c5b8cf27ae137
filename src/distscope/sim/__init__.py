"""Discrete-event simulation of per-rank execution traces on a network model."""

from distscope.sim.api import simulate_traces
from distscope.sim.network import NetworkMode
from distscope.sim.result import RankResult, SimResult

__all__ = ["NetworkMode", "RankResult", "SimResult", "simulate_traces"]
