"""The `plan` report: ranked table, why the best wins, partition gain, compression, ready-to-run output."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from rich import box
from rich.table import Table

from distscope.model.result import BREAKDOWN_KEYS
from distscope.plan import Plan
from distscope.report.estimate_table import plan_dict
from distscope.search.compression import CompressionResult, caveats, config_label
from distscope.search.planner import Candidate, PartitionGain
from distscope.search.space import Sharding, sharding_of

if TYPE_CHECKING:
    from distscope.search.rerank import Phase, Simulated

_SHARDING_NAMES = {Sharding.DDP: "ddp", Sharding.DIST_OPT: "dist-opt", Sharding.ZERO2: "zero2", Sharding.ZERO3: "zero3"}

# Plans whose estimated step times lie within TIE_REL of #1's are a statistical tie: the estimator
# cannot order them. 7% is the mean error of the predicted step-time *ratio* of two runs of one job
# (same model, GPUs, global batch, precision, software) that differ only in plan choices, over the 10
# such pairs of dense models in data/validation/published_runs.csv + data/evidence/training_runs.csv:
# KORT22-{22B,175B,530B,1T} full vs selective recompute, E1-T4/E2 plain vs async TP (5 pairs), E1-T5
# 1F1B vs interleaved; per pair 0.6-14.7%, median 7.1% (from `distscope validate <both CSVs> --json`,
# calibration of 2026-11-25). It is below the 10.5% leave-one-source-out error of absolute step times
# (README) because errors common to a job cancel in a ratio. The simulator re-ranking shares the
# estimator's per-operation costs, so it does not narrow this. MoE plans are worse (MOE_TIE_NOTE).
TIE_REL = 0.07
MOE_TIE_NOTE = ("for MoE models the estimator's comparisons are weaker still: over the 6 pairs of published "
                "Qwen3-235B layouts the predicted order is wrong in 5")


def sharding_name(plan: Plan) -> str:
    return _SHARDING_NAMES[sharding_of(plan)]


def recompute_name(plan: Plan) -> str:
    if plan.recompute_layers:
        return f"full:{plan.recompute_layers}"
    return plan.recompute.value


def runner_up(top: tuple[Candidate, ...], rel: float = 1e-4) -> Candidate | None:
    """The first candidate measurably slower than the best (equal-time twins, e.g. dp and cp swapped
    with the same breakdown, explain nothing)."""
    if not top:
        return None
    for c in top[1:]:
        if c.step_time_s > top[0].step_time_s * (1 + rel):
            return c
    return top[1] if len(top) > 1 else None


def other_layout(pool: tuple[Candidate, ...]) -> Candidate | None:
    """The fastest measurably slower candidate whose tp or pp differs from the best's: the structural
    alternative worth explaining."""
    if not pool:
        return None
    best = pool[0]
    key = (best.plan.tp, best.plan.pp)
    return next((c for c in pool[1:] if (c.plan.tp, c.plan.pp) != key
                 and c.step_time_s > best.step_time_s * (1 + 1e-4)), None)


def candidate_json(c: Candidate) -> dict[str, Any]:
    e = c.estimate
    return {**plan_dict(c.plan), "compression": config_label(c.plan.compression), "step_time_s": e.step_time_s,
            "mfu": e.mfu, "tokens_per_s": e.tokens_per_s, "breakdown_s": dict(e.breakdown_s),
            "memory_per_gpu_bytes": e.memory.total_bytes, "memory_breakdown_bytes": e.memory.terms(),
            "margin_bytes": e.margin_bytes}


def partition_json(g: PartitionGain | None, plan: Plan | None = None) -> dict[str, Any] | None:
    """The split record; `plan` names the plan it is about (its layout label)."""
    if g is None:
        return None
    return {**({"plan": layout_label(plan)} if plan is not None else {}), "applied": g.applied,
            "feasible": g.feasible, "default_split": list(g.default_sizes), "optimal_split": list(g.optimal_sizes),
            "default_bottleneck_s": g.default_bottleneck_s, "optimal_bottleneck_s": g.optimal_bottleneck_s,
            "default_step_s": g.default_step_s, "optimal_step_s": g.optimal_step_s, "step_gain_pct": g.step_gain_pct}


def partition_line(g: PartitionGain, plan: Plan) -> str:
    """One console line on `plan`'s pipeline split (the plan printed as #1), naming the plan."""
    chunks = f"{len(g.default_sizes)} chunks on {plan.pp} stages" if plan.vp > 1 else f"{plan.pp} stages"
    what = f"pipeline split of #1 ({layout_label(plan)}: {chunks})"
    if g.applied:
        return (f"[bold]{what}[/bold]: {list(g.optimal_sizes)} (exact min-max DP) instead of the default "
                f"{list(g.default_sizes)}: slowest stage {g.optimal_bottleneck_s * 1e3:.2f} ms vs "
                f"{g.default_bottleneck_s * 1e3:.2f} ms per micro-batch, step {g.step_gain_pct:.2f}% faster")
    if not g.feasible and g.optimal_step_s < g.default_step_s:
        return (f"[bold]{what}[/bold]: the default split is kept; the min-max split {list(g.optimal_sizes)} would "
                f"be {g.step_gain_pct:.2f}% faster but does not fit in memory")
    return (f"[bold]{what}[/bold]: the default split is already optimal (slowest stage "
            f"{g.default_bottleneck_s * 1e3:.2f} ms per micro-batch)")


