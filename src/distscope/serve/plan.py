"""`serve plan`: the serving layout that sustains the highest request rate under the SLO on a GPU budget.

Space: tp (divisors of the heads within a node), pp, ep (MoE, inside tp), precision recipes the device
runs (bf16; fp8 or W8A16; W4A16 int4; fp4 where there are FP4 tensor cores; the KV cache in fp8 with the
8- and 4-bit recipes), the batch limit, the scheduler's chunk size, replicas = gpus / (tp·pp), and
disaggregated prefill/decode pools (DistServe/Splitwise) that split the replicas P:D.
Search: every candidate gets the closed-form estimate (estimate.py) at the offered rate; the best
`simulate_top` by that estimate (plus the disaggregated splits of the best layouts) are simulated with
a Poisson load (seed 0, fixed lengths: every plan and every rate sees the same unit arrival draws).
A run *sustains* the SLO when at least `attainment` of its requests meet it (DistServe's 90%) and it keeps
up with its arrivals (`queued_share`).
With an SLO each simulated plan gets its *maximum sustainable rate* (DistServe's per-GPU goodput, here
for the whole budget): the highest Poisson rate whose run sustains the SLO, found by bracketing from the
closed-form guess and geometric bisection to RATE_RTOL (`bracket_max_rate`). Plans rank by whether they sustain
the offered rate (with --rate), then by that maximum rate. Without an SLO they rank by simulated
throughput (goodput with every request counted) at the offered rate, or at their closed-form capacity.
Plans whose ranking metric lies within the tolerance of the best (TIE_RTOL for max rates, the search's
resolution; GOODPUT_TIE_RTOL for goodputs, the simulation's noise) are a *tie*: among them the order is
by SLO attainment of the shown run, then median latency (no SLO: closed-form capacity, then latency).
The winner is explained against the runner-up: the fields that differ and the metrics they move.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from distscope.dtypes import DType
from distscope.errors import DistscopeError
from distscope.report.progress import Progress
from distscope.serve.estimate import ServeEstimate, estimate
from distscope.serve.layout import Layout
from distscope.serve.metrics import Slo
from distscope.serve.precision import ServePrecision
from distscope.serve.replica import Replica, build_replica
from distscope.serve.requests import Arrival, LengthDist, Workload
from distscope.serve.simulate import SimResult, simulate
from distscope.serve.stack import Stack
from distscope.system.topology import Cluster
from distscope.workload.spec import ModelSpec

RATE_RTOL = 0.02  # the max-rate search stops once missed <= met·(1 + RATE_RTOL)
TIE_RTOL = RATE_RTOL  # max rates closer than the search resolves cannot be ordered: a tie
GOODPUT_TIE_RTOL = 0.01  # without an SLO, goodputs within 1% (the simulation's noise at ~1,500 requests) tie
KEEP_UP_QUEUED = 0.05  # a run keeps up when at most this share of requests still await a first token at the last arrival
RATE_SPAN = 1e3  # the search gives up this factor away from its first guess, either way


@dataclasses.dataclass(frozen=True, kw_only=True)
class RateBracket:
    """The maximum sustainable rate lies in [met_req_s, missed_req_s)."""

    met_req_s: float  # highest rate probed whose run sustains the SLO (0: none down to guess / RATE_SPAN)
    missed_req_s: float  # lowest rate probed above it whose run does not (inf: none up to guess · RATE_SPAN)
    runs: int  # simulations spent (the run at the offered rate included)


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
    sim: dict[str, float] | None = None  # the shown run: at --rate, else at the max rate (or capacity)
    meets: bool = False  # the shown run sustains the SLO (always true without one)
    max_rate: RateBracket | None = None  # with an SLO: the maximum sustainable rate

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


def _score(c: Candidate, slo: Slo | None) -> tuple[float, ...]:
    """Ranking key, higher first. Simulated: (sustains the offered load, max rate) with an SLO, goodput
    without; estimated only: whether the closed form meets the SLO unsaturated, then capacity."""
    if c.sim is not None:
        if slo is None:
            return (float(c.meets), _goodput(c))
        return (float(c.meets), c.max_rate.met_req_s if c.max_rate else 0.0)
    e = c.estimate
    assert e is not None
    ok = slo is None or (e.ttft_s <= slo.ttft_s and e.tpot_s <= slo.tpot_s)
    # at a rate every unsaturated plan carries it: prefer headroom (capacity), then latency
    return (float(ok and not e.saturated), c.capacity_req_s, -e.tpot_s)


def _goodput(c: Candidate) -> float:
    assert c.sim is not None
    return c.sim.get("goodput_req_s", c.sim["throughput_req_s"])


def _tie_break(c: Candidate) -> tuple[float, ...]:
    """Order inside a tie, higher first: SLO attainment of the shown run, then median latency (without an
    SLO every request counts: closed-form capacity, then latency)."""
    assert c.sim is not None
    return (c.sim.get("slo_attainment", 1.0), c.capacity_req_s if c.max_rate is None else 0.0, -c.sim["latency_s_p50"])


def within(a: float, b: float, rtol: float) -> bool:
    """a and b agree to a relative rtol: max ≤ min·(1 + rtol) (two values, both 0, agree)."""
    lo, hi = min(a, b), max(a, b)
    return hi <= lo * (1 + rtol)


def tie_group(ranked: list[Candidate], slo: Slo | None) -> list[Candidate]:
    """The simulated plans that tie with the first of `ranked` (sorted by _score, as search sorts): the same
    verdict on the SLO and a ranking metric (max rate with an SLO, goodput without) within TIE_RTOL /
    GOODPUT_TIE_RTOL of the best of them."""
    sims = [c for c in ranked if c.sim is not None]
    if not sims:
        return []
    rtol = TIE_RTOL if slo is not None else GOODPUT_TIE_RTOL
    peer = [c for c in sims if c.meets == sims[0].meets]
    peak = max(_score(c, slo)[1] for c in peer)
    if not peak > 0:
        return sims[:1]  # no rate meets the SLO anywhere: nothing to tie on (no_plan_message says so)
    return [c for c in peer if within(_score(c, slo)[1], peak, rtol)]


def queued_share(arrival: np.ndarray, first: np.ndarray) -> float:
    """Share of requests still waiting for their first token when the last one arrives. Below the
    capacity μ that is a queue of a few iterations' prompts; a Poisson run of N requests at r > μ ends
    with ~N·(1 − μ/r) of them waiting (the queue grows without bound), so a share above KEEP_UP_QUEUED
    means the rate is not sustained even where the SLO bounds only TPOT."""
    t_last = float(np.max(arrival))
    return float(np.count_nonzero(~(first <= t_last))) / len(arrival)


def sustains(res: SimResult, attainment: float) -> bool:
    return res.metrics.get("slo_attainment", 1.0) >= attainment and queued_share(res.arrival, res.first) <= KEEP_UP_QUEUED


def bracket_max_rate(sustained: Callable[[float], bool], *, guess: float, met: float = 0.0, missed: float = math.inf,
                     rtol: float = RATE_RTOL) -> RateBracket:
    """The highest rate r with sustained(r), to a relative rtol, from known points met < missed.

    Probe `guess` if it lies between them; while one side is open, step away from the known side by a
    factor f = 1.25, squared after each step (1.25, 1.56, 2.44, 5.96, ...: a good guess costs one step,
    a bad one O(log log) steps); then bisect geometrically, r = √(met·missed), until
    missed ≤ met·(1 + rtol): ⌈log2(ln(missed/met) / ln(1 + rtol))⌉ runs (4 from a 1.25× bracket at 2%).
    Give up at guess / RATE_SPAN (met = 0: no rate sustains) or guess · RATE_SPAN (missed = inf), each probed.
    Assumes sustained() flips once from true to false as r rises (queueing grows with the rate; the
    caller's runs share their unit arrival draws, which keeps it nearly so: where it does not, the result
    is still a rate that sustains next to one, RATE_RTOL above, that does not)."""
    if not guess > 0:
        raise DistscopeError(f"max-rate search: guess={guess} must be > 0 requests/s")
    runs, f = 0, 1.25
    floor, ceiling = guess / RATE_SPAN, guess * RATE_SPAN
    r: float | None = guess if met < guess < missed else None
    while not (met > 0 and missed <= met * (1 + rtol)):
        if r is None:
            if met > 0 and math.isfinite(missed):
                r = math.sqrt(met * missed)
            elif met > 0:
                if met >= ceiling:
                    break
                r, f = min(met * f, ceiling), f * f
            else:
                if missed <= floor:
                    break
                r, f = max(missed / f, floor), f * f
        runs += 1
        if sustained(r):
            met = r
        else:
            missed = r
        r = None
    return RateBracket(met_req_s=met, missed_req_s=missed, runs=runs)


def closed_form_max_rate(rep: Replica, *, input_len: int, output_len: int, replicas: int, slo: Slo,
                         capacity_req_s: float) -> float:
    """The highest rate whose closed-form mean TTFT and TPOT (estimate.py at rate R) meet the SLO, by
    geometric bisection on [capacity / RATE_SPAN, capacity] to 1%; the simulated search starts there."""
    def ok(r: float) -> bool:
        e = estimate(rep, input_len=input_len, output_len=output_len, rate_per_s=r, replicas=replicas)
        return not e.saturated and e.ttft_s <= slo.ttft_s and e.tpot_s <= slo.tpot_s

    hi = max(capacity_req_s, 1e-3)
    lo = hi / RATE_SPAN
    if not ok(lo):
        return lo
    while hi > lo * 1.01:
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return lo


def search(*, spec: ModelSpec, cluster: Cluster, gpus: int, stack: Stack, input_len: int, output_len: int,
           rate_per_s: float | None, slo: Slo | None, attainment: float = 0.9, requests: int = 1500,
           allowed_precisions: tuple[str, ...] | None = None, batches: tuple[int, ...] = (64, 128, 256, 512),
           chunks: tuple[int, ...] = (), disaggregate: bool = True, simulate_top: int = 8,
           context: int | None = None, progress: Progress | None = None) -> list[Candidate]:
    """Ranked candidates, best first (simulated ones ahead of the merely estimated; a tie with the best
    is `tie_group(result, slo)`). `progress(simulated, to simulate)` after each simulated plan."""
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
    cands.sort(key=lambda c: _score(c, slo), reverse=True)
    # simulate a diverse top: the best candidate of each (layout, precision) first, then the rest
    seen: set[tuple[Layout, ServePrecision]] = set()
    firsts = [c for c in cands if (c.layout, c.prec) not in seen and not seen.add((c.layout, c.prec))]  # type: ignore[func-returns-value]
    top = (firsts + [c for c in cands if c not in firsts])[:simulate_top]
    if disaggregate:
        for c in top[: max(2, simulate_top // 4)]:
            for p in range(1, c.replicas):
                top.append(dataclasses.replace(c, prefill_replicas=p))
    simulated: list[Candidate] = []
    for done, c in enumerate(top, 1):
        rep = reps[(c.layout, c.prec, c.max_batch, c.chunk)]
        assert c.estimate is not None
        runs: dict[float, SimResult] = {}

        def run(r: float, c: Candidate = c, rep: Replica = rep, runs: dict[float, SimResult] = runs) -> SimResult:
            w = Workload(arrival=Arrival.POISSON, requests=requests, input_len=input_len, output_len=output_len,
                         rate_per_s=r, lengths=LengthDist.FIXED)
            if c.prefill_replicas:
                res = simulate(rep, w, replicas=c.prefill_replicas, decode_replicas=c.replicas - c.prefill_replicas,
                               slo=slo or Slo())
            else:
                res = simulate(rep, w, replicas=c.replicas, slo=slo or Slo())
            runs[r] = res
            return res

        offered = rate_per_s or max(c.estimate.throughput_req_s, 1e-3)
        shown = run(offered)
        ok = slo is None or sustains(shown, attainment)
        bracket = None
        if slo is not None:
            guess = closed_form_max_rate(rep, input_len=input_len, output_len=output_len, replicas=c.replicas, slo=slo,
                                         capacity_req_s=c.capacity_req_s)
            b = bracket_max_rate(lambda r: sustains(run(r), attainment), guess=guess,
                                 met=offered if ok else 0.0, missed=math.inf if ok else offered)
            bracket = dataclasses.replace(b, runs=len(runs))
            if rate_per_s is None and b.met_req_s > 0:  # no offered rate: show the plan at its max rate
                shown, ok = runs[b.met_req_s], True
        sim = {**shown.metrics, "queued_at_last_arrival": queued_share(shown.arrival, shown.first)}
        simulated.append(dataclasses.replace(c, sim=sim, meets=ok, max_rate=bracket))
        if progress:
            progress(done, len(top))
    simulated.sort(key=lambda c: _score(c, slo), reverse=True)
    tied = tie_group(simulated, slo)
    tied.sort(key=_tie_break, reverse=True)
    rest = [c for c in cands if all(c is not t for t in top)]
    return tied + [c for c in simulated if all(c is not t for t in tied)] + rest


def explain(best: Candidate, other: Candidate) -> str:
    """'tp=4 instead of 2, replicas=2 instead of 4: max rate +1.2 req/s, goodput +1.20 req/s, p50 ttft −0.031 s, ...'."""
    fb, fo = best.fields(), other.fields()
    diffs = [f"{k}={fb[k]} instead of {fo[k]}" for k in fb if fb[k] != fo[k]] or ["same fields"]
    if best.sim is None or other.sim is None:
        return ", ".join(diffs)
    a, b = dict(best.sim), dict(other.sim)
    if best.max_rate is not None and other.max_rate is not None:
        a["max_rate_req_s"], b["max_rate_req_s"] = best.max_rate.met_req_s, other.max_rate.met_req_s
    parts = []
    for key, name, scale, unit in (("max_rate_req_s", "max rate", 1.0, " req/s"), ("goodput_req_s", "goodput", 1.0, " req/s"),
                                   ("throughput_out_tok_s", "throughput", 1.0, " tok/s"),
                                   ("ttft_s_p50", "p50 ttft", 1.0, " s"), ("tpot_s_p50", "p50 tpot", 1e3, " ms")):
        if key in a and key in b:
            d = (a[key] - b[key]) * scale
            if abs(d) > 1e-9 and math.isfinite(d):
                parts.append(f"{name} {'+' if d > 0 else '−'}{abs(d):.3g}{unit}")
    return f"{', '.join(diffs)}: {', '.join(parts)}"


def tie_message(tied: list[Candidate], slo: Slo | None, rate_per_s: float | None) -> str | None:
    """One line when the best plan ties with others, else None."""
    if len(tied) < 2:
        return None
    if slo is not None:
        vals = [c.max_rate.met_req_s for c in tied if c.max_rate is not None]
        what, rtol, order = "max rates", TIE_RTOL, "SLO attainment" + (f" at {rate_per_s:g} req/s" if rate_per_s else "")
        why = "the rate search resolves"
    else:
        vals = [_goodput(c) for c in tied]
        what, rtol, order = "goodputs", GOODPUT_TIE_RTOL, "closed-form capacity"
        why = "the simulation resolves"
    return (f"tie: {len(tied)} plans have {what} within {rtol:.0%} of each other ({min(vals):.3g}–{max(vals):.3g} req/s), "
            f"closer than {why}; among them the order is by {order}, then p50 latency: "
            + "; ".join(c.label() for c in tied))


def short_run_note(best: Candidate, slo: Slo | None, requests: int) -> str | None:
    """A note when the best plan's max rate rests on too short a run. At rate r the N requests arrive over
    N/r seconds; an overload of RATE_RTOL builds a queue of ~RATE_RTOL·N/r seconds by the end, which the
    TTFT SLO only sees once it exceeds the SLO: N/r ≥ ttft / RATE_RTOL is needed to resolve the rate to
    RATE_RTOL (the keep-up check alone resolves an overload of KEEP_UP_QUEUED)."""
    if slo is None or best.max_rate is None or not best.max_rate.met_req_s > 0 or not math.isfinite(slo.ttft_s):
        return None
    span_s, need_s = requests / best.max_rate.met_req_s, slo.ttft_s / RATE_RTOL
    if span_s >= need_s:
        return None
    return (f"note: at {best.max_rate.met_req_s:.3g} req/s the {requests} requests arrive within {span_s:.3g} s, too short for "
            f"a {RATE_RTOL:.0%} overload to break the TTFT SLO ({need_s:.3g} s needed): the max rates may run high; "
            f"--requests {math.ceil(need_s * best.max_rate.met_req_s)} resolves them")


def no_plan_message(ranked: list[Candidate], slo: Slo, attainment: float) -> str | None:
    best = ranked[0]
    if best.sim is None or best.meets:
        return None
    m = best.sim
    queued = m.get("queued_at_last_arrival", 0.0)
    lag = f"; {queued:.0%} of requests still queued at the last arrival" if queued > KEEP_UP_QUEUED else ""
    return (f"no plan meets {slo.label()} for {attainment:.0%} of requests; best is {best.label()} with p50 ttft "
            f"{m['ttft_s_p50']:.3g} s, p50 tpot {m['tpot_s_p50'] * 1e3:.3g} ms ({m['slo_attainment']:.0%} of requests meet it{lag})")


def candidate_json(c: Candidate) -> dict[str, Any]:
    d: dict[str, Any] = {"label": c.label(), **c.fields()}
    if c.estimate is not None:
        d["estimate"] = {k: v for k, v in c.estimate.to_dict().items() if isinstance(v, (int, float, bool))}
    if c.sim is not None:
        d["simulated"] = c.sim
        d["meets_slo"] = c.meets
    if c.max_rate is not None:
        d["max_rate_req_s"] = c.max_rate.met_req_s
        d["max_rate_missed_req_s"] = c.max_rate.missed_req_s if math.isfinite(c.max_rate.missed_req_s) else None
        d["max_rate_runs"] = c.max_rate.runs
    return d
