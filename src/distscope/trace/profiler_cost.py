"""What the profiler adds to each op it records, measured on the capturing host at capture time.

`trace capture` records a step with the execution-trace observer and Kineto (record_shapes) on, and both
run callbacks on every record function: on a 2-core CPU host about 5-35 us per op, growing with the
number of tensors the observer serializes, against 1-10 us for the small ops themselves. The observer,
which writes every op with its arguments, is nearly all of it: 7 us of 7.5 per op on the example GPT,
the same with its ops 4x larger, against 0.5 us for Kineto (benchmarks/profiler_overhead.py). The
whole cost grows with the data the ops touch between the profiler's callbacks: this module's
calibration loop costs 7.7 us per op with 512 kB of weights, 9.7 with 2 MB and 13 with 8 MB (the same
benchmark), so it matches a job as far as their working sets match. A step of a few thousand ops runs
2-3x slower profiled than not. The replay (trace/from_capture.py) takes that cost
back out of every op, so the simulated step is the job's own, unprofiled step.

How the cost is measured (`calibrate`, in each worker just before its capture starts, so under the
same load as the job): four workloads run once plain and once under a profiler configured as the
capture's: loops of three small ops with 3, 5 and 17 tensors (aten::add, cat of 4, cat of 16) and a
small MLP training loop (a realistic op mix, with a working set beyond the per-core caches).
  total   = a + b * tensors per recorded op: least squares of  a * events + b * tensors
            = profiled - plain  over the four workloads (events and tensors counted in its own trace);
  inside  = a + b * tensors fitted (numpy.polyfit) over the one-op loops' median Kineto duration less
            the op's own time ((plain loop - empty loop) / n): callbacks after the op's start stamp;
  outside = total - inside: the part in the gaps around the op.
  launch  = on a CUDA job, a fifth loop, the same add on GPU tensors: what it costs beyond its ops'
            CPU-side share, per kernel launch (CUPTI's callback on every CUDA runtime call; counted by the
            cudaLaunchKernel / cudaMemcpy / cudaMemset calls in its trace), split as the CPU ops' cost is:
            inside (its median Kineto duration less its own time, beyond a CPU op's inside share) and outside.
The observer writes every tensor argument, so the cost grows with them. `ProfilerCost` (torch-free)
applies it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Mapping
from typing import Any


def count_tensors(values: Any) -> int:
    """Tensors in a host-trace value list (each a [id, storage, offset, numel, itemsize, device] list)."""
    if isinstance(values, list) and len(values) == 6 and all(isinstance(x, int) for x in values[:5]):
        return 1
    if isinstance(values, list):
        return sum(count_tensors(v) for v in values)
    return 0


def node_tensors(node: Mapping[str, Any]) -> int:
    """Tensor arguments and results of a host-trace node (what the observer serialized for it)."""
    return count_tensors((node.get("inputs") or {}).get("values")) + count_tensors(
        (node.get("outputs") or {}).get("values"))


@dataclasses.dataclass(frozen=True, kw_only=True)
class ProfilerCost:
    """Seconds the profiler adds to one recorded op with `n` tensors: a + b * n, inside its Kineto
    interval and outside it (in the gaps around it). Zero cost: `ProfilerCost()`."""

    inside_s: tuple[float, float] = (0.0, 0.0)
    outside_s: tuple[float, float] = (0.0, 0.0)
    # per device launch (kernel, copy, memset) the op made, beyond its CPU-side cost: inside and outside it
    launch_s: tuple[float, float] = (0.0, 0.0)

    def inside(self, n: int, launches: int = 0) -> float:
        return max(0.0, self.inside_s[0] + self.inside_s[1] * n + self.launch_s[0] * launches)

    def outside(self, n: int, launches: int = 0) -> float:
        return max(0.0, self.outside_s[0] + self.outside_s[1] * n + self.launch_s[1] * launches)

    def total(self, n: int, launches: int = 0) -> float:
        return self.inside(n, launches) + self.outside(n, launches)

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> ProfilerCost:
        if not data:
            return cls()
        launch = data.get("launch_s") or (0.0, 0.0)  # captures of CPU jobs before the CUDA loop have none
        return cls(inside_s=(float(data["inside_s"][0]), float(data["inside_s"][1])),
                   outside_s=(float(data["outside_s"][0]), float(data["outside_s"][1])),
                   launch_s=(float(launch[0]), float(launch[1])))


# CUDA runtime calls that put work on a stream: each one is a device node (kernel, copy, memset) of the trace
LAUNCH_CALLS = ("cudaLaunchKernel", "cudaMemcpy", "cudaMemset", "cuLaunchKernel")


def calibrate(activities: list[Any], n: int = 1000, train_iters: int = 30, width: int = 512) -> dict[str, Any]:
    """Measure the per-op profiler cost on this host (module docstring); a JSON-able dict with the fit
    (`inside_s`, `outside_s`: [a, b]) and each workload's measurement. `width`: the training loop's MLP
    width (its working set; benchmarks/profiler_overhead.py varies it)."""
    import numpy as np
    import torch
    from torch.profiler import ExecutionTraceObserver, profile

    a, b = torch.ones(16), torch.ones(16)
    xs4, xs16 = [torch.ones(4) for _ in range(4)], [torch.ones(4) for _ in range(16)]
    # a working set (~0.7 MB of weights, activations and gradients) beyond the per-core caches, as a real
    # step's: between ops the profiler's own state is evicted (a 32x64 MLP here: ~10% less cost per op)
    mlp = torch.nn.Sequential(torch.nn.Linear(128, width), torch.nn.GELU(), torch.nn.LayerNorm(width),
                              torch.nn.Linear(width, 128))
    x = torch.randn(64, 128)
    params: list[torch.Tensor] = list(mlp.parameters())

    def train() -> None:  # SGD by hand: a torch.optim step would fire the capture's optimizer-step hook
        for p in params:
            p.grad = None
        mlp(x).sum().backward()
        with torch.no_grad():
            torch._foreach_add_(params, [p.grad for p in params if p.grad is not None], alpha=-1e-3)

    work: dict[str, tuple[Callable[[], Any], int]] = {
        "aten::add": (lambda: torch.add(a, b), n),
        "aten::cat/4": (lambda: torch.cat(xs4), n),
        "aten::cat/16": (lambda: torch.cat(xs16), n),
        "train": (train, train_iters),  # a realistic op mix: forward, autograd engine, optimizer
    }
    cuda = torch.cuda.is_initialized() and any("CUDA" in str(act) for act in activities)
    if cuda:  # the same op launching a kernel: CUPTI's per-launch callback on top of the op's own cost
        ca, cb = a.cuda(), b.cuda()
        work["cuda:aten::add"] = (lambda: torch.add(ca, cb), n)

    def loop(f: Callable[[], Any], k: int) -> float:
        t0 = time.perf_counter()
        for _ in range(k):
            f()
        if cuda:  # host time only: the launches are queued, not waited for (the queue never fills here)
            torch.cuda.synchronize()
        return time.perf_counter() - t0

    train()
    empty = min(loop(lambda: None, n) for _ in range(3)) / n
    plain = {k: min(loop(f, m) for _ in range(3)) for k, (f, m) in work.items()}
    with tempfile.TemporaryDirectory() as tmp:
        et = ExecutionTraceObserver().register_callback(os.path.join(tmp, "host.json"))
        prof = profile(activities=activities, record_shapes=True, execution_trace_observer=et)
        prof.start()
        profiled = {}
        for k, (f, m) in work.items():
            with torch.autograd.profiler.record_function(f"distscope::calibrate {k}"):
                profiled[k] = loop(f, m)
        prof.stop()
        et.unregister_callback()
        prof.export_chrome_trace(os.path.join(tmp, "kineto.json"))
        with open(os.path.join(tmp, "kineto.json")) as fh:
            events = [e for e in json.load(fh).get("traceEvents", []) if e.get("ph") == "X"]
        with open(os.path.join(tmp, "host.json")) as fh:
            host = json.load(fh).get("nodes", [])
    marks = {e["name"].split(" ", 1)[1]: (e["ts"], e["ts"] + e["dur"]) for e in events
             if str(e.get("name", "")).startswith("distscope::calibrate ")}
    parent = {h.get("id"): h.get("ctrl_deps") for h in host}
    mark_of: dict[Any, str] = {h.get("id"): str(h["name"]).split(" ", 1)[1] for h in host
                               if str(h.get("name", "")).startswith("distscope::calibrate ")}

    def workload(h: Mapping[str, Any]) -> str | None:
        p, seen = h.get("ctrl_deps"), 0
        while p is not None and p not in mark_of and seen < 10_000:
            p, seen = parent.get(p), seen + 1
        return mark_of.get(p)

    recorded: dict[str, list[int]] = {k: [] for k in work}
    launches = {k: sum(1 for e in events if e.get("cat") == "cuda_runtime" and str(e.get("name", "")).startswith(
        LAUNCH_CALLS) and marks[k][0] <= e["ts"] <= marks[k][1]) for k in work}
    for h in host:
        owner = workload(h)
        if owner is not None:
            recorded[owner].append(node_tensors(h))
    points = []
    for k, (_, m) in work.items():
        total = max(0.0, profiled[k] - plain[k])  # seconds over the whole loop
        point: dict[str, Any] = {"workload": k, "events": len(recorded[k]), "tensors": sum(recorded[k]),
                                 "launches": launches[k], "plain_s": plain[k], "profiled_s": profiled[k]}
        if k != "train":  # one op per iteration: how much of its cost lies inside its Kineto interval
            t0, t1 = marks[k]
            op = k.removeprefix("cuda:").split("/")[0]
            durs = [float(e["dur"]) * 1e-6 for e in events if e.get("name") == op and t0 <= e["ts"] <= t1]
            own = max(0.0, plain[k] / m - empty)
            point["inside_per_op_s"] = min(total / m, max(0.0, statistics.median(durs) - own)) if durs else 0.0
        points.append(point)
    # total cost: least squares of  a * events + b * tensors = profiled - plain  over the workloads
    cpu_points = [p for p in points if not p["launches"]]
    mat = np.array([[p["events"], p["tensors"]] for p in cpu_points], dtype=float)
    rhs = np.array([p["profiled_s"] - p["plain_s"] for p in cpu_points])
    (ta, tb), *_ = np.linalg.lstsq(mat, rhs, rcond=None)
    ops = [p for p in points if "inside_per_op_s" in p and not p["launches"]]
    fit_in = np.polyfit([p["tensors"] / max(1, p["events"]) for p in ops], [p["inside_per_op_s"] for p in ops], 1)
    ia, ib = float(fit_in[1]), float(fit_in[0])
    # per launch: what the CUDA loop costs beyond the same ops' CPU-side cost, and the part of it inside
    # the op's Kineto interval (CUPTI's callback in the launch) beyond the CPU op's inside share
    launch_in = launch_out = 0.0
    for p in points:
        if p["launches"]:
            per_op = p["tensors"] / max(1, p["events"])
            extra = p["profiled_s"] - p["plain_s"] - (ta * p["events"] + tb * p["tensors"])
            launch_in = max(0.0, p.get("inside_per_op_s", 0.0) - (ia + ib * per_op)) * p["events"] / p["launches"]
            launch_out = extra / p["launches"] - launch_in
    return {"inside_s": [ia, ib], "outside_s": [float(ta) - ia, float(tb) - ib], "total_s": [float(ta), float(tb)],
            "launch_s": [launch_in, launch_out], "points": points}
