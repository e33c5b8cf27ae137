"""`distscope validate FILE...`: predict each published run and report the error; `--cv source` adds
leave-one-source-out cross-validation (validate/cv.py)."""

from __future__ import annotations

from typing import Annotated

import typer


def validate_cmd(
    csv_files: Annotated[list[str], typer.Argument(help="CSVs with the columns of data/validation/published_runs.csv.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object instead of a table.")] = False,
    cv: Annotated[str | None, typer.Option("--cv", help="Cross-validate: refit the global parameters without each group of rows "
                                                         "and predict it (grouping: source).")] = None,
    profile: Annotated[str | None, typer.Option("--profile", help="System profile JSON (`distscope measure calibrate` / `measure kernels`), applied to every row's cluster.")] = None,
    report: Annotated[str | None, typer.Option("--report", help="Also write a self-contained HTML report (plotly) to this file.")] = None,
) -> None:
    """Predict every row's step time (choosing `auto` cells), print each row's error and the summary."""
    from pathlib import Path

    from rich.table import Table

    from distscope.errors import DistscopeError, closest
    from distscope.measure.profile import load_profile
    from distscope.report.cli import check_report
    from distscope.report.console import out, print_json
    from distscope.report.progress import progress
    from distscope.validate.cv import GROUPINGS, cross_validate, cv_work
    from distscope.validate.harness import load_rows, predict_or_fail, summary

    check_report(report)
    if cv is not None and cv not in GROUPINGS:
        raise DistscopeError(f"--cv={cv!r} is not a grouping{closest(cv, GROUPINGS)}; use one of: {', '.join(GROUPINGS)}")
    prof = load_profile(Path(profile)) if profile else None
    loaded = load_rows(csv_files)
    fitted: dict[str, float] = {}
    if cv is not None:
        with progress(cv_work(loaded), "cross-validating") as tick:
            res = cross_validate(loaded, prof, tick)
        results, fitted = res.results, res.fitted
    else:
        with progress(len(loaded.rows), "predicting rows") as tick:
            results = []
            for row, src in loaded.rows:
                results.append(predict_or_fail(row, src, prof))
                tick()
            results = loaded.in_file_order(results)
    s = summary(results, cv=cv is not None)
    if cv is not None:
        s["cv"] = {"grouping": cv, "fitted_on_all_rows": fitted, "folds": res.folds}
    if report:
        from distscope.report.cli import write_report

        write_report(s, report)
    if as_json:
        print_json(s)
        _exit_on_failures(s)
        return
    t = Table(title=f"{', '.join(csv_files)}: predicted vs measured step time")
    cols = ["run_id", "measured s", "predicted s", "error"] + (["cv error"] if cv else []) + ["chosen plan"]
    for col in cols:
        t.add_column(col, justify="left" if col in ("run_id", "chosen plan") else "right")
    for r in results:
        p = r.plan
        chosen = "" if p is None else (
            f"mb={p.micro_batch} sp={int(p.sp)} do={int(p.distributed_optimizer)} rc={p.recompute.value}"
            + (f"/{p.recompute_layers}" if p.recompute_layers else "")
            + f" ov={','.join(sorted(d.value for d in p.overlap)) or 'none'} attn={p.attention.value}")
        pred = "—" if r.predicted_step_time_s is None else f"{r.predicted_step_time_s:.3f}"
        e = "—" if r.error_pct is None else f"{r.error_pct:+.1f}%"
        cells = [r.run_id, f"{r.measured_step_time_s:.3f}", pred, e]
        if cv:
            cells.append("—" if r.cv_error_pct is None else f"{r.cv_error_pct:+.1f}%")
        t.add_row(*cells, chosen)
    out.print(t)
    for r in results:
        if r.error:
            out.print(f"[yellow]problem[/yellow] {r.error}")
    errors = ""
    if s["mape_pct"] is not None:
        if cv is not None and s["cv_mape_pct"] is not None:
            errors = (f" · cross-validated (leave one {cv} out) mean abs error {s['cv_mape_pct']:.2f}%, max "
                      f"{s['cv_max_ape_pct']:.2f}% · in-sample {s['mape_pct']:.2f}%, max {s['max_ape_pct']:.2f}%")
        else:
            errors = f" · mean abs error {s['mape_pct']:.2f}% · max {s['max_ape_pct']:.2f}% (in-sample: see --cv source)"
    out.print(f"rows predicted: {s['predicted_rows']}, failed: {s['failed_rows']}{errors}")
    if fitted:
        out.print("fitted on all rows: " + ", ".join(f"{k}={v:.3f}" for k, v in fitted.items()))
    _exit_on_failures(s)


def _exit_on_failures(s: dict) -> None:
    """A row that could not be predicted is a failed check: exit 1 after everything was printed."""
    if s["failed_rows"]:
        raise typer.Exit(1)
