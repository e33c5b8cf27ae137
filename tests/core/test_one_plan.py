"""The same flags give the same Plan in every verb (scenario/: one definition of every flag and default).

- `estimate --json` and `trace generate --json` report the same plan for the same flags, drawn at
  random over the plan space (validate/plan_space.py) and for the flags users leave out;
- the command `plan` prints to reproduce its #1 gives that plan, its step time and its memory;
- an `explore` point and `plan` on the same scenario choose the same plan;
- a software preset's plan defaults reach every verb.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from distscope.cli import app
from distscope.errors import DistscopeError
from distscope.plan import Recompute
from distscope.report.estimate_table import plan_dict
from distscope.scenario import PlanFlags, SystemFlags, WorkloadFlags, build_scenario
from distscope.scenario.argv import command, plan_flags, to_argv
from distscope.software.presets import get_software
from distscope.validate.plan_space import draw_flags

RUN = CliRunner()


def _json(*argv: str) -> dict:
    r = RUN.invoke(app, [*argv, "--json"], env={"DISTSCOPE_PROGRESS": "0"})
    assert r.exit_code == 0, f"distscope {' '.join(argv)}: {r.output[-800:]}"
    return json.loads(r.stdout)


def _argv(w: WorkloadFlags, s: SystemFlags, p: PlanFlags) -> list[str]:
    return ["--model", w.model, "--cluster", s.cluster, "--gpus", str(s.gpus), *to_argv(w, p)]


def _plan_of_every_verb(argv: list[str], tmp: Path) -> tuple[dict, dict]:
    est = _json("estimate", *argv)["plan"]
    gen = _json("trace", "generate", *argv, "--symmetric", "-o", str(tmp))["plan_fields"]
    return est, gen


@pytest.mark.parametrize("argv", [
    [],  # every default
    ["--tp", "2", "--pp", "2"],
    ["--tp", "2", "--software", "torchtitan-2025"],
    ["--model", "gpt3-175b", "--cluster", "dgx-a100", "--gpus", "64", "--tp", "8", "--pp", "8",
     "--global-batch", "64", "--software", "megatron-lm-2021"],
])
def test_left_out_flags_give_one_plan(argv: list[str], tmp_path: Path) -> None:
    est, gen = _plan_of_every_verb(argv, tmp_path)
    assert est == gen


@settings(max_examples=12, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_flags_give_one_plan(data: st.DataObject, tmp_path_factory: pytest.TempPathFactory) -> None:
    flags = draw_flags(lambda xs: data.draw(st.sampled_from(list(xs))))
    try:
        sc = build_scenario(*flags)
    except DistscopeError:
        assume(False)
        return
    est, gen = _plan_of_every_verb(_argv(*flags), tmp_path_factory.mktemp("gen"))
    assert est == gen == plan_dict(sc.plan)
    # and the command that reproduces the plan (plan's "reproduce #1") gives it back
    again = command("estimate", flags[0], flags[1], plan_flags(sc.plan, software=flags[2].software)).split()[2:]
    assert _json("estimate", *again)["plan"] == est


def test_software_preset_sets_the_plan_defaults() -> None:
    w, s = WorkloadFlags(model="llama3-8b"), SystemFlags(gpus=16)
    titan = build_scenario(w, s, PlanFlags(tp=2, software="torchtitan-2025")).plan
    d = get_software("torchtitan-2025").plan
    assert (titan.zero_stage, titan.distributed_optimizer, titan.sp, titan.recompute, titan.framework) == (
        d.zero_stage, d.distributed_optimizer, True, d.recompute, d.framework)
    assert titan.zero_stage == 3 and titan.recompute is Recompute.SELECTIVE_OP
    old = build_scenario(w, s, PlanFlags(tp=2, software="megatron-lm-2021")).plan
    assert (old.zero_stage, old.distributed_optimizer, old.sp, old.recompute) == (0, False, False, Recompute.FULL)
    assert old.attention.value == get_software("megatron-lm-2021").attention.value
    none = build_scenario(w, s, PlanFlags(tp=2)).plan  # none named: the documented default stack
    assert (none.zero_stage, none.distributed_optimizer, none.sp, none.recompute) == (0, True, True, Recompute.NONE)
    # a flag the user gives always wins over the preset
    assert build_scenario(w, s, PlanFlags(tp=2, zero=1, software="torchtitan-2025")).plan.zero_stage == 1
    # the preset's attention kernel is the one it runs on the cluster's GPU (cuDNN on Blackwell)
    assert titan.attention.value == "flash"
    b200 = SystemFlags(cluster="dgx-b200", gpus=16)
    assert build_scenario(w, b200, PlanFlags(tp=2, software="torchtitan-2025")).plan.attention.value == "cudnn"
    assert build_scenario(w, b200, PlanFlags(tp=2, software="torchtitan-2025",
                                             attention="flash")).plan.attention.value == "flash"


def test_plan_reproduce_command_and_explore_point_agree(tmp_path: Path) -> None:
    base = ["--model", "llama3-8b", "--gpus", "16", "--global-batch", "64"]
    planned = _json("plan", *base, "--simulate-top", "0", "--top", "3")
    best = planned["best"]
    again = _json(*planned["estimate_command"].split()[1:])
    assert again["plan"] == {k: best[k] for k in again["plan"]}
    assert again["step_time_s"] == pytest.approx(best["step_time_s"], rel=1e-12)
    assert again["memory_per_gpu_bytes"] == pytest.approx(best["memory_per_gpu_bytes"], rel=1e-12)
    explored = _json("explore", *base, "--out", str(tmp_path / "x.json"), "--workers", "1")
    (row,) = explored["points"]
    comp = planned["compression"]
    chosen = comp["with"] if comp and comp["speedup"] > 1.0 else best
    assert row["step_time_s"] == pytest.approx(chosen["step_time_s"], rel=1e-9)
    assert row["memory_GiB"] * 2**30 == pytest.approx(chosen["memory_per_gpu_bytes"], rel=1e-9)
    assert row["best_plan"] == {k: (",".join(map(str, chosen[k])) if k == "stage_layers" else chosen[k])
                                for k in row["best_plan"]}
