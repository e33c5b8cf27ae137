"""Speed of `serve simulate`: 10,000 requests on one replica, one core (target: <= 2 s each).

    taskset -c 0 python benchmarks/serve_speed.py

Cases: Llama 3 8B on one H100 under vLLM (prefill-prioritised) at a Poisson rate near its capacity, the
same with exponential lengths, TensorRT-LLM in-flight batching with a closed loop of 64 clients, and
chunked prefill (Sarathi) at the same rate. Wall time of the simulation call only (the replica is built
once, outside the timer); best of 3. The last line printed is a JSON object, also written to
benchmarks/results/serve_speed.json.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from distscope.serve.requests import Arrival, LengthDist, Workload
from distscope.serve.scenario import build_serving
from distscope.serve.simulate import simulate

N = 10_000
CASES = {
    "vllm_poisson_fixed": ("vllm", None, Workload(arrival=Arrival.POISSON, requests=N, input_len=1024, output_len=256, rate_per_s=25.0)),
    "vllm_poisson_exponential": ("vllm", None, Workload(arrival=Arrival.POISSON, requests=N, input_len=1024, output_len=256,
                                                        rate_per_s=25.0, lengths=LengthDist.EXPONENTIAL, max_total=8192)),
    "trtllm_concurrency64": ("trtllm", None, Workload(arrival=Arrival.CONCURRENCY, requests=N, input_len=1024, output_len=256,
                                                     concurrency=64)),
    "chunked_poisson": ("vllm", "chunked", Workload(arrival=Arrival.POISSON, requests=N, input_len=1024, output_len=256, rate_per_s=25.0)),
}

results: dict[str, dict[str, float]] = {}
for name, (stack, sched, w) in CASES.items():
    sv = build_serving(model="llama3-8b", cluster="dgx-h100", gpus=1, tp=1, pp=1, ep=1, weights="bf16", act="auto",
                       kv="bf16", stack=stack, scheduler=sched)
    best = float("inf")
    res = None
    for _ in range(3):
        t = time.perf_counter()
        res = simulate(sv.replica, w, policy=sv.policy)
        best = min(best, time.perf_counter() - t)
    assert res is not None
    results[name] = {"wall_s": round(best, 3), "simulated_requests_per_s": round(N / best), "events": res.events,
                     "simulated_duration_s": round(res.metrics["duration_s"], 1),
                     "p50_tpot_ms": round(res.metrics["tpot_s_p50"] * 1e3, 2)}
    print(name, results[name])
out = {"requests": N, "target_s": 2.0, "cases": results, "max_wall_s": max(r["wall_s"] for r in results.values())}
root = Path(__file__).resolve().parents[1]
(root / "benchmarks/results").mkdir(exist_ok=True)
(root / "benchmarks/results/serve_speed.json").write_text(json.dumps(out, indent=1) + "\n")
print(json.dumps(out))
