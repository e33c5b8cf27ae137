"""Per-op, per-size collective choice (MCR-DL) on 4 gloo ranks: measure every candidate implementation
(measure/algo_choice.py) over a size sweep, build the choice table, then time a workload of calls at other
sizes (log-spaced between the measured ones) through the dispatcher and through each single candidate,
interleaved and repeated. Target (issue 23): the dispatcher is never slower than the best single choice.

    python benchmarks/mcr_dispatch.py [--repeats 7]

Noise: 4 ranks share this machine's cores, so every variant is timed `repeats` times, interleaved, and
compared by median; the spread (max/min of the dispatcher's repeats) is reported beside each ratio.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from _results import save
from distscope.compress.launch import run_gloo

WORLD = 4
SIZES = [1 << k for k in range(10, 23, 2)]  # 1 KiB .. 4 MiB, x4


def worker(rank: int, world: int, repeats: int) -> dict:
    import torch
    import torch.distributed as dist

    from distscope.measure.algo_choice import CANDIDATES, Dispatcher, buffers, measure_table

    table = measure_table(SIZES, iters=7)
    rng = np.random.default_rng(0)  # the same workload on every rank
    work = {op: [int(2 ** rng.uniform(10, 22)) // 4 // world * world for _ in range(24)] for op in CANDIDATES}
    result: dict = {"table": table.to_dict(), "ops": {}}
    for op, numels in work.items():
        bufs = [buffers(op, max(world, k), world) for k in numels]
        variants = {"dispatcher": Dispatcher(table)} | {name: Dispatcher(table, fixed=name) for name in CANDIDATES[op]}
        # the noise floor: the best single candidate of the table, timed again as its own variant (A/A)
        variants["again:" + table.default(op)] = Dispatcher(table, fixed=table.default(op))
        call = {"all_reduce": lambda d, o, x: d.all_reduce(x.clone()),
                "all_gather": lambda d, o, x: d.all_gather_into_tensor(o, x),
                "reduce_scatter": lambda d, o, x: d.reduce_scatter_tensor(o, x)}[op.value]
        times: dict[str, list[float]] = {v: [] for v in variants}
        for _ in range(repeats + 1):  # the first round warms up and is dropped
            for v, d in variants.items():
                dist.barrier()
                t0 = time.perf_counter()
                for o, x in bufs:
                    call(d, o, x)
                t = torch.tensor([time.perf_counter() - t0])
                dist.all_reduce(t, op=dist.ReduceOp.MAX)
                times[v].append(float(t))
        med = {v: statistics.median(ts[1:]) for v, ts in times.items()}
        best_single = min((v for v in CANDIDATES[op]), key=lambda v: med[v])
        again = "again:" + table.default(op)
        disp = times["dispatcher"][1:]
        result["ops"][op.value] = {"median_s": med, "best_single": best_single,
                                   "ratio_vs_best_single": med["dispatcher"] / med[best_single],
                                   "dispatcher_spread": max(disp) / min(disp),
                                   "a_a_ratio": med[again] / med[table.default(op)],
                                   "choices": variants["dispatcher"].calls}
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=15)
    args = ap.parse_args()
    r = run_gloo(worker, WORLD, args.repeats, timeout_s=1200)
    for op, row in r["ops"].items():
        print(f"{op}: dispatcher {row['median_s']['dispatcher'] * 1e3:.2f} ms, best single ({row['best_single']}) "
              f"{row['median_s'][row['best_single']] * 1e3:.2f} ms, ratio {row['ratio_vs_best_single']:.3f} "
              f"(the same candidate timed twice: {row['a_a_ratio']:.3f}; dispatcher spread {row['dispatcher_spread']:.2f}x); "
              f"choices {row['choices']}")
    for op, rows in r["table"]["seconds"].items():
        print(op, {s: min(c, key=c.get) for s, c in rows.items()})
    worst = max(row["ratio_vs_best_single"] for row in r["ops"].values())
    noise = max(abs(row["a_a_ratio"] - 1) for row in r["ops"].values())
    save("mcr_dispatch", {"world": WORLD, "sizes": SIZES, "repeats": args.repeats, **r, "worst_ratio": worst,
                          "noise_floor": noise})


if __name__ == "__main__":
    main()
