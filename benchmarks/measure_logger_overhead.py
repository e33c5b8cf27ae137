"""Overhead of distscope's CommLogger, measured in the same run with and without it.

Two workloads on 4 gloo ranks (CPU), each timed in alternating rounds (off, on, off, on, ...) so drift
hits both sides alike:
- `allreduce_loop`: 200 back-to-back dist.all_reduce of 4 KiB (collective-heavy, worst case per call);
- `ddp_gpt_step`: 5 forward+backward+SGD steps of the examples/ small GPT under DDP (what a real training
  step pays);
- `self_group_loop`: 2000 all_reduce of 4 KiB on a group holding only this rank: no waiting on other
  processes, so on/off isolates the logger's own CPU cost per call (the other two are dominated by
  cross-process scheduling noise on an oversubscribed host).
Reports median time per round and the on/off ratio. Last line: one JSON object.

    python benchmarks/measure_logger_overhead.py [--rounds 6] [--json-out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _results import save

ROOT = Path(__file__).resolve().parents[1]


def worker(rounds: int, out: Path) -> None:
    from datetime import timedelta

    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    sys.path.insert(0, str(ROOT / "examples"))
    from gpt import GPT, GPTConfig, lm_loss

    from distscope.measure import CommLogger

    dist.init_process_group("gloo", timeout=timedelta(seconds=120))
    t = torch.ones(1024)
    torch.manual_seed(0)
    cfg = GPTConfig()
    model = DDP(GPT(cfg))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    tokens = torch.randint(0, cfg.vocab, (4, cfg.seq_len + 1))

    own = [dist.new_group([r]) for r in range(dist.get_world_size())][dist.get_rank()]

    def self_group_loop() -> None:
        for _ in range(2000):
            dist.all_reduce(t, group=own)

    def allreduce_loop() -> None:
        for _ in range(200):
            dist.all_reduce(t)

    def ddp_gpt_step() -> None:
        for _ in range(5):
            opt.zero_grad()
            lm_loss(model(tokens[:, :-1]), tokens[:, 1:]).backward()
            opt.step()

    times: dict[str, dict[str, list[float]]] = {}
    ncalls: dict[str, int] = {}
    for name, fn in (
        ("allreduce_loop", allreduce_loop),
        ("ddp_gpt_step", ddp_gpt_step),
        ("self_group_loop", self_group_loop),
    ):
        fn()  # warm up (DDP bucket rebuild etc.)
        times[name] = {"off": [], "on": []}
        for _ in range(rounds):
            for mode in ("off", "on"):
                dist.barrier()
                t0 = time.perf_counter()
                if mode == "on":
                    with CommLogger() as log:
                        fn()
                    ncalls[name] = len(log.calls())
                else:
                    fn()
                times[name][mode].append(time.perf_counter() - t0)
    if dist.get_rank() == 0:
        out.write_text(json.dumps({"times": times, "ncalls": ncalls}))
    dist.destroy_process_group()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--json-out", type=Path)
    ap.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.rounds, args.worker)
        return
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "r.json"
        env = dict(
            os.environ,
            PYTHONPATH=os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
            OMP_NUM_THREADS="1",
        )
        subprocess.run(
            [
                sys.executable,
                "-m",
                "torch.distributed.run",
                "--standalone",
                "--nproc-per-node=4",
                __file__,
                "--rounds",
                str(args.rounds),
                "--worker",
                str(out),
            ],
            env=env,
            check=True,
            timeout=600,
            stdout=subprocess.DEVNULL,
        )
        data = json.loads(out.read_text())
    summary = {}
    print(f"{'workload':<16} {'off_ms':>10} {'on_ms':>10} {'ratio':>7} {'calls/round':>12} {'us/call':>9}")
    for name, t in data["times"].items():
        off, on = statistics.median(t["off"]), statistics.median(t["on"])
        calls = data["ncalls"][name]
        per_call_us = (on - off) / calls * 1e6
        print(f"{name:<16} {off * 1e3:10.2f} {on * 1e3:10.2f} {on / off:7.3f} {calls:12d} {per_call_us:9.1f}")
        summary[name] = {
            "off_s": off,
            "on_s": on,
            "ratio": on / off,
            "calls": calls,
            "overhead_us_per_call": per_call_us,
        }
    line = json.dumps({"benchmark": "measure_logger_overhead", "nranks": 4, "backend": "gloo", **summary})
    if args.json_out:
        args.json_out.write_text(line + "\n")
    save("measure_logger_overhead", json.loads(line))


if __name__ == "__main__":
    main()
