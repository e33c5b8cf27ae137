"""`distscope report RESULT.json -o FILE.html`, and the --report option of other commands."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer


def check_report(path: str | Path | None, field: str = "--report") -> None:
    """Before the work a command does: the report (`field`) needs plotly and a .html file name (one-line errors)."""
    if path is None:
        return
    from distscope.errors import DistscopeError
    from distscope.report.html import _plotly

    if Path(path).suffix.lower() not in (".html", ".htm"):
        raise DistscopeError(f"{field}={str(path)!r} must end in .html")
    _plotly()


def write_report(result: dict[str, Any], path: str | Path) -> None:
    """Write `result` (a command's --json object) as a self-contained HTML report; say where on stderr."""
    from distscope.report.build import sections
    from distscope.report.console import err
    from distscope.report.html import _plotly, write_html

    _plotly()  # plotly missing: one line naming the extra, before any figure is built
    title, parts = sections(result)
    write_html(path, title, parts)
    err.print(f"report written to {path}", markup=False)


def report_cmd(
    result: Annotated[Path, typer.Argument(help="A JSON result saved from estimate, plan, validate or simulate with "
                                                 "--json (add --report there to include the simulated timeline).")],
    out: Annotated[str, typer.Option("--out", "-o", help="HTML file to write.")],
) -> None:
    """Draw a saved --json result as a self-contained HTML report (plotly, no network needed to open it)."""
    from distscope.userfile import read_json

    check_report(out, "--out")
    write_report(read_json(result, "result"), out)
