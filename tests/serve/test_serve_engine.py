"""The serving simulator against closed forms: one request, a static batch, the fast-forwarded decode
runs, KV limits (preemption vs reservation), closed loops, routers and disaggregated pools."""

import dataclasses

import numpy as np
import pytest

from distscope.serve.engine import Ledger, ReplicaSim
from distscope.serve.estimate import estimate
from distscope.serve.requests import Arrival, LengthDist, Workload, lengths, read_trace
from distscope.serve.scenario import build_serving
from distscope.serve.simulate import Router, simulate
from distscope.serve.stack import Policy
from distscope.sim.loop import EventLoop


def serving(stack: str = "vllm", **kw):  # type: ignore[no-untyped-def]
    base = dict(model="llama3-8b", cluster="dgx-h100", gpus=None, tp=1, pp=1, ep=1, weights="bf16", act="auto", kv="bf16",
                stack=stack)
    base.update(kw)
    return build_serving(**base)


def test_one_request_is_one_prefill_then_decode_steps() -> None:
    sv = serving("trtllm")
    rep = sv.replica
    res = simulate(rep, Workload(arrival=Arrival.BURST, requests=1, input_len=1000, output_len=101))
    pre = rep.iteration_s(1000, 1, 0.0, 1000 * 1000 / 2, 1)
    assert res.first[0] == pytest.approx(pre, rel=1e-9)
    steps = sum(rep.iteration_s(1, 1, 1000 + j, 0.0, 1) for j in range(1, 101))
    assert res.finish[0] - res.first[0] == pytest.approx(steps, rel=1e-9)  # closed-form run == step by step


def test_static_batch_matches_the_estimate() -> None:
    sv = serving("trtllm-0.6", weights="fp8", kv="fp8", max_batch=64)
    res = simulate(sv.replica, Workload(arrival=Arrival.BURST, requests=64, input_len=128, output_len=128), policy=Policy.STATIC)
    est = estimate(sv.replica, input_len=128, output_len=128, batch=64)
    assert res.metrics["throughput_out_tok_s"] == pytest.approx(est.throughput_out_tok_s, rel=0.02)
    assert np.all(res.first == res.first[0]) and np.all(res.finish == res.finish[0])


def test_vllm_preempts_when_the_cache_is_full_trtllm_reserves() -> None:
    w = Workload(arrival=Arrival.BURST, requests=200, input_len=2000, output_len=2000)
    small = dict(model="llama3-70b", tp=2, weights="fp8", kv="bf16")
    vl = simulate(serving("vllm-0.5", **small).replica, w)
    tr = simulate(serving("trtllm", **small).replica, w)
    assert vl.preemptions > 0 and tr.preemptions == 0
    for r in (vl, tr):
        assert np.all(np.isfinite(r.finish)) and np.all(r.finish >= r.first) and np.all(r.first >= r.arrival)


def test_fixed_concurrency_never_exceeds_the_clients() -> None:
    sv = serving("trtllm")
    res = simulate(sv.replica, Workload(arrival=Arrival.CONCURRENCY, requests=300, input_len=500, output_len=200, concurrency=16))
    events = sorted([(a, 1) for a in res.arrival] + [(f, -1) for f in res.finish], key=lambda e: (e[0], e[1]))
    inflight = np.cumsum([d for _, d in events])
    assert inflight.max() == 16


def test_deterministic_and_seeded() -> None:
    sv = serving()
    w = Workload(arrival=Arrival.POISSON, requests=500, input_len=300, output_len=100, rate_per_s=10, lengths=LengthDist.EXPONENTIAL)
    a, b = simulate(sv.replica, w), simulate(sv.replica, w)
    assert a.metrics == b.metrics
    c = simulate(sv.replica, dataclasses.replace(w, seed=1))
    assert c.metrics != a.metrics
    ins, outs = lengths(w)
    assert abs(ins.mean() - 300) < 1 and abs(outs.mean() - 100) < 1


def test_low_load_ttft_is_the_prefill_and_high_load_queues() -> None:
    sv = serving("vllm-0.5")
    low = simulate(sv.replica, Workload(arrival=Arrival.POISSON, requests=300, input_len=500, output_len=50, rate_per_s=0.5))
    pre = sv.replica.iteration_s(500, 1, 0.0, 500 * 500 / 2, 1)
    assert low.metrics["ttft_s_p50"] == pytest.approx(pre, rel=0.05)
    high = simulate(sv.replica, Workload(arrival=Arrival.POISSON, requests=3000, input_len=500, output_len=50, rate_per_s=400))
    assert high.metrics["ttft_s_p50"] > 20 * pre


def test_scheduler_policies_trade_ttft_for_tpot() -> None:
    w = Workload(arrival=Arrival.POISSON, requests=2000, input_len=2000, output_len=200, rate_per_s=12)
    base = dict(model="llama3-8b", weights="fp8", kv="fp8")
    vllm = simulate(serving("vllm-0.5", **base).replica, w).metrics
    chunked = simulate(serving("vllm-chunked", **base).replica, w).metrics
    # prefill-first stalls running decodes; Sarathi's chunks keep the decode cadence
    assert chunked["tpot_s_p99"] < vllm["tpot_s_p99"]


