"""Pareto plots of a sweep (plotly figures in one HTML page written by distscope.report.html)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from distscope.errors import DistscopeError
from distscope.explore.point import OK


def check_plot_path(path: str) -> None:
    p = Path(path)
    if not path.strip() or not p.name.lower().endswith(".html"):
        raise DistscopeError(f"--plot={path!r} must be an .html file path")
    if p.exists() and not p.is_file():
        raise DistscopeError(f"--plot={path!r} exists and is not a regular file")
    if not p.parent.is_dir():
        raise DistscopeError(f"--plot={path!r}: directory {str(p.parent)!r} does not exist")


def _hover(r: dict[str, Any], axes: list[str]) -> str:
    parts = [f"#{r['index']}", *(f"{a}={r[a]}" for a in axes),
             f"tp{r['tp']} pp{r['pp']} vp{r['vp']} cp{r['cp']} dp{r['dp']} mb{r['micro_batch']} zero{r['zero_stage']}",
             f"compression {r['compression']}", f"step {r['step_time_s']:.3f} s"]
    return "<br>".join(parts)


def figures(doc: dict[str, Any], axes: list[str]) -> list[tuple[str, Any]]:
    """(title, plotly figure) for time vs cost and time vs GPUs, the front drawn over every feasible point."""
    try:
        import plotly.graph_objects as go
    except ImportError:
        raise DistscopeError("--plot needs plotly: pip install 'distscope[report]'") from None
    rows = [r for r in doc["rows"] if r["status"] == OK]
    out = []
    for front, ykey, ytitle in (("time_cost", "cost", "cost (price × GPU-hours)"), ("time_gpus", "gpus", "GPUs")):
        on = set(doc["pareto"][front])
        fig = go.Figure()
        fig.add_trace(go.Scatter(x=[r["time_to_train_s"] / 86400 for r in rows], y=[r[ykey] for r in rows],
                                 mode="markers", name="feasible points", marker={"color": "#bbbbbb"},
                                 text=[_hover(r, axes) for r in rows], hoverinfo="text"))
        fr = sorted((r for r in rows if r["index"] in on), key=lambda r: (r["time_to_train_s"], r[ykey]))
        fig.add_trace(go.Scatter(x=[r["time_to_train_s"] / 86400 for r in fr], y=[r[ykey] for r in fr],
                                 mode="lines+markers", name="Pareto front", line={"shape": "hv"},
                                 text=[_hover(r, axes) for r in fr], hoverinfo="text"))
        fig.update_layout(xaxis_title="days to train", yaxis_title=ytitle, template="plotly_white")
        out.append((f"time vs {ykey}", fig))
    return out


def write_plot(path: Path, doc: dict[str, Any], axes: list[str]) -> None:
    from distscope.report.html import Section, table, write_html

    front = [doc["rows"][i] for i in doc["pareto"]["time_cost"]]
    cols = ["index", *axes, "gpus", "tp", "pp", "vp", "cp", "dp", "micro_batch", "zero_stage", "compression",
            "step_time_s", "tokens_per_s", "time_to_train_s", "cost", "energy_MWh"]
    sections = [Section(title=t, figure=f) for t, f in figures(doc, axes)]
    sections.append(Section(title="Pareto front, time vs cost", html=table(front, list(dict.fromkeys(cols)))))
    write_html(path, "distscope explore", sections)
