"""`serve validate`: reproduce each published serving measurement and report the error per metric.

Per scenario (rows.py):
- offline_static_batch: one static batch of B requests (TensorRT-LLM gptSessionBenchmark): throughput
  = B·output / (prefill of the batch + decode), TTFT = the batch's prefill;
- single_request_latency: one request alone;
- burst / offline_max_throughput: N requests at t = 0 on the row's stack (continuous batching);
- fixed_concurrency: C closed-loop clients; the first C requests (warm-up) are left out of the
  metrics, 10·C (at least 100) requests are simulated — the steady state the client's measurement
  windows wait for;
- poisson: the row's rate and request count.
Replicas: num_gpus / (tp·pp) replicas side by side share the load round-robin.
Metrics follow the row's definitions: mean or median TTFT/TPOT; "avg ITL" is the token-weighted mean.
Rows with measured mean lengths only (ShareGPT) run every request at the mean lengths.

Cross-validation (`--cv source_id`): every fitted global parameter (calibrate.py) is refitted on the
rows of the other sources and the held-out source is predicted with those values.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from distscope.errors import DistscopeError
from distscope.serve.layout import Layout
from distscope.serve.replica import build_replica
from distscope.serve.requests import Arrival, LengthDist, Workload
from distscope.serve.rows import METRICS, Scenario, ServingRow, Stat, cluster_for_gpu
from distscope.serve.simulate import simulate
from distscope.serve.stack import Policy, for_device, stack_from_framework

FIXED_CONCURRENCY_ROUNDS = 10


@dataclasses.dataclass(frozen=True, kw_only=True)
class Prediction:
    run_id: str
    source_id: str
    predicted: dict[str, float]
    skipped: dict[str, str]
    error: str = ""


def predict_row(row: ServingRow) -> Prediction:
    todo = [k for k in row.measured if k not in row.skip]
    skipped = {k: row.skip[k] for k in row.measured if k in row.skip}
    if not todo:
        return Prediction(run_id=row.run_id, source_id=row.source_id, predicted={}, skipped=skipped)
    try:
        pred = _predict(row, todo)
    except DistscopeError as exc:
        return Prediction(run_id=row.run_id, source_id=row.source_id, predicted={}, skipped=skipped, error=str(exc))
    return Prediction(run_id=row.run_id, source_id=row.source_id, predicted={k: pred[k] for k in todo}, skipped=skipped)


def _predict(row: ServingRow, todo: Sequence[str]) -> dict[str, float]:
    stack = stack_from_framework(row.framework)
    layout = Layout(tp=row.tp, pp=row.pp, ep=row.ep)
    replicas = max(1, row.num_gpus // layout.gpus)
    cluster = cluster_for_gpu(row.gpu, max(layout.gpus, 1))
    stack = for_device(stack, cluster.device.usable_bytes, cluster.device.name)
    policy: Policy | None = None
    kv_fraction = None
    if row.scenario is Scenario.STATIC:
        # gptSessionBenchmark sizes its KV cache for exactly this batch and length: the run fitting is
        # the evidence, so the whole memory left after weights and workspace is the cache
        stack = dataclasses.replace(stack, max_num_seqs=max(int(row.load), 1))
        policy = Policy.STATIC
        kv_fraction = 1.0
    rep = build_replica(spec=row.spec, cluster=cluster, layout=layout, prec=row.prec, stack=stack, kv_fraction=kv_fraction)
    inp = max(1, round(row.input_len or 1))
    out = max(1, round(row.output_len or 1))
    # ShareGPT-driven rows give mean lengths only; every request gets the means (the distribution, and
    # so the longest request that sets a burst's duration, is not published)
    lens = LengthDist.FIXED
    warm = 0
    if row.scenario in (Scenario.STATIC, Scenario.SINGLE):
        n = 1 if row.scenario is Scenario.SINGLE else int(row.load)
        w = Workload(arrival=Arrival.BURST, requests=n, input_len=inp, output_len=out)
        replicas = 1  # the batch ran on one replica; the total is scaled below
    elif row.scenario in (Scenario.BURST, Scenario.OFFLINE):
        w = Workload(arrival=Arrival.BURST, requests=row.requests or int(row.load), input_len=inp, output_len=out,
                     lengths=lens, max_total=2048 if lens is LengthDist.EXPONENTIAL else 0)
    elif row.scenario is Scenario.CONCURRENCY:
        c = int(row.load) * replicas
        w = Workload(arrival=Arrival.CONCURRENCY, requests=max(FIXED_CONCURRENCY_ROUNDS * c, 100), input_len=inp,
                     output_len=out, concurrency=c, lengths=lens)
        warm = c
    else:
        w = Workload(arrival=Arrival.POISSON, requests=row.requests or 1000, input_len=inp, output_len=out,
                     rate_per_s=row.load, lengths=lens)
    res = simulate(rep, w, replicas=replicas, policy=policy)
    m = _metrics(res.arrival, res.first, res.finish, res.out, warm)
    scale = max(1, row.num_gpus // layout.gpus) if row.scenario in (Scenario.STATIC, Scenario.SINGLE) else 1
    stat = "p50" if row.stat is Stat.MEDIAN else "mean"
    return {
        "throughput_out_tok_s": m["throughput"] * scale,
        "ttft_s": m[f"ttft_{stat}"],
        "tpot_s": m["itl_mean"] if (row.tpot_is_itl and row.stat is Stat.MEAN) else m[f"tpot_{stat}"],
    }


def _metrics(arrival: np.ndarray, first: np.ndarray, finish: np.ndarray, out: np.ndarray, warm: int) -> dict[str, float]:
    order = np.argsort(arrival, kind="stable")[warm:]
    a, f, e, o = arrival[order], first[order], finish[order], out[order].astype(float)
    ttft = f - a
    multi = o > 1
    tpot = (e[multi] - f[multi]) / (o[multi] - 1) if multi.any() else np.zeros(1)
    span = float(e.max() - (a.min() if warm == 0 else f.min()))
    if warm:  # steady state: output tokens produced per second over the measured requests' span
        span = float(e.max() - a.min())
    return {
        "throughput": float(o.sum() / span) if span > 0 else math.inf,
        "ttft_mean": float(ttft.mean()), "ttft_p50": float(np.median(ttft)),
        "tpot_mean": float(tpot.mean()), "tpot_p50": float(np.median(tpot)),
        "itl_mean": float((e[multi] - f[multi]).sum() / (o[multi] - 1).sum()) if multi.any() else 0.0,
    }


def error_pct(pred: float, meas: float) -> float:
    return 100.0 * (pred - meas) / meas


def report(rows: Sequence[ServingRow | DistscopeError], predict: Callable[[ServingRow], Prediction] = predict_row
           ) -> dict[str, Any]:
    """rows[run_id, metric, predicted, measured, error_pct], skipped rows with reasons, MAPE per metric."""
    out_rows: list[dict[str, Any]] = []
    skipped: list[dict[str, str]] = []
    failed: list[str] = []
    for r in rows:
        if isinstance(r, DistscopeError):
            failed.append(str(r))
            continue
        p = predict(r)
        if p.error:
            failed.append(f"run {r.run_id}: {p.error}")
        for k, why in p.skipped.items():
            skipped.append({"run_id": r.run_id, "metric": k, "reason": why})
        for k, v in p.predicted.items():
            out_rows.append({"run_id": r.run_id, "source_id": r.source_id, "metric": k, "predicted": v,
                             "measured": r.measured[k], "error_pct": error_pct(v, r.measured[k])})
    return {"rows": out_rows, "skipped": skipped, "failed": failed, **mape(out_rows)}


def mape(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    per: dict[str, list[float]] = defaultdict(list)
    by_src: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        per[r["metric"]].append(abs(r["error_pct"]))
        by_src[r["metric"]][r["source_id"]].append(abs(r["error_pct"]))
    return {
        "mape_pct": {k: float(np.mean(per[k])) for k in METRICS if per.get(k)},
        "max_ape_pct": {k: float(np.max(per[k])) for k in METRICS if per.get(k)},
        "n": {k: len(per[k]) for k in METRICS if per.get(k)},
        "mape_pct_by_source": {k: {s: float(np.mean(v)) for s, v in by_src[k].items()} for k in METRICS if by_src.get(k)},
    }