def test_replicas_and_router() -> None:
    sv = serving(gpus=4)
    w = Workload(arrival=Arrival.POISSON, requests=2000, input_len=800, output_len=200, rate_per_s=60,
                 lengths=LengthDist.EXPONENTIAL)
    one = simulate(sv.replica, w, replicas=1).metrics
    four = simulate(sv.replica, w, replicas=4).metrics
    assert four["ttft_s_p90"] < one["ttft_s_p90"] and four["throughput_out_tok_s"] > one["throughput_out_tok_s"]
    # One draw's p99 moves a few percent with any change to the step model (seeds 0-5: least-loaded over
    # round-robin 0.99-1.06), so the tail is compared over three draws. Least-loaded counts outstanding
    # requests, mostly long decodes, and can send consecutive arrivals to one replica: its median TTFT
    # runs 8-16% above round-robin's here, its tail not more than 5% above.
    ratios = []
    for seed in range(3):
        ws = dataclasses.replace(w, seed=seed)
        rr = simulate(sv.replica, ws, replicas=4).metrics
        ll = simulate(sv.replica, ws, replicas=4, router=Router.LEAST_LOADED).metrics
        ratios.append(ll["ttft_s_p99"] / rr["ttft_s_p99"])
    assert sum(ratios) / len(ratios) <= 1.05


def test_disaggregated_pools_hold_tpot_under_long_prompts() -> None:
    sv = serving("vllm-0.5", gpus=4, weights="fp8", kv="fp8")
    w = Workload(arrival=Arrival.POISSON, requests=1500, input_len=4000, output_len=200, rate_per_s=8)
    colo = simulate(sv.replica, w, replicas=4).metrics
    disagg = simulate(sv.replica, w, replicas=2, decode_replicas=2).metrics
    assert disagg["tpot_s_p90"] < colo["tpot_s_p90"]
    assert disagg["requests"] == 1500


def test_cut_on_arrival_lands_on_a_step_boundary() -> None:
    sv = serving("trtllm")
    rep = sv.replica
    led = Ledger(np.array([100, 100]), np.array([1000, 10]))
    loop = EventLoop()
    sim = ReplicaSim(loop, rep, led, lambda _r: None)
    for i, t in enumerate((0.0, 1.0)):
        def arrive(i: int = i) -> None:
            led.arrival[i] = loop.now
            sim.submit(i)
        loop.at(t, arrive)
    loop.run()
    # request 1 arrived mid-run; its prefill started at the end of the decode step running at t = 1.0
    assert 1.0 <= led.first[1] - rep.iteration_s(101, 2, 200, 100 * 100 / 2, 2) < 1.0 + 0.02
    assert led.finish[0] > led.finish[1]


def test_the_iteration_ending_a_long_idle_spell_pays_the_wake_cost() -> None:
    """replica.Wake: request 0 arrives after 2 s idle (>= after_s) and pays; request 1 arrives while request 0
    decodes (no idle spell) and does not; request 2 arrives 0.1 s after the replica went idle (< after_s)."""
    from distscope.serve.replica import Wake

    rep = dataclasses.replace(serving("trtllm").replica, wake=Wake(after_s=0.5, cost_s=0.25))
    pre = rep.iteration_s(100, 1, 0.0, 100 * 100 / 2, 1)

    def run(times, outs):  # type: ignore[no-untyped-def]
        led = Ledger(np.full(len(times), 100), np.array(outs))
        loop = EventLoop()
        sim = ReplicaSim(loop, rep, led, lambda _r: None)
        for i, t in enumerate(times):
            def arrive(i: int = i) -> None:
                led.arrival[i] = loop.now
                sim.submit(i)
            loop.at(t, arrive)
        loop.run()
        return led

    led = run((2.0,), (2,))
    assert led.first[0] - 2.0 == pytest.approx(pre + 0.25)
    led = run((2.0, 2.0 + pre + 0.25 + 1e-6), (50, 2))
    assert led.first[0] - led.arrival[0] == pytest.approx(pre + 0.25)
    assert led.first[1] - led.arrival[1] < pre + 0.1  # queued behind a decode step, no wake
    idle_from = run((2.0,), (2,)).finish[0]
    led = run((2.0, idle_from + 0.1), (2, 2))
    assert led.first[1] - led.arrival[1] == pytest.approx(pre)


@pytest.mark.parametrize("text,err", [
    ("arrival_s,input_len\n0,10\n", "missing field output_len"),
    ("arrival_s,input_len,output_len\n0,ten,5\n", "input_len='ten' is not a number"),
    ("arrival_s,input_len,output_len\n0,10.5,5\n", "is not an integer"),
    ("arrival_s,input_len,output_len\n-1,10,5\n", "need arrival >= 0"),
    ('{"arrival_s": 0, "input_len": 3, "output_len": 2}\nnot json\n', "line 2: not a JSON object"),
])
def test_malformed_trace_is_one_line(tmp_path, text: str, err: str) -> None:
    from distscope.errors import DistscopeError

    p = tmp_path / "t.csv"
    p.write_text(text)
    with pytest.raises(DistscopeError, match=err):
        read_trace(str(p))


def test_trace_replay(tmp_path) -> None:
    p = tmp_path / "t.jsonl"
    p.write_text("\n".join(f'{{"arrival_s": {i * 0.5}, "input_len": {100 + i}, "output_len": {10 + i}}}' for i in range(20)))
    tr = read_trace(str(p))
    res = simulate(serving().replica, Workload(arrival=Arrival.TRACE, requests=len(tr), trace=tr))
    assert list(res.arrival) == [i * 0.5 for i in range(20)] and list(res.out) == [10 + i for i in range(20)]
