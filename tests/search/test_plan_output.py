"""What `distscope plan` prints about its #1 and the ranking: the pipeline split belongs to the plan printed
first (after simulator re-ranking too), the table shows estimated and simulated step time and which one
orders it, plans within the estimator's error are marked a tie; the re-ranking reports progress per phase
and its bandwidth sharing scales with the flows in flight; MoE plans' Megatron arguments name the
dispatcher and grouped GEMM the estimate assumes."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest
from typer.testing import CliRunner

from distscope.dtypes import Precision
from distscope.model.estimate import estimate
from distscope.model.stages import chunk_sizes
from distscope.plan import MoeDispatcher, Plan, Recompute
from distscope.search import megatron_check, rerank
from distscope.search.emit import megatron_args, megatron_env
from distscope.search.planner import Candidate, search
from distscope.search.report import TIE_REL, tie_json, tie_line, ties
from distscope.search.rerank import Phase, Simulated, simulate_candidates
from distscope.search.space import SearchSpace
from distscope.sim.fluid import FluidNetwork
from distscope.sim.loop import EventLoop
from distscope.system.presets import get_cluster
from distscope.workload.catalog import get_model
from distscope.workload.training import TrainingShape

RUN = CliRunner()
# The README's main job: every default (Llama 3 70B, 64 GPUs of DGX H100)
DEFAULT: list[str] = []


def _plan(argv: list[str], *, as_json: bool) -> str:
    r = RUN.invoke(__import__("distscope.cli", fromlist=["app"]).app,
                   ["plan", *argv, "--no-compression", *(["--json"] if as_json else [])],
                   env={"DISTSCOPE_PROGRESS": "0", "COLUMNS": "200"})
    assert r.exit_code == 0, r.output[-1500:]
    return r.stdout


def _fake_simulator(monkeypatch: pytest.MonkeyPatch, *, reorder: bool) -> list[Candidate]:
    """Replace the simulator: with `reorder`, the first candidate with another chunk count than the
    estimator's #1 gets the shortest simulated time (2% ahead); else the estimator's order holds."""
    seen: list[Candidate] = []

    def fake(spec, shape, cluster, candidates, mode=None, progress=None, software=None, status=None, fabric=None):  # type: ignore[no-untyped-def]
        seen.extend(candidates)
        chunks = candidates[0].plan.pp * candidates[0].plan.vp
        win = next((c for c in candidates if c.plan.pp * c.plan.vp != chunks), None) if reorder else None
        assert win is not None or not reorder, "the test needs two chunk counts among the simulated plans"
        out = [Simulated(candidate=c, estimated_step_s=c.step_time_s,
                         simulated_step_s=c.step_time_s * (0.98 if c is win else 1.0 + 1e-3 * i), sim_wall_s=0.0)
               for i, c in enumerate(candidates)]
        return sorted(out, key=lambda s: s.simulated_step_s)

    monkeypatch.setattr(rerank, "simulate_candidates", fake)
    return seen


def test_split_line_and_record_are_about_the_plan_printed_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """The re-ranked #1 has another chunk count than the estimator's #1: the split shown is #1's."""
    _fake_simulator(monkeypatch, reorder=True)
    d = json.loads(_plan(DEFAULT, as_json=True))
    best, first_est = d["best"], min(d["top"], key=lambda x: x["step_time_s"])
    assert best["pp"] * best["vp"] != first_est["pp"] * first_est["vp"]  # the re-ranking changed #1
    g = d["partition"]
    assert g is not None and len(g["default_split"]) == len(g["optimal_split"]) == best["pp"] * best["vp"]
    got = chunk_sizes(80, best["pp"], best["vp"], tuple(best["stage_layers"]))
    assert list(got) == (g["optimal_split"] if g["applied"] else g["default_split"])
    label = f"{best['tp']}.{best['pp']}.{best['vp']}.{best['cp']}.{best['dp']}"
    assert g["plan"] == label
    text = _plan(DEFAULT, as_json=False)
    line = next(x for x in text.splitlines() if x.startswith("pipeline split"))
    assert f"of #1 ({label}:" in line


