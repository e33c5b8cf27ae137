"""Plotly figures for the HTML report, each built from the JSON a command prints with --json.

Building from the JSON (not from live objects) is what lets `distscope report RESULT.json` redraw a
saved result exactly as `--report` drew it. plotly is imported inside each function: the core runs
without it (optional extra `distscope[report]`).
"""

from __future__ import annotations

import math
from typing import Any

BREAKDOWN = ("compute", "bubble", "tp", "cp", "ep", "pp", "dp", "optimizer")
GiB = 2**30


def breakdown(plans: list[tuple[str, dict[str, float]]], title: str) -> Any:
    """Stacked step-time breakdown (exposed seconds) for each labelled plan."""
    import plotly.graph_objects as go

    fig = go.Figure()
    labels = [label for label, _ in plans]
    for key in BREAKDOWN:
        ys = [bd.get(key, 0.0) for _, bd in plans]
        if any(y > 0 for y in ys):  # parts that are zero in every plan only clutter the legend
            fig.add_bar(name=key, x=labels, y=ys)
    fig.update_layout(barmode="stack", title=title, yaxis_title="seconds per step (exposed)")
    return fig


def memory(plans: list[tuple[str, dict[str, float]]], capacity_bytes: float, usable_bytes: float) -> Any:
    """Memory per GPU by term for each plan, against the capacity (usable less headroom) and usable."""
    import plotly.graph_objects as go

    fig = go.Figure()
    labels = [label for label, _ in plans]
    for key in ("weights", "grads", "optimizer", "activations", "workspace"):
        fig.add_bar(name=key, x=labels, y=[terms.get(key, 0.0) / GiB for _, terms in plans])
    # full-width reference lines (a line trace between bar centres vanishes when there is one bar); the
    # shaded band between them is the headroom (and any --max-memory cap)
    fig.add_hline(y=usable_bytes / GiB, line={"color": "#d62728", "width": 2}, annotation_position="top left",
                  annotation_text=f"usable {usable_bytes / GiB:.1f} GiB (driver total)")
    fig.add_hline(y=capacity_bytes / GiB, line={"color": "#d62728", "dash": "dash", "width": 2},
                  annotation_position="bottom left",
                  annotation_text=f"capacity {capacity_bytes / GiB:.1f} GiB (usable less headroom)")
    if usable_bytes > capacity_bytes:
        fig.add_hrect(y0=capacity_bytes / GiB, y1=usable_bytes / GiB, fillcolor="#d62728", opacity=0.1, line_width=0)
    fig.update_layout(barmode="stack", title="Memory per GPU (worst pipeline stage)", yaxis_title="GiB",
                      yaxis_range=[0, 1.08 * max([usable_bytes / GiB] + [sum(t.values()) / GiB for _, t in plans])])
    return fig


TIMELINE_COLORS = {"forward": "#4c78a8", "backward": "#72b7b2", "optimizer": "#9d755d", "compute": "#4c78a8",
                   "tp": "#f58518", "cp": "#e45756", "ep": "#eeca3b", "dp": "#b279a2", "pp": "#54a24b"}


def timeline(rows: list[dict[str, Any]], step_s: float | None) -> Any:
    """One step of the simulated pipeline, one lane per (rank, compute|comm), coloured by what runs:
    forward/backward/optimizer compute, or the parallel group of a transfer. Each category is one SVG
    path of thick segments (10^4 ops stay light); hover shows the op."""
    import plotly.graph_objects as go

    fig = go.Figure()
    lanes = list(dict.fromkeys(f"rank {r['rank']} {r['track']}" for r in rows))
    cats = list(dict.fromkeys(r.get("category", r["track"]) for r in rows))
    for cat in cats:
        xs: list[float | None] = []
        ys: list[str | None] = []
        names: list[str | None] = []
        for r in rows:
            if r.get("category", r["track"]) == cat:
                lane = f"rank {r['rank']} {r['track']}"
                xs += [r["start_s"], r["end_s"], None]
                ys += [lane, lane, None]
                names += [r["name"], r["name"], None]
        fig.add_scatter(name=cat, x=xs, y=ys, text=names, mode="lines", connectgaps=False,
                        line={"width": 14, "color": TIMELINE_COLORS.get(cat, "#bab0ac")},
                        hovertemplate="%{text}<br>%{x:.4f} s<extra>" + cat + "</extra>")
    title = "One step, simulated (symmetric ranks)" + (f": {step_s:.3f} s" if step_s else "")
    fig.update_layout(title=title, xaxis_title="seconds into the step",
                      yaxis={"type": "category", "categoryorder": "array", "categoryarray": lanes[::-1]},
                      legend={"orientation": "h", "y": -0.25}, height=max(320, 48 * len(lanes) + 200))
    return fig


