"""The terminal summary of a sweep: counts, failures by reason, the time-vs-cost Pareto front."""

from __future__ import annotations

from collections import Counter
from typing import Any

from rich.table import Table

from distscope.explore.point import OK
from distscope.report.console import err, out
from distscope.workload.module_graph import is_module_ref

MAX_ROWS = 20


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:,.0f}" if abs(v) >= 1e3 else f"{v:.4g}"
    return str(v)


def _plan(r: dict[str, Any]) -> str:
    """Compact plan label, e.g. tp4.pp8x5.cp1.dp32.mb1.z1 (+ recompute, compression)."""
    s = f"tp{r['tp']}.pp{r['pp']}" + (f"x{r['vp']}" if r["vp"] > 1 else "") + f".cp{r['cp']}.dp{r['dp']}"
    s += f".mb{r['micro_batch']}.z{1 if r['distributed_optimizer'] and r['zero_stage'] == 0 else r['zero_stage']}"
    if r["recompute"] != "none":
        s += f".rc-{r['recompute']}" + (f"{r['recompute_layers']}" if r["recompute_layers"] else "")
    if r["compression"] != "none":
        s += f" {r['compression']}"
    return s


def print_summary(res: Any, *, out_path: str | None, plot: str | None, price_given: bool) -> None:
    rows = res.doc["rows"]
    status = Counter(r["status"] for r in rows)
    err.print(f"explore: {res.total} points ({res.resumed} already done, {res.computed} planned) in {res.wall_s:.1f} s; "
              + ", ".join(f"{k} {v}" for k, v in sorted(status.items())), markup=False)
    reasons = Counter(r["reason"] for r in rows if r["status"] != OK)
    for reason, n in reasons.most_common(5):
        err.print(f"  {n} × {reason}", markup=False, soft_wrap=True)
    axes = list(res.sweep["axes"])
    cost = "cost" if price_given else "GPU-hours"
    modules = {is_module_ref(str(r["model"])) for r in rows}
    unit = "samples" if modules == {True} else "tokens (samples for torch modules)" if True in modules else "tokens"
    t = Table(title=f"Pareto front: time vs {cost} to train {res.sweep['objectives']['train_tokens']:.3g} {unit}"
                    f" ({len(res.doc['pareto']['time_cost'])} of {status.get(OK, 0)} feasible points)")
    for c in ("#", *axes, "gpus" if "gpus" not in axes else None, "best plan", "step s", f"{unit.split()[0]}/s", "days",
              cost, "MWh"):
        if c is not None:
            t.add_column(c, justify="left" if c == "best plan" else "right")
    for i in res.doc["pareto"]["time_cost"][:MAX_ROWS]:
        r = rows[i]
        t.add_row(str(i), *(_fmt(r[a]) for a in axes), *([str(r["gpus"])] if "gpus" not in axes else []), _plan(r),
                  f"{r['step_time_s']:.3f}", f"{r['tokens_per_s']:,.0f}", f"{r['time_to_train_s'] / 86400:.2f}",
                  _fmt(r["cost"]), f"{r['energy_MWh']:.1f}")
    if status.get(OK):
        out.print(t)
    best = res.doc["best"]
    if "fastest_within_budget" in best:
        i = best["fastest_within_budget"]
        out.print(f"fastest within the budget of {res.sweep['objectives']['budget']:,.0f}: "
                  + (f"#{i} ({_plan(rows[i])}, {rows[i]['time_to_train_s'] / 86400:.2f} days, {cost} {_fmt(rows[i]['cost'])})"
                     if i is not None else "none"), markup=False)
    if out_path:
        err.print(f"wrote {out_path}", markup=False)
    if plot:
        err.print(f"wrote {plot}", markup=False)
