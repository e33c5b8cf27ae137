"""`serve plan` ranks by the maximum sustainable rate under the SLO (a bracketing/bisection search over
the rate with the simulator), calls plans a tie within the search's resolution, and `serve simulate`
never drops --gpus, --replicas or --disagg silently."""

import dataclasses
import json
import math

import numpy as np
import pytest

from distscope.cli import main
from distscope.serve.layout import Layout
from distscope.serve.metrics import Slo
from distscope.serve.plan import (
    RATE_RTOL,
    Candidate,
    RateBracket,
    bracket_max_rate,
    queued_share,
    tie_group,
    within,
)
from distscope.serve.precision import ServePrecision


def run(capsys, *args: str) -> tuple[int, str, str]:  # type: ignore[no-untyped-def]
    code = 0
    try:
        main(["serve", *args])
    except SystemExit as e:
        code = int(e.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("guess", [0.05, 3.0, 7.0, 7.4, 40.0, 900.0])
def test_bracket_finds_the_threshold_to_its_tolerance(guess: float) -> None:
    limit = 7.3
    probes: list[float] = []

    def sustained(r: float) -> bool:
        probes.append(r)
        return r <= limit

    b = bracket_max_rate(sustained, guess=guess)
    assert b.met_req_s <= limit < b.missed_req_s <= b.met_req_s * (1 + RATE_RTOL)
    assert b.runs == len(probes) == len(set(probes))
    # steps away from the guess grow as 1.25^(2^k), then bisection: a few dozen runs at most, 100x off
    assert b.runs <= 14


def test_bracket_starts_from_known_points_and_gives_up_far_away() -> None:
    probes: list[float] = []
    b = bracket_max_rate(lambda r: probes.append(r) or r <= 10.0, guess=30.0, met=4.0)  # type: ignore[func-returns-value]
    assert 10.0 < b.missed_req_s <= b.met_req_s * (1 + RATE_RTOL) and min(probes) > 4.0
    never = bracket_max_rate(lambda r: False, guess=5.0)
    assert never.met_req_s == 0.0 and never.missed_req_s >= 5.0 / 1e3
    always = bracket_max_rate(lambda r: True, guess=5.0)
    assert always.missed_req_s == math.inf and always.met_req_s <= 5.0 * 1e3


def test_queued_share_sees_a_growing_queue() -> None:
    arrival = np.arange(100.0)
    assert queued_share(arrival, arrival + 0.5) == pytest.approx(0.01)  # only the last one, still in prefill
    assert queued_share(arrival, 2 * arrival + 0.5) == pytest.approx(0.5)  # served at half the arrival rate


def _cand(rate: float, attained: float = 1.0, tp: int = 1) -> Candidate:
    sim = {"throughput_req_s": 4.0, "goodput_req_s": 4.0, "slo_attainment": attained, "latency_s_p50": 1.0}
    return Candidate(layout=Layout(tp=tp, pp=1, ep=1), prec=ServePrecision(), max_batch=64, chunk=2048, replicas=1,
                     sim=sim, meets=True, max_rate=RateBracket(met_req_s=rate, missed_req_s=rate * 1.01, runs=8))


def test_tie_within_the_search_resolution() -> None:
    a, b, c = _cand(20.0), _cand(20.0 * (1 + RATE_RTOL / 2), tp=2), _cand(18.0, tp=4)
    assert within(20.0, 20.3, RATE_RTOL) and not within(18.0, 20.0, RATE_RTOL)
    group = tie_group([b, a, c], Slo(ttft_s=1.0))
    assert group == [b, a]
    assert tie_group([a, c], Slo(ttft_s=1.0)) == [a]  # a clear winner
    unmet = dataclasses.replace(b, meets=False, max_rate=RateBracket(met_req_s=19.9, missed_req_s=20.1, runs=8))
    assert tie_group([a, unmet], Slo(ttft_s=1.0)) == [a]  # same rate, but it misses the offered load


PLAN = ["plan", "--model", "llama3-8b", "--gpus", "2", "--rate", "4", "--input-len", "1000", "--output-len", "200",
        "--requests", "600", "--simulate-top", "2", "--batches", "64,128", "--json"]


def test_plan_ranks_by_max_sustainable_rate(capsys) -> None:
    code, out, err = run(capsys, *PLAN, "--slo", "ttft=1,tpot=20ms")
    assert code == 0, err
    d = json.loads(out)
    sims = [p for p in d["plans"] if "simulated" in p]
    assert len(sims) >= 2 and d["ranked_by"] == "max_rate_req_s"
    for p in sims:
        assert 0 < p["max_rate_req_s"] < p["max_rate_missed_req_s"] <= p["max_rate_req_s"] * (1 + RATE_RTOL)
        assert p["meets_slo"] and p["max_rate_runs"] >= 2
    rates = [p["max_rate_req_s"] for p in sims]
    tied = set(d["tie"]) | {d["best"]["label"]}
    # descending, except inside the tie at the top (ordered by attainment, then latency)
    rest = [p["max_rate_req_s"] for p in sims if p["label"] not in tied]
    assert rest == sorted(rest, reverse=True)
    assert all(d["best"]["max_rate_req_s"] >= r / (1 + RATE_RTOL) for r in rates)
    assert "max rate" in d["why"]


def test_plan_calls_a_tie(capsys) -> None:
    # no SLO, 4 req/s offered: every plan carries it, goodputs agree to 1%
    args = [a for a in PLAN if a != "--json"]
    code, out, err = run(capsys, *args)
    assert code == 0, err
    assert "\ntie: " in out and "goodputs within 1%" in out
    code, out, _ = run(capsys, *PLAN)
    d = json.loads(out)
    assert d["ranked_by"] == "goodput_req_s" and d["tie"] and d["tie_rtol"] == 0.01
    assert "max_rate_req_s" not in d["best"]


def test_simulate_disagg_counts_the_gpus(capsys) -> None:
    code, _, err = run(capsys, "simulate", "--model", "llama3-8b", "--rate", "5", "--gpus", "2", "--disagg", "8:8")
    assert code == 2 and err.count("\n") == 1
    assert "--disagg=8:8 needs 16 replicas × tp·pp 1 = 16 GPUs but --gpus=2" in err
    # without --gpus the pools set it: 2 + 2 replicas of tp=2 = 8 GPUs
    code, out, err = run(capsys, "simulate", "--tp", "2", "--disagg", "2:2", "--rate", "5", "--requests", "100", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["replicas"] == 2 and d["decode_replicas"] == 2


@pytest.mark.parametrize("args,message", [
    (["simulate", "--gpus", "4", "--replicas", "8"], "--replicas=8 needs 8 replicas × tp·pp 1 = 8 GPUs but --gpus=4"),
    (["simulate", "--replicas", "3", "--disagg", "1:3"], "--replicas=3 and --disagg=1:3 disagree"),
    (["simulate", "--gpus", "5", "--tp", "2"], "--gpus=5 is not a multiple of tp·pp = 2"),
    (["estimate", "--gpus", "6", "--tp", "4"], "--gpus=6 is not a multiple of tp·pp = 4"),
    (["estimate", "--scheduler", "static"], "--scheduler='static' has no effect on serve estimate"),
    (["plan", "--attainment", "0.99"], "--attainment=0.99 needs --slo"),
])
def test_flags_that_would_be_ignored_are_errors(capsys, args, message) -> None:
    code, _, err = run(capsys, *args)
    assert code == 2 and err.startswith("distscope: error: ") and err.count("\n") == 1
    assert message in err


def test_trace_and_length_flags(capsys, tmp_path) -> None:
    p = tmp_path / "trace.csv"
    p.write_text("arrival_s,input_len,output_len\n0.0,100,20\n0.5,200,20\n")
    code, _, err = run(capsys, "simulate", "--trace", str(p), "--input-len", "500", "--requests", "10")
    assert code == 2 and "--requests=10, --input-len=500 would be ignored with --trace=" in err
    code, out, err = run(capsys, "simulate", "--trace", str(p), "--json")
    assert code == 0 and json.loads(out)["requests"] == 2, err