def comm_volume(per_rank: dict[str, Any]) -> Any:
    """Bytes per step per GPU in each parallel group, one bar series per representative rank; a flat
    {group: bytes} (an older saved result) is one series."""
    import plotly.graph_objects as go

    if per_rank and not isinstance(next(iter(per_rank.values())), dict):
        per_rank = {"rank": per_rank}
    groups = list(dict.fromkeys(g for v in per_rank.values() for g in v))
    fig = go.Figure([go.Bar(name=label, x=groups, y=[vol.get(g, 0.0) / GiB for g in groups])
                     for label, vol in per_rank.items()])
    fig.update_layout(barmode="group", title="Bytes per step per GPU, by parallel group (nccl-tests convention)",
                      yaxis_title="GiB")
    return fig


def predicted_vs_measured(rows: list[dict[str, Any]]) -> Any:
    """validate: each row's prediction against its measurement, with ±10% and ±20% bands."""
    import plotly.graph_objects as go

    pts = [r for r in rows if r.get("predicted_step_time_s") is not None and (r.get("measured_step_time_s") or 0) > 0]
    vals = [v for r in pts for v in (r["measured_step_time_s"], r["predicted_step_time_s"]) if v > 0] or [1e-3, 1.0]
    lo, hi = min(vals) * 0.7, max(vals) * 1.4  # the data's range, not down to 1 ms
    fig = go.Figure()
    for band, color in ((0.2, "rgba(76,120,168,0.12)"), (0.1, "rgba(76,120,168,0.22)")):
        fig.add_scatter(x=[lo, hi, hi, lo], y=[lo * (1 - band), hi * (1 - band), hi * (1 + band), lo * (1 + band)],
                        fill="toself", mode="none", fillcolor=color, name=f"±{int(100 * band)}%")
    fig.add_scatter(x=[lo, hi], y=[lo, hi], mode="lines", name="predicted = measured",
                    line={"color": "#57606a", "dash": "dot"})
    fig.add_scatter(x=[r["measured_step_time_s"] for r in pts], y=[r["predicted_step_time_s"] for r in pts],
                    mode="markers", name="runs", text=[f"{r['run_id']}: {r['error_pct']:+.1f}%" for r in pts])
    rng = [math.log10(lo), math.log10(hi)]
    fig.update_layout(title="Predicted vs measured step time", height=680,
                      xaxis={"type": "log", "title": "measured s", "range": rng, "constrain": "domain"},
                      yaxis={"type": "log", "title": "predicted s", "range": rng, "scaleanchor": "x"})
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
        ends = [p["bytes"] for p in pts] or [fit.get("min_bytes") or 1024, fit.get("max_bytes") or 1 << 28]
        lo, hi = max(min(ends), 1), max(max(ends), 2)
        sizes = [lo * (hi / lo) ** (i / 60) for i in range(61)]  # a smooth curve in log-log, not point to point
        a, b = fit["alpha_s"], fit["beta_s_per_byte"]
        bw = "∞" if b <= 0 else f"{1 / b / 1e9:.2f} GB/s"
        fig.add_scatter(x=sizes, y=[a + b * s for s in sizes], mode="lines",
                        name=f"{op} fit: α {a * 1e6:.1f} us, 1/β {bw} (max err {100 * fit.get('max_rel_err', 0):.0f}%)")
    fig.update_layout(title="Collective time: measured points and the fitted α-β line",
                      xaxis={"type": "log", "title": "bytes"}, yaxis={"type": "log", "title": "seconds"})
    return fig