def test_table_shows_estimate_and_simulation_and_which_orders_it(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _fake_simulator(monkeypatch, reorder=True)
    text = _plan(DEFAULT, as_json=False)
    header = next(x for x in text.splitlines() if re.search(r"\best s\b", x))
    assert "sim s*" in header and "est s*" not in header
    assert "* order: rows 1-3 by sim s" in text
    d = json.loads(_plan(DEFAULT, as_json=True))
    sims = [x["simulated_step_s"] for x in d["top"]]
    assert all(s is not None for s in sims[:3]) and all(s is None for s in sims[3:])
    assert sims[:3] == sorted(sims[:3]) and d["ranked_by_simulation"] == 3
    row1 = next(x for x in text.splitlines() if re.match(r"\s*1 ", x))
    assert f"{d['top'][0]['step_time_s']:.3f}" in row1 and f"{sims[0]:.3f}" in row1  # both times of #1
    assert len(seen) >= 3

    monkeypatch.undo()
    _fake_simulator(monkeypatch, reorder=False)
    text = _plan(DEFAULT, as_json=False)
    header = next(x for x in text.splitlines() if re.search(r"\best s", x))
    assert "est s*" in header and "sim s*" not in header and "* order: est s" in text


def test_plans_within_the_estimators_error_are_a_tie(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_simulator(monkeypatch, reorder=False)
    d = json.loads(_plan(DEFAULT, as_json=True))
    tie = d["tie"]
    assert tie["tolerance_rel"] == TIE_REL
    ref = d["top"][0]["step_time_s"]
    want = [abs(x["step_time_s"] / ref - 1) <= TIE_REL for x in d["top"]]
    assert sum(want) > 1  # the default job's top 10 lie within ~2% of each other
    assert [x["tie"] for x in d["top"]] == want and tie["ranks"] == [i for i, w in enumerate(want, 1) if w]
    text = _plan(DEFAULT, as_json=False)
    assert "statistical tie: #1-#" in text and f"within {100 * TIE_REL:.0f}% of #1's estimated step time" in text
    header = next(x for x in text.splitlines() if re.search(r"\best s", x))
    assert " tie " in header


def _cands(*times: float) -> list[Candidate]:
    spec, shape, c = get_model("llama3-8b"), TrainingShape(seq_len=4096, global_batch=16), get_cluster("dgx-h100", 8)
    e = estimate(spec, shape, c, Plan(dp=8, micro_batch=1))
    return [Candidate(Plan(dp=8, micro_batch=1), dataclasses.replace(e, step_time_s=t)) for t in times]


def test_tie_flags_and_counts() -> None:
    cs = _cands(1.0, 1.05, 1.0 + TIE_REL * 0.999, 1.0 + TIE_REL * 1.01, 0.99)
    assert ties(cs) == [True, True, True, False, True]
    assert ties(cs[:1]) == [False] and ties(_cands(1.0, 2.0)) == [False, False]  # nothing ties with #1
    pool = [*cs, *_cands(1.01, 1.5)]
    t = tie_json(cs, pool, moe=True)
    assert t["ranks"] == [1, 2, 3, 5] and t["more_in_pool"] == 1 and t["moe_note"]
    assert tie_json(cs, pool, moe=False)["moe_note"] is None
    line = tie_line(t, cs)
    assert "#1-#3, #5 (and 1 more of the 7 kept plans) are within 7%" in line and "Qwen3" in line
    apart = _cands(1.0, 1.2)
    assert "no statistical tie[/bold]: #2's estimate is +20.0% from #1's" in tie_line(tie_json(apart, apart, moe=False), apart)


def test_rerank_reports_every_phase_and_advances_inside_a_candidate() -> None:
    spec, shape, c = get_model("llama3-8b"), TrainingShape(seq_len=4096, global_batch=16), get_cluster("dgx-h100", 8)
    res = search(spec, shape, c, SearchSpace(max_vp=2, max_micro_batch=2, pp=(2, 4)), top_k=2)
    cands = list(res.top[:2])
    assert all(x.plan.pp > 1 for x in cands)
    reports: list[tuple[int, int]] = []
    phases: list[tuple[int, Phase]] = []
    sims = simulate_candidates(spec, shape, c, cands, progress=lambda d, t: reports.append((d, t)),
                               status=lambda i, ph: phases.append((i, ph)))
    assert len(sims) == 2
    assert phases == [(i, ph) for i in range(2) for ph in (Phase.BUILD, Phase.MATCH, Phase.SIMULATE)]
    done = [d for d, _ in reports]
    total = reports[-1][1]
    assert done == sorted(done) and done[-1] == total and {t for _, t in reports} == {total}
    first_run = [d for d in done if 0 < d < total // 2]
    # at least one report per pipeline stage built, before the first candidate is done
    assert len(first_run) >= cands[0].plan.pp


class _Counted:
    """A network resource that counts how often the fluid model looks it up."""

    lookups = 0

    def __init__(self, k: int) -> None:
        self.k = k

    def __hash__(self) -> int:
        _Counted.lookups += 1
        return self.k

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Counted) and other.k == self.k


def test_bandwidth_sharing_work_grows_with_the_flows_that_share_a_resource() -> None:
    """Flows on disjoint resources never change each other's rate: starting and finishing n of them
    looks resources up O(n) times (re-rating every flow at every event was O(n^2): 60% of a DeepSeek-V3
    re-rank)."""
    n, per = 400, 2
    loop = EventLoop()
    net = FluidNetwork(loop)
    finished: list[float] = []
    res = [tuple(_Counted(per * i + j) for j in range(per)) for i in range(n)]
    _Counted.lookups = 0
    for i in range(n):
        net.start(1.0 + i * 1e-3, res[i], lambda: finished.append(loop.now))
    loop.run()
    assert len(finished) == n and finished[0] == pytest.approx(1.0) and finished[-1] == pytest.approx(1.0 + (n - 1) * 1e-3)
    assert _Counted.lookups < 20 * n * per  # linear; the quadratic version made ~n^2 * per / 2 = 160,000
    # two flows on one resource share it: each runs at half speed until the first ends
    loop = EventLoop()
    net = FluidNetwork(loop)
    ends: dict[str, float] = {}
    shared = _Counted(-1)
    net.start(1.0, (shared,), lambda: ends.setdefault("a", loop.now))
    net.start(2.0, (shared, _Counted(-2)), lambda: ends.setdefault("b", loop.now))
    loop.run()
    assert ends["a"] == pytest.approx(2.0) and ends["b"] == pytest.approx(3.0)


SPEC_MOE = get_model("deepseek-v3")
SHAPE_MOE = TrainingShape(seq_len=4096, global_batch=256)


def _moe_plan(**kw: object) -> Plan:
    plan = Plan(dp=16, pp=4, ep=8, micro_batch=1, zero_stage=1, distributed_optimizer=True, recompute=Recompute.FULL,
                stage_layers=(15, 16, 15, 15), **kw)  # type: ignore[arg-type]
    plan.check(layers=SPEC_MOE.layers, heads=SPEC_MOE.heads, kv_heads=SPEC_MOE.kv_heads,
               experts=SPEC_MOE.moe.experts, seq_len=SHAPE_MOE.seq_len,  # type: ignore[union-attr]
               global_batch=SHAPE_MOE.global_batch, num_gpus=64)
    return plan


@pytest.mark.parametrize(("dispatcher", "precision", "want", "grouped"), [
    (MoeDispatcher.ALLTOALL, Precision.BF16, ["--moe-token-dispatcher-type", "alltoall"], True),
    (MoeDispatcher.ALLTOALL, Precision.FP8, ["--moe-token-dispatcher-type", "alltoall"], True),
    (MoeDispatcher.DEEPEP, Precision.BF16,
     ["--moe-token-dispatcher-type", "flex", "--moe-flex-dispatcher-backend", "deepep"], True),
    (MoeDispatcher.ALLTOALL, Precision.FP16, ["--moe-token-dispatcher-type", "alltoall"], False),
])
def test_moe_megatron_arguments_run_what_was_estimated(dispatcher: MoeDispatcher, precision: Precision,
                                                        want: list[str], grouped: bool) -> None:
    """Megatron's default dispatcher is allgather and its default expert GEMM a per-expert loop: both
    are set for every MoE plan (grouped GEMM only where validate_args allows it: bf16, which FP8 runs
    with), and the pinned parser accepts them."""
    plan = _moe_plan(moe_dispatcher=dispatcher, precision=precision)
    a = megatron_args(plan, SPEC_MOE, SHAPE_MOE)
    i = a.index("--moe-token-dispatcher-type")
    assert a[i:i + len(want)] == want
    assert ("--moe-grouped-gemm" in a) is grouped
    assert megatron_check.check(a, megatron_env(plan, True), True) == []
    dense = megatron_args(Plan(dp=64, micro_batch=1), get_model("llama3-8b"), SHAPE_MOE)
    assert not any(x.startswith("--moe") for x in dense)

