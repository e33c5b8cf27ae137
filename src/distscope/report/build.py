"""Turn a command's JSON result into report sections (used by --report and `distscope report`).

The kind of result is read from its keys (or an explicit "kind"): estimate, plan, validate, simulate,
calibration. A JSON that is none of these is a one-line error.
"""

from __future__ import annotations

from typing import Any

from distscope.errors import DistscopeError
from distscope.report import figures as F
from distscope.report.html import Section, table

KINDS = ("estimate", "plan", "validate", "simulate", "calibration")


def kind_of(d: Any) -> str:
    if not isinstance(d, dict):
        raise DistscopeError(f"report: expected a JSON object from a distscope command, got {type(d).__name__}")
    if d.get("kind") in KINDS:
        return str(d["kind"])
    if d.get("schema") == "distscope.system_profile/1":  # a saved profile: its fits, without the points
        return "calibration"
    if "best" in d and "top" in d:
        return "plan"
    if "rows" in d and "mape_pct" in d:
        return "validate"
    if "breakdown_s" in d and "memory_breakdown_bytes" in d:
        return "estimate"
    if "profile" in d and "points" in d:
        return "calibration"
    if "step_time_s" in d and "ranks" in d:
        return "simulate"
    raise DistscopeError("report: this JSON is not the --json output of estimate, plan, validate, simulate or "
                         f"measure calibrate (keys: {', '.join(sorted(d)[:8])})")


def _step(d: dict[str, Any], sections: list[Section]) -> None:
    view = d.get("step_view") or {}
    if view.get("timeline"):
        sections.append(Section("Pipeline timeline of one step", F.timeline(view["timeline"], view.get("simulated_step_s"))))
    if view.get("comm_bytes_per_group"):
        sections.append(Section("Communication volume per parallel group", F.comm_volume(view["comm_bytes_per_group"])))
    if view.get("skipped"):
        sections.append(Section("Pipeline timeline", html=f"<p>{view['skipped']}</p>"))


def _label(p: dict[str, Any], i: int) -> str:
    return f"#{i} tp{p['tp']} pp{p['pp']} vp{p['vp']} cp{p['cp']} dp{p['dp']} mb{p['micro_batch']}"


def sections(d: Any) -> tuple[str, list[Section]]:
    kind = kind_of(d)
    out: list[Section] = []
    try:
        if kind == "estimate":
            out.append(Section("Where the step goes", F.breakdown([("plan", d["breakdown_s"])],
                                                                  f"{d['model']}: {d['step_time_s']:.3f} s per step")))
            out.append(Section("Memory per GPU", F.memory([("plan", d["memory_breakdown_bytes"])], d["capacity_bytes"],
                                                          d["usable_bytes"])))
            _step(d, out)
            return f"distscope estimate: {d['model']} on {d['gpus']} GPUs of {d['cluster']}", out
        if kind == "plan":
            top = d["top"]
            labelled = [(_label(c, i), c) for i, c in enumerate(top, 1)]
            out.append(Section(f"Top {len(top)} plans: step-time breakdown",
                               F.breakdown([(lab, c["breakdown_s"]) for lab, c in labelled], "Exposed seconds per step")))
            out.append(Section("Memory per GPU", F.memory([(lab, c["memory_breakdown_bytes"]) for lab, c in labelled],
                                                          d["capacity_bytes"], d["usable_bytes"])))
            _step(d, out)
            out.append(Section("Why #1 wins", html=f"<p>{d.get('why', '')}</p>"))
            return f"distscope plan: {d['model']} on {d['gpus']} GPUs of {d['cluster']}", out
        if kind == "validate":
            out.append(Section("Predicted vs measured", F.predicted_vs_measured(d["rows"])))
            out.append(Section("Rows", html=table(d["rows"], ["run_id", "measured_step_time_s", "predicted_step_time_s",
                                                             "error_pct"])))
            return f"distscope validate: mean abs error {d['mape_pct'] or 0:.2f}%", out
        if kind == "simulate":
            _step(d, out)
            out.append(Section("Ranks", html=table(d["ranks"][:64], ["rank", "finish_s", "compute_s", "exposed_comm_s"])))
            return f"distscope simulate: {d['step_time_s']:.4f} s per step", out
        prof = d.get("profile", d)
        fits = {f"{lvl}/{op}": fit for lvl, ops in prof["levels"].items() for op, fit in ops.items()}
        points = [{**p, "op": f"{p.get('level', 'default')}/{p['op']}"} for p in d.get("points", [])]
        out.append(Section("Calibration: measured vs fitted", F.calibration(points, fits)))
        if not points:
            out.append(Section("Fits only", html="<p>A saved profile holds the fitted lines, not the measured points: "
                                                 "use <code>measure calibrate --report</code> to draw both.</p>"))
        return f"distscope measure calibrate: {prof.get('name', '')}", out
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        if isinstance(exc, DistscopeError):
            raise
        raise DistscopeError(f"report: the {kind} JSON is incomplete or malformed ({type(exc).__name__}: {exc})") from None