def ties(candidates: Sequence[Candidate], tol: float = TIE_REL) -> list[bool]:
    """Per candidate: its estimated step time is within `tol` of #1's, a statistical tie with #1
    (TIE_REL); all False when nothing ties with #1 (one plan alone is no tie)."""
    if not candidates:
        return []
    ref = candidates[0].step_time_s
    out = [abs(c.step_time_s / ref - 1.0) <= tol for c in candidates]
    return out if sum(out) > 1 else [False] * len(candidates)


def _ranks(flags: Sequence[bool]) -> str:
    """'#1-#4, #6' for the flagged (1-based) positions."""
    runs: list[list[int]] = []
    for i, f in enumerate(flags, 1):
        if f:
            if runs and runs[-1][-1] == i - 1:
                runs[-1].append(i)
            else:
                runs.append([i])
    return ", ".join(f"#{r[0]}" if len(r) == 1 else f"#{r[0]}-#{r[-1]}" for r in runs)


def tie_json(shown: Sequence[Candidate], pool: Sequence[Candidate], moe: bool, tol: float = TIE_REL) -> dict[str, Any]:
    """Which printed plans tie with #1 (1-based ranks) and how many more of the kept plans do."""
    flags = ties(shown, tol)
    more = 0
    if any(flags):
        ref = shown[0].step_time_s
        more = sum(1 for c in pool if all(c is not x for x in shown) and abs(c.step_time_s / ref - 1.0) <= tol)
    return {"tolerance_rel": tol, "basis": "estimated step time relative to #1's", "ranks": [i for i, f in
            enumerate(flags, 1) if f], "more_in_pool": more, "pool": len(pool), "moe_note": MOE_TIE_NOTE if moe else None}


