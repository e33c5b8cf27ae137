"""The plan search on one process and on every core (`plan --workers`, search/parallel.py), side by side.

Three searches of the planner's default space (bf16, every layout, sequence parallel, sharding, micro-batch and
recompute choice, then the re-partitioning of the best): GPT-3 175B on 1,024 A100 (global batch 1536, seq 2048),
Qwen3-30B-A3B on 128 H100 (512, 4096) and DeepSeek-V3 on 2,048 H100 (4096, 4096). Each is run serially and
in parallel, alternating twice, wall time the lower of the two; the two must keep the same plans (top, pool
and compression seeds, in order), or the script fails. The parallel search starts a process pool (a fork
server preloaded with the planner) in every run: its start is in the figure.

    python benchmarks/parallel_search.py [--out FILE.json]

Last line of output: one JSON object.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from _results import save
from distscope.dtypes import Precision
from distscope.search.parallel import cpu_count
from distscope.search.planner import SearchResult, search
from distscope.search.space import SearchSpace
from distscope.system import get_cluster
from distscope.workload import TrainingShape, get_model

CASES = (
    ("gpt3-175b", "dgx-a100", 1024, 1536, 2048),
    ("qwen3-30b-a3b", "dgx-h100", 128, 512, 4096),
    ("deepseek-v3", "dgx-h100", 2048, 4096, 4096),
)


def _kept(r: SearchResult) -> tuple[list[Any], list[Any]]:
    return ([(c.plan, c.step_time_s, c.partition) for c in r.pool], [(c.plan, c.step_time_s) for c in r.comm_pool])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", help="also write the JSON here")
    args = ap.parse_args()
    workers = cpu_count()
    cases = []
    for model, cluster, gpus, gb, seq in CASES:
        spec, shape, c = get_model(model), TrainingShape(seq_len=seq, global_batch=gb), get_cluster(cluster, gpus)
        space = SearchSpace(precision=Precision.BF16)
        wall: dict[int, list[float]] = {1: [], workers: []}
        runs: dict[int, SearchResult] = {}
        for _ in range(2):
            for w in (1, workers):
                t = time.perf_counter()
                runs[w] = search(spec, shape, c, space, workers=w)
                wall[w].append(time.perf_counter() - t)
        same = _kept(runs[1]) == _kept(runs[workers])
        case = {"model": model, "cluster": cluster, "gpus": gpus, "layouts": runs[1].layouts,
                "serial_s": min(wall[1]), "parallel_s": min(wall[workers]),
                "speedup": min(wall[1]) / min(wall[workers]), "evaluated_serial": runs[1].evaluated,
                "evaluated_parallel": runs[workers].evaluated, "same_plans": same}
        print(f"{model} on {gpus} {cluster}: {case['layouts']} layouts, serial {case['serial_s']:.1f} s, "
              f"{workers} processes {case['parallel_s']:.1f} s (x{case['speedup']:.2f}), same plans: {same}",
              file=sys.stderr)
        cases.append(case)
    result = {"workers": workers, "cases": cases, "all_same": all(x["same_plans"] for x in cases)}
    save("parallel_search", result)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
    if not result["all_same"]:
        sys.exit("the parallel search kept other plans than the serial one")


if __name__ == "__main__":
    main()
