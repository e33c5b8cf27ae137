"""CPU inference of a torch module on this host, for serve/cpu_plan.py: the latency profile L(t, b) of one
instance with t threads on a batch of b, and real runs of a plan's instances side by side.

Each instance is pinned to its own cores (`os.sched_setaffinity`, where the OS has it), as Packrat pins
them, with `torch.set_num_threads(t)`; weights are random (the module's own initialisation, seed 0), in
fp32, under `torch.inference_mode()`. The profile times one instance alone, b = 1..B for every t, the
median of `repeats` forwards after one warm-up; a plan's run starts its instances in processes of
their own (multiprocessing, spawn), lets them warm up, releases them together at a barrier, and times
`repeats` forwards in each. Its latency is the slowest instance's median: what a batch split that way
waits for. Instances that share a host contend for its memory bandwidth and last-level cache, which
the solo profile does not see: comparing the two is what the measurement checks.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from distscope.dtypes import DType
from distscope.errors import DistscopeError
from distscope.serve.cpu_plan import CpuPlan, CpuProfile
from distscope.workload.module_graph import InputSpec, at_batch, load_factory

RUN_TIMEOUT_S = 600.0


def allowed_cores() -> list[int]:
    """The CPUs this process may run on (its affinity; every CPU where the OS has none)."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def _pin(cores: list[int], first: int, threads: int) -> None:
    """Run on `threads` of `cores` from index `first`, with as many intra-op threads."""
    import torch

    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {cores[(first + i) % len(cores)] for i in range(threads)})
    torch.set_num_threads(threads)


def _build(ref: str) -> Any:
    import torch

    factory, _ = load_factory(ref)
    torch.manual_seed(0)
    try:
        model = factory()
    except Exception as exc:  # the user's module: one line
        raise DistscopeError(f"--model {ref}: building the module failed: {type(exc).__name__}: {exc}") from None
    return model.float().eval()


def _inputs(inputs: Sequence[InputSpec], batch: int) -> list[Any]:
    import torch

    return [torch.randn(x.shape) for x in at_batch(tuple(inputs), batch)]


def _time(model: Any, xs: list[Any], repeats: int) -> list[float]:
    import torch

    out = []
    with torch.inference_mode():
        model(*xs)  # warm-up
        for _ in range(repeats):
            t = time.perf_counter()
            model(*xs)
            out.append(time.perf_counter() - t)
    return out


def profile(ref: str, inputs: Sequence[InputSpec], cores: int, max_batch: int, repeats: int = 3,
            progress: Callable[[], None] | None = None) -> CpuProfile:
    """L(t, b) for t = 1..cores and b = 1..max_batch on this host, one instance alone (module docstring)."""
    import torch

    model = _build(ref)
    before = torch.get_num_threads()
    cores_ok = allowed_cores()
    rows = []
    try:
        for t in range(1, cores + 1):
            _pin(cores_ok, 0, t)
            row = []
            for b in range(1, max_batch + 1):
                try:
                    row.append(statistics.median(_time(model, _inputs(inputs, b), repeats)))
                except Exception as exc:
                    shapes = ",".join(x.text for x in at_batch(tuple(inputs), b))
                    raise DistscopeError(f"--model {ref} with --input {shapes}: the forward failed: "
                                         f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}") from None
                if progress is not None:
                    progress()
            rows.append(tuple(row))
    finally:
        torch.set_num_threads(before)
        if hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, set(cores_ok))
    return CpuProfile(latency_s=tuple(rows), source=f"serve cpu profile: {ref}, {repeats} forwards per point, "
                                                    f"one instance alone, {os.cpu_count()} logical CPUs")


def _worker(ref: str, inputs: list[tuple[str, tuple[int, ...]]], cores: list[int], first_core: int, threads: int,
            batch: int, repeats: int, barrier: Any, queue: Any) -> None:
    """One instance of a plan, in its own process (spawned: everything it gets is picklable)."""
    try:
        _pin(cores, first_core, threads)
        specs = [InputSpec(name=n, shape=s, dtype=DType.FP32) for n, s in inputs]
        model = _build(ref)
        xs = _inputs(specs, batch)
        _time(model, xs, 1)
        barrier.wait(timeout=RUN_TIMEOUT_S)
        queue.put((first_core, _time(model, xs, repeats)))
    except Exception as exc:
        queue.put((first_core, f"{type(exc).__name__}: {exc}"))
        barrier.abort()


def run_plan(ref: str, inputs: Sequence[InputSpec], plan: CpuPlan, repeats: int = 5) -> dict[str, Any]:
    """The plan's instances for real, side by side on disjoint cores (module docstring)."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(len(plan.instances))
    queue = ctx.Queue()
    spec = [(x.name, x.shape) for x in inputs]
    procs, first, cores = [], 0, allowed_cores()
    for t, b in plan.instances:
        procs.append(ctx.Process(target=_worker, args=(ref, spec, cores, first, t, b, repeats, barrier, queue),
                                 daemon=True))
        first += t
    for p in procs:
        p.start()
    results: dict[int, Any] = {}
    deadline = time.monotonic() + RUN_TIMEOUT_S
    try:
        while len(results) < len(procs):
            left = deadline - time.monotonic()
            if left <= 0:
                raise DistscopeError(f"serve cpu: the plan {plan.label()} did not finish in {RUN_TIMEOUT_S:.0f} s")
            try:
                core, res = queue.get(timeout=min(left, 5.0))
            except Exception:
                if not any(p.is_alive() for p in procs) and queue.empty():
                    raise DistscopeError(f"serve cpu: an instance of {plan.label()} exited without a result") from None
                continue
            if isinstance(res, str):
                raise DistscopeError(f"serve cpu: an instance of {plan.label()} failed: {res}")
            results[core] = res
    finally:
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
    medians = [statistics.median(v) for _, v in sorted(results.items())]
    lat = max(medians)
    return {"plan": plan.label(), "instances": [{"threads": t, "batch": b} for t, b in plan.instances], "latency_s": lat, "throughput_per_s": plan.batch / lat if lat > 0 else math.inf,
            "instance_median_s": medians, "predicted_latency_s": plan.latency_s,
            "error_pct": 100.0 * (plan.latency_s / lat - 1.0)}
