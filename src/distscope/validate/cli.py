"""`distscope validate FILE.csv`: predict each published run and report the error."""

from __future__ import annotations

from typing import Annotated

import typer


def validate_cmd(
    csv_file: Annotated[str, typer.Argument(help="CSV with the columns of data/validation/published_runs.csv.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object instead of a table.")] = False,
    profile: Annotated[str | None, typer.Option("--profile", help="System profile JSON from `distscope measure calibrate`, applied to every row's cluster.")] = None,
    report: Annotated[str | None, typer.Option("--report", help="Also write a self-contained HTML report (plotly) to this file.")] = None,
) -> None:
    """Predict every row's step time (choosing `auto` cells), print each row's error and the summary."""
    from pathlib import Path

    from rich.table import Table

    from distscope.measure.profile import load_profile
    from distscope.report.cli import check_report
    from distscope.report.console import err, out, print_json
    from distscope.validate.harness import summary, validate_file

    check_report(report)
    prof = load_profile(Path(profile)) if profile else None
    with err.status("predicting rows ...", spinner="dots"):
        results = validate_file(csv_file, prof)
    s = summary(results)
    if report:
        from distscope.report.cli import write_report

        write_report(s, report)
    if as_json:
        print_json(s)
        _exit_on_failures(s)
        return
    t = Table(title=f"{csv_file}: predicted vs measured step time")
    for col in ("run_id", "measured s", "predicted s", "error", "chosen plan"):
        t.add_column(col, justify="right" if col != "run_id" and col != "chosen plan" else "left")
    for r in results:
        p = r.plan
        chosen = "" if p is None else (
            f"mb={p.micro_batch} sp={int(p.sp)} do={int(p.distributed_optimizer)} rc={p.recompute.value}"
            + (f"/{p.recompute_layers}" if p.recompute_layers else "")
            + f" ov={','.join(sorted(d.value for d in p.overlap)) or 'none'} attn={p.attention.value}")
        pred = "—" if r.predicted_step_time_s is None else f"{r.predicted_step_time_s:.3f}"
        e = "—" if r.error_pct is None else f"{r.error_pct:+.1f}%"
        t.add_row(r.run_id, f"{r.measured_step_time_s:.3f}", pred, e, chosen)
    out.print(t)
    for r in results:
        if r.error:
            out.print(f"[yellow]problem[/yellow] {r.error}")
    errors = (f" · mean abs error {s['mape_pct']:.2f}% · max {s['max_ape_pct']:.2f}%"
              if s["mape_pct"] is not None else "")
    out.print(f"rows predicted: {s['predicted_rows']}, failed: {s['failed_rows']}{errors}")
    _exit_on_failures(s)


def _exit_on_failures(s: dict) -> None:
    """A row that could not be predicted is a failed check: exit 1 after everything was printed."""
    if s["failed_rows"]:
        raise typer.Exit(1)