def tie_line(tie: dict[str, Any], shown: Sequence[Candidate]) -> str:
    """The console line for `tie_json`'s record."""
    pct = f"{100 * tie['tolerance_rel']:.0f}%"
    if not tie["ranks"]:
        if len(shown) < 2:
            return ""
        gap = 100 * (shown[1].step_time_s / shown[0].step_time_s - 1.0)
        line = (f"[bold]no statistical tie[/bold]: #2's estimate is {gap:+.1f}% from #1's, outside the estimator's "
                f"{pct} error in comparing two plans of one job")
    else:
        flags = [i in tie["ranks"] for i in range(1, len(shown) + 1)]
        more = ""
        if tie["more_in_pool"]:
            least = "at least " if tie["more_in_pool"] + len(shown) >= tie["pool"] else ""
            more = f" (and {least}{tie['more_in_pool']} more of the {tie['pool']} kept plans)"
        line = (f"[bold]statistical tie[/bold]: {_ranks(flags)}{more} are within {pct} of #1's estimated step time, "
                "the estimator's error in comparing two plans of one job: their order is not a prediction. Choose "
                "among them on memory margin or simplicity, or measure them")
    return line + (f"; {tie['moe_note']}" if tie["moe_note"] else "")


def compression_json(cr: CompressionResult | None) -> dict[str, Any] | None:
    if cr is None:
        return None
    return {"without": candidate_json(cr.uncompressed), "with": candidate_json(cr.compressed), "speedup": cr.speedup,
            "caveats": caveats(cr.compressed.plan.compression), "evaluated": cr.evaluated,
            "options": [{"compression": config_label(c.plan.compression), "step_time_s": c.step_time_s,
                         "caveats": caveats(c.plan.compression)} for c in cr.ranked[:8]]}


def plan_label(p: Plan) -> str:
    """Compact degrees, e.g. 'tp4 pp4 vp8 cp1 dp64 mb2 sp' (ep only for MoE plans)."""
    ep = f" ep{p.ep}" if p.ep > 1 else ""
    return f"tp{p.tp} pp{p.pp} vp{p.vp} cp{p.cp}{ep} dp{p.dp} mb{p.micro_batch}{' sp' if p.sp else ''}"


def top_table(candidates: Sequence[Candidate], title: str, *, simulated_s: Sequence[float | None] = (),
              sim_ordered: int = 0, tie: Sequence[bool] = ()) -> Table:
    """The ranked plans; `layout` is tp.pp.vp.cp.dp (.ep), `free` the memory margin per GPU in GiB.

    `simulated_s[i]`: candidate i's simulated step time (None: not simulated; a `sim s` column when
    any is given); the first `sim_ordered` rows are ordered by it, the rest by the estimate. The
    column that orders the rows is starred. `tie[i]`: candidate i is a statistical tie with #1."""
    sims = list(simulated_s) + [None] * (len(candidates) - len(simulated_s))
    has_sim = any(x is not None for x in sims)
    n = len(candidates)
    est_h, sim_h = ("est s", "sim s*") if sim_ordered else ("est s*", "sim s")
    if sim_ordered >= n:
        order = "* order: sim s (simulated step time)"
    elif sim_ordered:
        rest = f"{sim_ordered + 1}-{n}" if sim_ordered < n - 1 else f"{n}"
        order = f"* order: rows 1-{sim_ordered} by sim s (simulated step time), {rest} by est s (estimated)"
    else:
        order = "* order: est s (estimated step time)" + ("; sim s (simulated) does not reorder it" if has_sim else "")
    caption = (f"{order} · " + (f"tie = within {100 * TIE_REL:.0f}% of #1's est s · " if any(tie) else "")
               + "layout = tp.pp.vp.cp.dp[.ep] (/schedule) · GiB = modelled memory per GPU · free = capacity left")
    t = Table(title=title, caption=caption, box=box.SIMPLE_HEAD, pad_edge=False, padding=0)
    # Narrow enough for an 80-column terminal: degrees in one column, seconds to 2-3 digits.
    mixed = len({c.plan.precision for c in candidates}) > 1  # plan --precision auto: say each row's
    cols = ["#", "layout", *(["prec"] if mixed else []), "mb", "sp", "shard", "recomp", est_h, *([sim_h] if has_sim else []),
            *(["tie"] if any(tie) else []), "MFU", "bubble", "comm", "GiB", "free"]
    for col in cols:
        t.add_column(col, justify="left" if col in ("layout", "shard", "recomp") else "right", no_wrap=True,
                     header_style="bold underline" if col.endswith("*") else None)
    for i, c in enumerate(candidates):
        p, e = c.plan, c.estimate
        bd = e.breakdown_s
        comm = sum(bd.get(k, 0.0) for k in ("tp", "cp", "ep", "pp", "dp"))
        sim = sims[i]
        t.add_row(str(i + 1), layout_label(p), *([p.precision.value] if mixed else []), str(p.micro_batch),
                  "y" if p.sp else "n", sharding_name(p),
                  recompute_name(p), f"{e.step_time_s:.3f}",
                  *([f"{sim:.3f}" if sim is not None else "-"] if has_sim else []),
                  *(["y" if tie[i] else "n"] if any(tie) else []),
                  f"{100 * e.mfu:.0f}%", f"{bd.get('bubble', 0.0):.2f}",
                  f"{comm:.2f}", f"{e.memory.total_bytes / 2**30:.1f}", f"{e.margin_bytes / 2**30:.1f}")
    return t


