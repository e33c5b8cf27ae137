"""One call from traces + network model to per-rank results."""

from __future__ import annotations

import time
from collections.abc import Callable

from distscope.sim.engine import SimOutcome, simulate_program
from distscope.sim.network import NetworkMode, NetworkModel
from distscope.sim.program import Device, compile_program
from distscope.sim.result import SimResult, summarize
from distscope.trace.gcpause import gc_paused
from distscope.trace.traceset import TraceSet


def run_traces(
    traces: TraceSet,
    network: NetworkModel,
    *,
    mode: NetworkMode = NetworkMode.UNAWARE,
    symmetric: bool = True,
    device: Device | None = None,
    single_comm_stream: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> SimOutcome:
    """Compile (validate, match, fold symmetric ranks) and simulate; `progress(done, total)` as
    simulate_program reports it."""
    t0 = time.perf_counter()
    with gc_paused():
        program = compile_program(
            traces,
            network,
            device=device,
            symmetric=symmetric,
            single_comm_stream=single_comm_stream,
            with_resources=mode is NetworkMode.SHARED,
        )
        outcome = simulate_program(program, shared=mode is NetworkMode.SHARED, progress=progress)
    outcome.wall_s = time.perf_counter() - t0
    return outcome


def simulate_traces(
    traces: TraceSet,
    network: NetworkModel,
    *,
    mode: NetworkMode = NetworkMode.UNAWARE,
    symmetric: bool = True,
    device: Device | None = None,
    single_comm_stream: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> SimResult:
    """run_traces, summarized per rank; `progress(done, total)` as run_traces reports it."""
    outcome = run_traces(
        traces,
        network,
        mode=mode,
        symmetric=symmetric,
        device=device,
        single_comm_stream=single_comm_stream,
        progress=progress,
    )
    with gc_paused():  # per-node interval lists while the whole program is alive: 5x faster (gcpause.py)
        return summarize(outcome)
