"""Plotly figures for the HTML report, each built from the JSON a command prints with --json.

Building from the JSON (not from live objects) is what lets `distscope report RESULT.json` redraw a
saved result exactly as `--report` drew it. plotly is imported inside each function: the core runs
without it (optional extra `distscope[report]`).
"""

from __future__ import annotations

from typing import Any

BREAKDOWN = ("compute", "bubble", "tp", "cp", "ep", "pp", "dp", "optimizer")
GiB = 2**30


def breakdown(plans: list[tuple[str, dict[str, float]]], title: str) -> Any:
    """Stacked step-time breakdown (exposed seconds) for each labelled plan."""
    import plotly.graph_objects as go

    fig = go.Figure()
    labels = [label for label, _ in plans]
    for key in BREAKDOWN:
        fig.add_bar(name=key, x=labels, y=[bd.get(key, 0.0) for _, bd in plans])
    fig.update_layout(barmode="stack", title=title, yaxis_title="seconds per step (exposed)")
    return fig


def memory(plans: list[tuple[str, dict[str, float]]], capacity_bytes: float, usable_bytes: float) -> Any:
    """Memory per GPU by term for each plan, against the capacity (usable less headroom) and usable."""
    import plotly.graph_objects as go

    fig = go.Figure()
    labels = [label for label, _ in plans]
    for key in ("weights", "grads", "optimizer", "activations", "workspace"):
        fig.add_bar(name=key, x=labels, y=[terms.get(key, 0.0) / GiB for _, terms in plans])
    for y, name, dash in ((capacity_bytes, "capacity (usable less headroom)", "dash"), (usable_bytes, "usable", "dot")):
        fig.add_scatter(x=labels, y=[y / GiB] * len(labels), mode="lines", name=name, line={"dash": dash})
    fig.update_layout(barmode="stack", title="Memory per GPU (worst pipeline stage)", yaxis_title="GiB")
    return fig


def timeline(rows: list[dict[str, Any]], step_s: float | None) -> Any:
    """One step of the simulated pipeline: a bar per op, one lane per (rank, compute|comm)."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for track, color in (("compute", "#4c78a8"), ("comm", "#f58518")):
        sel = [r for r in rows if r["track"] == track]
        fig.add_bar(name=track, orientation="h", marker_color=color,
                    y=[f"rank {r['rank']} {track}" for r in sel], base=[r["start_s"] for r in sel],
                    x=[r["end_s"] - r["start_s"] for r in sel], hovertext=[r["name"] for r in sel])
    title = "One step, simulated (symmetric ranks)" + (f": {step_s:.3f} s" if step_s else "")
    fig.update_layout(barmode="overlay", title=title, xaxis_title="seconds", yaxis={"autorange": "reversed"},
                      height=max(300, 40 * len({(r["rank"], r["track"]) for r in rows}) + 120))
    return fig


def comm_volume(per_group: dict[str, float]) -> Any:
    import plotly.graph_objects as go

    names = sorted(per_group, key=lambda k: -per_group[k])
    fig = go.Figure(go.Bar(x=names, y=[per_group[k] / GiB for k in names]))
    fig.update_layout(title="Communication per step per rank, by process group", yaxis_title="GiB")
    return fig


def predicted_vs_measured(rows: list[dict[str, Any]]) -> Any:
    """validate: each row's prediction against its measurement, with ±10% and ±20% bands."""
    import plotly.graph_objects as go

    pts = [r for r in rows if r.get("predicted_step_time_s") is not None]
    lo = min([r["measured_step_time_s"] for r in pts] + [1e-3]) * 0.8
    hi = max([r["measured_step_time_s"] for r in pts] + [1e-3]) * 1.25
    fig = go.Figure()
    for band, color in ((0.2, "rgba(200,200,200,0.3)"), (0.1, "rgba(150,150,150,0.3)")):
        fig.add_scatter(x=[lo, hi, hi, lo], y=[lo * (1 - band), hi * (1 - band), hi * (1 + band), lo * (1 + band)],
                        fill="toself", mode="none", fillcolor=color, name=f"±{int(100 * band)}%")
    fig.add_scatter(x=[lo, hi], y=[lo, hi], mode="lines", name="predicted = measured", line={"color": "black"})
    fig.add_scatter(x=[r["measured_step_time_s"] for r in pts], y=[r["predicted_step_time_s"] for r in pts],
                    mode="markers", name="runs", text=[f"{r['run_id']}: {r['error_pct']:+.1f}%" for r in pts])
    fig.update_layout(title="Predicted vs measured step time", xaxis={"type": "log", "title": "measured s"},
                      yaxis={"type": "log", "title": "predicted s"})
    return fig


def calibration(points: list[dict[str, Any]], fits: dict[str, dict[str, float]]) -> Any:
    """measure calibrate: measured times against each op's fitted α + β·S line (log-log)."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for op, fit in sorted(fits.items()):
        pts = sorted((p for p in points if p["op"] == op), key=lambda p: p["bytes"])
        if pts:
            fig.add_scatter(x=[p["bytes"] for p in pts], y=[p["time_s"] for p in pts], mode="markers",
                            name=f"{op} measured")
        sizes = [p["bytes"] for p in pts] or [fit.get("min_bytes", 1), fit.get("max_bytes", 2)]
        fig.add_scatter(x=sizes, y=[fit["alpha_s"] + fit["beta_s_per_byte"] * s for s in sizes], mode="lines",
                        name=f"{op} fit (max err {100 * fit.get('max_rel_err', 0):.0f}%)")
    fig.update_layout(title="Collective time: measured points and the fitted α-β line",
                      xaxis={"type": "log", "title": "bytes"}, yaxis={"type": "log", "title": "seconds"})
    return fig
