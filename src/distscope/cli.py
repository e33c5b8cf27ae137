"""The `distscope` command line. Each verb lives next to its implementation; this file only wires them.

Sub-command modules must not import torch at import time (the core runs without torch): import it
inside the command function.
"""

from __future__ import annotations

import sys

import typer

from distscope.compress.cli import app as compress_app
from distscope.errors import DistscopeError
from distscope.measure.cli import app as measure_app
from distscope.model.cli import estimate_cmd
from distscope.report.catalog_cli import clusters_cmd, models_cmd
from distscope.search.cli import plan_cmd
from distscope.serve.cli import app as serve_app
from distscope.sim.cli import simulate as simulate_cmd
from distscope.trace.cli import trace_app
from distscope.validate.cli import validate_cmd

app = typer.Typer(
    name="distscope",
    help="Performance engineering for distributed deep learning: estimate, simulate, plan, measure, compress.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command("estimate")(estimate_cmd)
app.command("plan")(plan_cmd)
app.command("simulate")(simulate_cmd)
app.command("validate")(validate_cmd)
app.command("models")(models_cmd)
app.command("clusters")(clusters_cmd)
app.add_typer(measure_app, name="measure")
app.add_typer(compress_app, name="compress")
app.add_typer(trace_app, name="trace")
app.add_typer(serve_app, name="serve")


def main() -> None:
    """Entry point: bad input becomes one line on stderr and exit code 2, never a traceback."""
    try:
        app()
    except DistscopeError as exc:
        print(f"distscope: error: {exc}", file=sys.stderr)
        sys.exit(2)

