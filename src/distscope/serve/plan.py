"""`serve plan`: the serving layout that maximises goodput (or throughput) on a GPU budget.

Space: tp (divisors of the heads within a node), pp, ep (MoE, inside tp), precision recipes the device
runs (bf16; fp8 or W8A16; W4A16 int4; fp4 where there are FP4 tensor cores; the KV cache in fp8 with the
8- and 4-bit recipes), the batch limit, the scheduler's chunk size, replicas = gpus / (tp·pp), and
disaggregated prefill/decode pools (DistServe/Splitwise) that split the replicas P:D.
Search: every candidate gets the closed-form estimate (estimate.py) at the offered rate; the best
`simulate_top` by that estimate (plus the disaggregated splits of the best layouts) are simulated with
a Poisson load, and ranked by goodput under the SLO (requests/s meeting it, to 1%), then by the share of requests meeting
it, then by headroom (closed-form capacity), then by median latency.
A plan *meets* the SLO when at least `attainment` of its requests do (DistServe's 90%).
The winner is explained against the runner-up: the fields that differ and the metrics they move.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

from distscope.dtypes import DType
from distscope.errors import DistscopeError
from distscope.serve.estimate import ServeEstimate, estimate
from distscope.serve.layout import Layout
from distscope.serve.metrics import Slo
from distscope.serve.precision import ServePrecision
from distscope.serve.replica import Replica, build_replica
from distscope.serve.requests import Arrival, LengthDist, Workload
from distscope.serve.simulate import simulate
from distscope.serve.stack import Stack
from distscope.system.topology import Cluster
from distscope.workload.spec import ModelSpec


@dataclasses.dataclass(frozen=True, kw_only=True)
class Candidate:
    layout: Layout
    prec: ServePrecision
    max_batch: int
    chunk: int
    replicas: int
    prefill_replicas: int = 0  # > 0: disaggregated, the other replicas decode
    estimate: ServeEstimate | None = None
    capacity_req_s: float = 0.0  # closed-form throughput at the batch limit (all replicas)
    sim: dict[str, float] | None = None

    def label(self) -> str:
        pools = f" disagg {self.prefill_replicas}P:{self.replicas - self.prefill_replicas}D" if self.prefill_replicas else ""
        return (f"{self.layout.label()} ×{self.replicas}{pools} {self.prec.label()} max_batch={self.max_batch} "
                f"chunk={self.chunk}")

    def fields(self) -> dict[str, str]:
        return {"tp": str(self.layout.tp), "pp": str(self.layout.pp), "ep": str(self.layout.ep),
                "replicas": str(self.replicas), "weights": self.prec.weights.value, "act": self.prec.activations.value,
                "kv": self.prec.kv.value, "max_batch": str(self.max_batch), "chunk": str(self.chunk),
                "disaggregated": f"{self.prefill_replicas}P:{self.replicas - self.prefill_replicas}D" if self.prefill_replicas else "no"}


def precisions(device_peaks: dict[DType, float], allowed: tuple[str, ...] | None) -> list[ServePrecision]:
    def has(d: DType) -> bool:
        return device_peaks.get(d, 0.0) > 0

    out = [("bf16", ServePrecision())]
    if has(DType.FP8):
        out.append(("fp8", ServePrecision(weights=DType.FP8, activations=DType.FP8, kv=DType.FP8)))
    else:
        out.append(("fp8", ServePrecision(weights=DType.FP8, activations=DType.BF16, kv=DType.FP8)))
    out.append(("int4", ServePrecision(weights=DType.INT4, activations=DType.BF16, kv=DType.FP8)))
    if has(DType.FP4):
        out.append(("fp4", ServePrecision(weights=DType.FP4, activations=DType.FP4, kv=DType.FP8)))
    if allowed is not None:
        bad = [a for a in allowed if a not in {n for n, _ in out}]
        if bad:
            raise DistscopeError(f"--precisions: {', '.join(bad)} not available here; choose from {', '.join(n for n, _ in out)}")
        out = [(n, p) for n, p in out if n in allowed]
    return [p for _, p in out]


def layouts(spec: ModelSpec, gpus: int, node: int) -> list[Layout]:
    res = []
    for tp in (1, 2, 4, 8, 16):
        if tp > min(gpus, node) or spec.heads % tp or (spec.kv_heads % tp and tp % spec.kv_heads):
            continue
        for pp in (1, 2, 4, 8):
            if tp * pp > gpus or pp > spec.layers:
                continue
            eps = [1] if spec.moe is None else [e for e in (1, 2, 4, 8, 16) if e <= tp and tp % e == 0 and spec.moe.experts % e == 0]
            res += [Layout(tp=tp, pp=pp, ep=e) for e in eps]
    return res


def _score(c: Candidate, slo: Slo | None, attainment: float) -> tuple[float, ...]:
    if c.sim is not None:
        m = c.sim
        meets = slo is None or m.get("slo_attainment", 1.0) >= attainment
        good = m.get("goodput_req_s", m["throughput_req_s"])
        # goodput to 1% (simulation noise), then headroom, then latency
        return (float(meets), round(good / max(m["throughput_req_s"], 1e-12), 2) * m["throughput_req_s"],
                m.get("slo_attainment", 1.0), c.capacity_req_s, -m["latency_s_p50"])
    e = c.estimate
    assert e is not None
    ok = slo is None or (e.ttft_s <= slo.ttft_s and e.tpot_s <= slo.tpot_s)
    # at a rate every unsaturated plan carries it: prefer headroom (capacity), then latency
    return (float(ok and not e.saturated), c.capacity_req_s, -e.tpot_s)


def search(*, spec: ModelSpec, cluster: Cluster, gpus: int, stack: Stack, input_len: int, output_len: int,
           rate_per_s: float | None, slo: Slo | None, attainment: float = 0.9, requests: int = 1500,
           allowed_precisions: tuple[str, ...] | None = None, batches: tuple[int, ...] = (64, 128, 256, 512),
           chunks: tuple[int, ...] = (), disaggregate: bool = True, simulate_top: int = 8,
           context: int | None = None, progress: Callable[[int], None] | None = None) -> list[Candidate]:
    """Ranked candidates, best first (simulated ones ahead of the merely estimated)."""
    if not 1 <= gpus <= 65_536:
        raise DistscopeError(f"--gpus={gpus} must be in 1..65,536")
    if not 1 <= requests <= 20_000:
        raise DistscopeError(f"--requests={requests} must be in 1..20,000 per simulated plan")
    if simulate_top < 1:
        raise DistscopeError(f"--simulate-top={simulate_top} must be >= 1")
    if rate_per_s is not None and not rate_per_s > 0:
        raise DistscopeError(f"--rate={rate_per_s} must be > 0")
    if not batches or min(batches) < 1 or (chunks and min(chunks) < 1):
        raise DistscopeError(f"--batches={list(batches)} and --chunks={list(chunks)} must be integers >= 1")
    peaks = dict(cluster.device.peak_flops)
    chunk_opts = chunks or (stack.max_batched_tokens,)
    reps: dict[tuple[Layout, ServePrecision, int, int], Replica] = {}
    cands: list[Candidate] = []
    for layout in layouts(spec, gpus, cluster.gpus_per_node):
        replicas = gpus // layout.gpus
        for prec in precisions(peaks, allowed_precisions):
            for mb in batches:
                for ch in chunk_opts:
                    if ch < mb:
                        continue  # a chunk below the batch limit cannot give every sequence its token
                    st = dataclasses.replace(stack, max_num_seqs=mb, max_batched_tokens=ch)
                    try:
                        rep = build_replica(spec=spec, cluster=cluster.with_gpus(max(cluster.num_gpus, layout.gpus)),
                                            layout=layout, prec=prec, stack=st, context=context)
                        cap = estimate(rep, input_len=input_len, output_len=output_len, concurrency=mb * replicas,
                                       replicas=replicas)
                        est = cap if not rate_per_s else estimate(rep, input_len=input_len, output_len=output_len,
                                                                  rate_per_s=rate_per_s, replicas=replicas)
                    except DistscopeError:
                        continue  # does not fit: weights, or a request in the KV cache
                    if cap.max_batch < mb and mb != batches[0]:
                        continue  # the KV cache caps the batch below this limit: same plan as a smaller one
                    reps[(layout, prec, mb, ch)] = rep
                    cands.append(Candidate(layout=layout, prec=prec, max_batch=mb, chunk=ch, replicas=replicas, estimate=est,
                                           capacity_req_s=cap.throughput_req_s))
    if not cands:
        raise DistscopeError(f"no layout of model {spec.name} fits on {gpus} × {cluster.device.name} with "
                             f"input_len={input_len}, output_len={output_len} (every candidate runs out of memory)")
    cands.sort(key=lambda c: _score(c, slo, attainment), reverse=True)
    # simulate a diverse top: the best candidate of each (layout, precision) first, then the rest
    seen: set[tuple[Layout, ServePrecision]] = set()
    firsts = [c for c in cands if (c.layout, c.prec) not in seen and not seen.add((c.layout, c.prec))]  # type: ignore[func-returns-value]
    top = (firsts + [c for c in cands if c not in firsts])[:simulate_top]
    if disaggregate:
        for c in top[: max(2, simulate_top // 4)]:
            for p in range(1, c.replicas):
                top.append(dataclasses.replace(c, prefill_replicas=p))
    rate = rate_per_s
    simulated: list[Candidate] = []
    for done, c in enumerate(top, 1):
        rep = reps[(c.layout, c.prec, c.max_batch, c.chunk)]
        assert c.estimate is not None
        r = rate if rate else max(c.estimate.throughput_req_s, 1e-3)
        w = Workload(arrival=Arrival.POISSON, requests=requests, input_len=input_len, output_len=output_len,
                     rate_per_s=r, lengths=LengthDist.FIXED)
        if c.prefill_replicas:
            res = simulate(rep, w, replicas=c.prefill_replicas, decode_replicas=c.replicas - c.prefill_replicas,
                           slo=slo or Slo())
        else:
            res = simulate(rep, w, replicas=c.replicas, slo=slo or Slo())
        simulated.append(dataclasses.replace(c, sim=res.metrics))
        if progress:
            progress(done)
    simulated.sort(key=lambda c: _score(c, slo, attainment), reverse=True)
    rest = [c for c in cands if all(c is not t for t in top)]
    return simulated + rest


def explain(best: Candidate, other: Candidate) -> str:
    """'tp=4 instead of 2, replicas=2 instead of 4: goodput +1.20 req/s, p50 ttft −0.031 s, p50 tpot +2.1 ms'."""
    fb, fo = best.fields(), other.fields()
    diffs = [f"{k}={fb[k]} instead of {fo[k]}" for k in fb if fb[k] != fo[k]] or ["same fields"]
    if best.sim is None or other.sim is None:
        return ", ".join(diffs)
    a, b = best.sim, other.sim
    parts = []
    for key, name, scale, unit in (("goodput_req_s", "goodput", 1.0, " req/s"), ("throughput_out_tok_s", "throughput", 1.0, " tok/s"),
                                   ("ttft_s_p50", "p50 ttft", 1.0, " s"), ("tpot_s_p50", "p50 tpot", 1e3, " ms")):
        if key in a and key in b:
            d = (a[key] - b[key]) * scale
            if abs(d) > 1e-9 and math.isfinite(d):
                parts.append(f"{name} {'+' if d > 0 else '−'}{abs(d):.3g}{unit}")
    return f"{', '.join(diffs)}: {', '.join(parts)}"


def no_plan_message(ranked: list[Candidate], slo: Slo, attainment: float) -> str | None:
    best = ranked[0]
    if best.sim is None or best.sim.get("slo_attainment", 1.0) >= attainment:
        return None
    m = best.sim
    return (f"no plan meets {slo.label()} for {attainment:.0%} of requests; best is {best.label()} with p50 ttft "
            f"{m['ttft_s_p50']:.3g} s, p50 tpot {m['tpot_s_p50'] * 1e3:.3g} ms ({m['slo_attainment']:.0%} of requests meet it)")


def candidate_json(c: Candidate) -> dict[str, Any]:
    d: dict[str, Any] = {"label": c.label(), **c.fields()}
    if c.estimate is not None:
        d["estimate"] = {k: v for k, v in c.estimate.to_dict().items() if isinstance(v, (int, float, bool))}
    if c.sim is not None:
        d["simulated"] = c.sim
    return d