def layout_label(p: Plan) -> str:
    """'4.2.8.1.8' style degrees: tp.pp.vp.cp.dp (+ '.ep' for MoE plans, + '/zb-h1' etc. for a schedule
    other than (interleaved) 1F1B), as the table header says."""
    label = ".".join(str(x) for x in (p.tp, p.pp, p.vp, p.cp, p.dp, *((p.ep,) if p.ep > 1 else ())))
    sched = p.schedule.value
    return label if sched in ("1f1b", "interleaved-1f1b") else f"{label}/{sched}"


def rerank_status(describe: Callable[[str], None], candidates: Sequence[Candidate]) -> Callable[[int, Phase], None]:
    """rerank.simulate_candidates' `status` callback for a progress bar's `describe`."""
    def status(i: int, phase: Phase) -> None:
        describe(f"simulating #{i + 1} of {len(candidates)} ({layout_label(candidates[i].plan)}): {phase.value}")

    return status


def breakdown_table(c: Candidate) -> Table:
    e = c.estimate
    t = Table(title=f"#1: where the estimated {e.step_time_s:.3f} s step goes (exposed seconds)", box=box.SIMPLE_HEAD,
              pad_edge=False, padding=0)
    for k in BREAKDOWN_KEYS:
        t.add_column(k, justify="right", no_wrap=True)
    t.add_column("GiB/GPU", justify="right", no_wrap=True)
    t.add_row(*(f"{e.breakdown_s.get(k, 0.0):.3f}" for k in BREAKDOWN_KEYS), f"{e.memory.total_bytes / 2**30:.1f}")
    return t


def compression_table(cr: CompressionResult) -> Table:
    t = Table(title="Best plan per compression option", box=box.SIMPLE_HEAD)
    for col in ("compression", "plan", "step s", "vs none"):
        t.add_column(col, justify="right" if col in ("step s", "vs none") else "left", no_wrap=col != "compression")
    base = cr.uncompressed
    t.add_row("none", plan_label(base.plan), f"{base.step_time_s:.3f}", "1.000x")
    for c in cr.ranked[:5]:
        t.add_row(config_label(c.plan.compression), plan_label(c.plan), f"{c.step_time_s:.3f}",
                  f"{base.step_time_s / c.step_time_s:.3f}x")
    return t


def fabric_lines(simulated: list[Simulated], best: Candidate) -> str:
    """Which scale-out traffic of the #1 plan lost bandwidth on the fabric, and on which links."""
    from distscope.fabric.network import verdict_line

    sim = next((x for x in simulated if x.candidate is best), None)
    if sim is None:
        return "fabric: the #1 plan was not simulated"
    if not sim.fabric:
        return "fabric: every scale-out traffic class of the #1 plan ran at full NIC bandwidth"
    return "\n".join(["fabric, the #1 plan's traffic below full NIC bandwidth:", *(f"  {verdict_line(v)}" for v in sim.fabric)])
