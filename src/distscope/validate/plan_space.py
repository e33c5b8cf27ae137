"""Random valid (model, cluster, plan) scenarios across the whole plan space, for consistency checks.

`draw_scenario(choose)` builds one scenario from choices made by `choose(options)`: hypothesis's
`data.draw(sampled_from(options))` in the tests (shrinking works), a seeded `random.Random.choice` in
benchmarks/consistency.py. It covers every ZeRO stage and the distributed optimizer, every pipeline
schedule, virtual stages, CP, EP with expert TP, capacity and the DeepEP dispatcher, compression,
every recompute mode (and partial full recompute), uneven first/last stages, FP8, the software presets
and their plan defaults. Every draw goes through scenario/build.py (the CLI's own path); a draw the
plan rules reject raises DistscopeError, and the caller draws again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from distscope.scenario import PlanFlags, Scenario, SystemFlags, WorkloadFlags, build_scenario
from distscope.software.presets import software_names
from distscope.workload.catalog import get_model

T = TypeVar("T")
Choose = Callable[[Sequence[Any]], Any]

MODELS = ("llama3-8b", "llama3-70b", "gpt-7.5b", "mixtral-8x7b", "nemotron4-15b")
CLUSTERS = ("dgx-h100", "dgx-a100", "dgx-b200")
GPUS = (8, 16, 32, 64)
SCHEDULES = ("1f1b", "interleaved-1f1b", "zb-h1", "zb-v", "dualpipe", "2bw", "gpipe")
RECOMPUTE = (None, "none", "selective", "selective-op", "full")
COMPRESS = (None, None, "dp-grad=bf16", "dp-grad=int8", "dp-grad=int4-hs", "weights=int8", "weights=qwd-int4",
            "tp=fp8", "dp-grad=int4-hs,weights=qwd-int4,tp=fp8")
OVERLAP = (None, "none", "dp", "tp", "pp", "dp,tp", "dp,pp", "dp,tp,pp")


def _divisors(n: int, limit: int) -> list[int]:
    return [d for d in range(1, min(n, limit) + 1) if n % d == 0]


def draw_flags(choose: Choose) -> tuple[WorkloadFlags, SystemFlags, PlanFlags]:
    """One draw of the three flag families (may describe a plan the rules reject)."""
    model = choose(MODELS)
    spec = get_model(model)
    gpus = choose(GPUS)
    cluster = choose(CLUSTERS)
    tp = choose([d for d in _divisors(gpus, 8) if spec.heads % d == 0])
    pp = choose([d for d in _divisors(gpus // tp, 8)])
    cp = choose([d for d in _divisors(gpus // (tp * pp), 4)])
    dp = gpus // (tp * pp * cp)
    moe = spec.moe is not None
    ep = choose([d for d in _divisors(dp * cp, 8) if spec.moe.experts % d == 0]) if moe and spec.moe else 1
    schedule = choose(SCHEDULES) if pp > 1 else None
    vp = 2 if schedule == "zb-v" else (choose((2, 4)) if schedule == "interleaved-1f1b" else 1)
    micro_batch = choose((1, 2))
    micro_batches = choose((1, 2, 4, 8, 16)) * (2 * pp if pp > 1 else 1)
    software = choose((None, None, *software_names()))
    precision = choose(("bf16", "bf16", "fp8")) if cluster != "dgx-a100" else "bf16"
    recompute = choose(RECOMPUTE)
    first = last = None
    if pp > 2 and vp == 1 and schedule not in ("dualpipe",) and choose((False, True)):
        per = spec.layers // pp
        first, last = max(1, per - 1), max(1, per - 1)
    return (
        WorkloadFlags(model=model, seq=choose((1024, 2048, 4096)), global_batch=dp * micro_batch * micro_batches),
        SystemFlags(cluster=cluster, gpus=gpus),
        PlanFlags(
            tp=tp, pp=pp, vp=vp, cp=cp, ep=ep, dp=dp, schedule=schedule, micro_batch=micro_batch,
            zero=choose((None, 0, 1, 2, 3)), distributed_optimizer=choose((None, False, True)),
            sequence_parallel=choose((None, False, True)), recompute=recompute,
            recompute_layers=choose((0, 1)) if recompute == "full" else 0, precision=precision,
            overlap=choose(OVERLAP), compress=choose(COMPRESS), first_stage_layers=first, last_stage_layers=last,
            etp=choose((None, 1)) if ep > 1 else None, capacity_factor=choose((None, 1.25)) if moe else None,
            moe_a2a_overlap=choose((False, True)) if moe and pp > 1 else False,
            moe_dispatcher=choose(("alltoall", "deepep")) if ep > 1 else "alltoall", software=software,
            framework=choose((None, "any")),
        ),
    )


def draw_scenario(choose: Choose) -> Scenario:
    """A valid scenario (module doc); raises DistscopeError when the draw breaks a plan rule."""
    return build_scenario(*draw_flags(choose))
