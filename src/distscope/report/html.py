"""One self-contained HTML file per report: plotly charts with plotly.js embedded (opens offline).

`write_html(path, title, sections)`; each Section has a title and a plotly figure, an HTML snippet,
or both. plotly is the optional extra `distscope[report]`.
"""

from __future__ import annotations

import dataclasses
import html
from pathlib import Path
from typing import Any

from distscope.errors import DistscopeError
from distscope.userfile import write_text


@dataclasses.dataclass(frozen=True)
class Section:
    title: str
    figure: Any = None  # a plotly Figure
    html: str = ""  # escaped by the caller


def _plotly() -> Any:
    try:
        import plotly.io as pio
    except ImportError:
        raise DistscopeError("--report needs plotly: pip install 'distscope[report]'") from None
    return pio


def write_html(path: str | Path, title: str, sections: list[Section]) -> None:
    pio = _plotly()
    parts, js = [], True
    for i, s in enumerate(sections):
        parts.append(f"<h2>{html.escape(s.title)}</h2>")
        if s.html:
            parts.append(s.html)
        if s.figure is not None:
            # plotly.js once, inline, in the first chart; the rest reuse it
            parts.append(pio.to_html(s.figure, include_plotlyjs=js, full_html=False, div_id=f"chart{i}",
                                     config={"displaylogo": False}))
            js = False
    doc = ("<!DOCTYPE html><html><head><meta charset='utf-8'>"
           f"<title>{html.escape(title)}</title><style>body{{font-family:sans-serif;margin:2em}}"
           "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}</style>"
           f"</head><body><h1>{html.escape(title)}</h1>{''.join(parts)}</body></html>\n")
    write_text(path, doc, "report")


def table(rows: list[dict[str, Any]], columns: list[str]) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(_fmt(r.get(c)))}</td>" for c in columns) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return "" if v is None else str(v)
