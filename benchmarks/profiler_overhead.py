"""What `trace capture`'s profiler adds to a training step, component by component (issue 21).

The examples' GPT under DDP on a one-process gloo group, SGD, one thread: the capture benchmark's job
(--hidden 128 --seq-len 64, micro-batch 2), the same with 8 layers instead of 4 (twice the ops), and the
capture test's wider job (--hidden 256, micro-batch 4: the same ops, each larger). Each round runs a
plain loop of --steps steps, then the same loop under each profiler configuration in a session of its
own; the cost of a configuration is its loop less the plain loop just before it, per step, median over
--rounds rounds:
  kineto      torch.profiler, CPU activity, record_shapes (what `trace capture` asks of Kineto);
  et          the ExecutionTraceObserver alone (the host graph: every op with its arguments);
  et+kineto   both, as `trace capture` records a step.
Per recorded op: the cost over the step's execution-trace nodes (the same ops in every configuration).

Also the capture's own calibration (trace/profiler_cost.calibrate, observer and Kineto as a capture runs
them) with its training loop's MLP at widths 512 (the default), 2048 and 8192: the loop's cost per
recorded op, median over --cal-rounds, against its working set (the MLP's weights): what the profiler
costs per op depends on the data the ops touch between its callbacks, so a calibration loop matches
a job's cost only as far as their working sets match.

    python benchmarks/profiler_overhead.py [--rounds 7] [--steps 3] [--cal-rounds 3]

Last line: one JSON object (also benchmarks/results/profiler_overhead.json).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _results import save

ROOT = Path(__file__).resolve().parents[1]
JOBS = {"gpt-h128": dict(hidden=128, layers=4, micro_batch=2), "gpt-h128-8layers": dict(hidden=128, layers=8,
        micro_batch=2), "gpt-h256-mb4": dict(hidden=256, layers=4, micro_batch=4)}
CONFIGS = ("kineto", "et", "et+kineto")


def _step_fn(hidden: int, layers: int, micro_batch: int) -> Callable[[], None]:
    import torch
    from gpt import GPT, GPTConfig, lm_loss
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.manual_seed(0)
    cfg = GPTConfig(hidden=hidden, ffn_hidden=4 * hidden, seq_len=64, layers=layers)
    model = DDP(GPT(cfg))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randint(0, cfg.vocab, (micro_batch, cfg.seq_len))

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        lm_loss(model(x), x).backward()
        opt.step()

    return step


def _loop(step: Callable[[], None], k: int) -> float:
    t0 = time.perf_counter()
    for _ in range(k):
        step()
    return time.perf_counter() - t0


def _profiled(step: Callable[[], None], k: int, config: str, tmp: str) -> tuple[float, int]:
    """Seconds of k steps under `config`, and the execution-trace nodes recorded (0 without the observer)."""
    from torch.profiler import ExecutionTraceObserver, ProfilerActivity, profile

    from distscope.trace.link import PROCESS_ROOT, THREAD_ROOT

    path = os.path.join(tmp, f"host-{config}.json")
    et = ExecutionTraceObserver().register_callback(path) if "et" in config.split("+") else None
    if config == "et":
        assert et is not None
        et.start()
        dt = _loop(step, k)
        et.stop()
    else:
        prof = profile(activities=[ProfilerActivity.CPU], record_shapes=True, execution_trace_observer=et)
        prof.start()
        dt = _loop(step, k)
        prof.stop()
    if et is None:
        return dt, 0
    et.unregister_callback()
    with open(path) as fh:
        nodes = [n for n in json.load(fh)["nodes"] if n.get("name") not in (PROCESS_ROOT, THREAD_ROOT)]
    return dt, len(nodes)


def measure(job: dict[str, int], rounds: int, steps: int) -> dict[str, Any]:
    step = _step_fn(**job)
    _loop(step, 5)  # warm-up
    plain: list[float] = []
    added: dict[str, list[float]] = {c: [] for c in CONFIGS}
    nodes: list[int] = []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(rounds):
            for config in CONFIGS:
                base = _loop(step, steps)
                plain.append(base / steps)
                dt, n = _profiled(step, steps, config, tmp)
                added[config].append((dt - base) / steps)
                if n:
                    nodes.append(n // steps)
            print(f"  round {r + 1}/{rounds}: " + ", ".join(f"{c} +{added[c][-1] * 1e3:.2f} ms" for c in CONFIGS),
                  file=sys.stderr)
    step_s = statistics.median(plain)
    ops = int(statistics.median(nodes))
    out: dict[str, Any] = {"plain_step_ms": round(step_s * 1e3, 2), "recorded_ops_per_step": ops}
    for c in CONFIGS:
        a = statistics.median(added[c])
        out[c] = {"added_ms_per_step": round(a * 1e3, 2), "us_per_op": round(a / ops * 1e6, 2),
                  "added_over_step": round(a / step_s, 2), "spread_ms": [round(min(added[c]) * 1e3, 2),
                                                                          round(max(added[c]) * 1e3, 2)]}
    out["et_share_of_capture_cost"] = round(statistics.median(added["et"]) / statistics.median(added["et+kineto"]), 2)
    return out


WIDTHS = (512, 2048, 8192)


def calibration_by_width(rounds: int) -> dict[str, Any]:
    """calibrate()'s training-loop cost per recorded op, and its fitted constant, at each MLP width."""
    from torch.profiler import ProfilerActivity

    from distscope.trace.profiler_cost import calibrate

    out: dict[str, Any] = {}
    for w in WIDTHS:
        train, const = [], []
        for _ in range(rounds):
            cal = calibrate([ProfilerActivity.CPU], width=w)
            pt = next(p for p in cal["points"] if p["workload"] == "train")
            train.append((pt["profiled_s"] - pt["plain_s"]) / pt["events"])
            const.append(cal["total_s"][0])
        out[str(w)] = {"weights_kb": round(2 * 128 * w * 4 / 1024), "train_us_per_op": round(statistics.median(train) * 1e6, 2),
                       "fitted_us_per_op": round(statistics.median(const) * 1e6, 2),
                       "spread_us": [round(min(train) * 1e6, 2), round(max(train) * 1e6, 2)]}
        print(f"  calibration at width {w}: {out[str(w)]['train_us_per_op']} us per op (training loop)", file=sys.stderr)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--cal-rounds", type=int, default=3)
    args = ap.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sys.path.insert(0, str(ROOT / "examples"))
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as store:
        dist.init_process_group("gloo", init_method=f"file://{store}/pg", rank=0, world_size=1)
        try:
            jobs = {}
            for name, job in JOBS.items():
                print(f"{name}: {args.rounds} rounds of {args.steps} steps per configuration", file=sys.stderr)
                jobs[name] = measure(job, args.rounds, args.steps)
        finally:
            dist.destroy_process_group()
    print(f"calibration loop at MLP widths {', '.join(map(str, WIDTHS))}: {args.cal_rounds} rounds each", file=sys.stderr)
    save("profiler_overhead", {"rounds": args.rounds, "steps": args.steps, "torch": torch.__version__, "jobs": jobs,
                               "calibration_by_width": calibration_by_width(args.cal_rounds)})


if __name__ == "__main__":
    main()
