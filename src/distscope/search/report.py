"""The `plan` report: ranked table, why the best wins, partition gain, compression, ready-to-run output."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.table import Table

from distscope.model.result import BREAKDOWN_KEYS
from distscope.plan import Plan
from distscope.report.estimate_table import plan_dict
from distscope.search.compression import CompressionResult, caveats, config_label
from distscope.search.planner import Candidate, PartitionGain
from distscope.search.space import Sharding, sharding_of

_SHARDING_NAMES = {Sharding.DDP: "ddp", Sharding.DIST_OPT: "dist-opt", Sharding.ZERO2: "zero2", Sharding.ZERO3: "zero3"}


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


def partition_json(g: PartitionGain | None) -> dict[str, Any] | None:
    if g is None:
        return None
    return {"default_split": list(g.default_sizes), "optimal_split": list(g.optimal_sizes),
            "default_bottleneck_s": g.default_bottleneck_s, "optimal_bottleneck_s": g.optimal_bottleneck_s,
            "default_step_s": g.default_step_s, "optimal_step_s": g.optimal_step_s, "step_gain_pct": g.step_gain_pct}


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


def top_table(candidates: tuple[Candidate, ...], title: str) -> Table:
    """The ranked plans; `layout` is tp.pp.vp.cp.dp (.ep), `free` the memory margin per GPU in GiB."""
    t = Table(title=title, caption="layout = tp.pp.vp.cp.dp[.ep] (/schedule) · GiB = modelled memory per GPU · free = capacity left",
              box=box.SIMPLE_HEAD, pad_edge=False, padding=0)
    # Narrow enough for an 80-column terminal: degrees in one column, seconds to 2-3 digits.
    cols = ("#", "layout", "mb", "sp", "shard", "recomp", "step s", "MFU", "bubble", "comm", "GiB", "free")
    for col in cols:
        t.add_column(col, justify="left" if col in ("layout", "shard", "recomp") else "right", no_wrap=True)
    for i, c in enumerate(candidates, 1):
        p, e = c.plan, c.estimate
        bd = e.breakdown_s
        comm = sum(bd.get(k, 0.0) for k in ("tp", "cp", "ep", "pp", "dp"))
        t.add_row(str(i), layout_label(p), str(p.micro_batch), "y" if p.sp else "n", sharding_name(p),
                  recompute_name(p), f"{e.step_time_s:.3f}", f"{100 * e.mfu:.0f}%", f"{bd.get('bubble', 0.0):.2f}",
                  f"{comm:.2f}", f"{e.memory.total_bytes / 2**30:.1f}", f"{e.margin_bytes / 2**30:.1f}")
    return t


def layout_label(p: Plan) -> str:
    """'4.2.8.1.8' style degrees: tp.pp.vp.cp.dp (+ '.ep' for MoE plans, + '/zb-h1' etc. for a schedule
    other than (interleaved) 1F1B), as the table header says."""
    label = ".".join(str(x) for x in (p.tp, p.pp, p.vp, p.cp, p.dp, *((p.ep,) if p.ep > 1 else ())))
    sched = p.schedule.value
    return label if sched in ("1f1b", "interleaved-1f1b") else f"{label}/{sched}"


def breakdown_table(c: Candidate) -> Table:
    e = c.estimate
    t = Table(title=f"#1: where the {e.step_time_s:.3f} s step goes (exposed seconds)", box=box.SIMPLE_HEAD,
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
