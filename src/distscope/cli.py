"""The `distscope` command line. Each verb lives next to its implementation; this file only wires them.

Sub-command modules must not import torch at import time (the core runs without torch): import it
inside the command function.
"""

from __future__ import annotations

import functools
import os
import sys
from typing import Annotated, Any

import typer
import typer.exceptions

from distscope.compress.cli import app as compress_app
from distscope.errors import DistscopeError
from distscope.explore.cli import explore_cmd
from distscope.fabric.cli import app as fabric_app
from distscope.measure.cli import app as measure_app
from distscope.model.cli import estimate_cmd
from distscope.report.catalog_cli import clusters_cmd, models_cmd
from distscope.report.cli import report_cmd
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


def _version(value: bool) -> None:
    if value:
        from distscope import __version__

        print(f"distscope {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")] = False,
) -> None:
    """Performance engineering for distributed deep learning: estimate, simulate, plan, measure, compress."""


app.command("estimate")(estimate_cmd)
app.command("plan")(plan_cmd)
app.command("explore")(explore_cmd)
app.command("simulate")(simulate_cmd)
app.command("validate")(validate_cmd)
app.command("models")(models_cmd)
app.command("clusters")(clusters_cmd)
app.command("report")(report_cmd)
app.add_typer(measure_app, name="measure")
app.add_typer(compress_app, name="compress")
app.add_typer(trace_app, name="trace")
app.add_typer(serve_app, name="serve")
app.add_typer(fabric_app, name="fabric")




def _click_classes() -> tuple[tuple[type[Exception], ...], tuple[type[BaseException], ...]]:
    """Usage-error and abort classes of click, when installed: typer < 0.2x uses click, typer >= 0.2x
    vendors its own copy (typer._click) and does not install click, so a light install has none."""
    try:
        import click
    except ImportError:
        return (), ()
    return (click.exceptions.ClickException,), (click.exceptions.Abort,)


# Usage errors come from click, or from the click that typer >= 0.2x vendors; both have format_message().
_CLICK_USAGE, _CLICK_ABORT = _click_classes()
_USAGE_ERRORS: tuple[type[Exception], ...] = _CLICK_USAGE + tuple(
    t for t in (getattr(typer.exceptions, "TyperException", None),) if t is not None
)
_ABORTS: tuple[type[BaseException], ...] = (*_CLICK_ABORT, typer.Abort, KeyboardInterrupt)


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


@functools.cache
def _command() -> Any:
    """The click command typer builds from `app` (once per process: building it costs ~30 ms, more than
    most commands, and in-process callers such as the fuzz tests run thousands)."""
    return typer.main.get_command(app)


def main(argv: list[str] | None = None) -> None:
    """Entry point: bad input becomes one line on stderr and exit code 2, never a traceback.

    Command-line usage errors (click's), unreadable files (OSError) and DistscopeError all print
    `distscope: error: ...` on one line and exit 2, as does a missing optional extra (torch for measure,
    compress, trace capture and serve measure on the light install), with its install hint. Anything else
    is a bug in distscope: one line
    `distscope: internal error: ...` and exit 3 (DISTSCOPE_DEBUG=1 re-raises it with its traceback).
    """
    try:
        rv = _command()(args=argv, standalone_mode=False, prog_name="distscope")
    except DistscopeError as exc:
        _fail(f"distscope: error: {_one_line(str(exc))}", 2)
    except _USAGE_ERRORS as exc:
        ctx = getattr(exc, "ctx", None)
        if type(exc).__name__ == "NoArgsIsHelpError" and ctx is not None:
            print(ctx.get_help(), file=sys.stderr)
            sys.exit(2)
        where = f"{ctx.command_path}: " if ctx is not None else ""
        given = _given_value(getattr(exc, "param", None), sys.argv[1:] if argv is None else argv)
        _fail(f"distscope: error: {where}{_one_line(exc.format_message())}{given}", 2)  # type: ignore[attr-defined]
    except _ABORTS:
        _fail("distscope: interrupted", 130)
    except BrokenPipeError:
        sys.exit(0)  # output piped into e.g. `head`
    except OSError as exc:
        name = exc.filename if exc.filename is not None else ""
        _fail(f"distscope: error: {name}{': ' if name else ''}{_one_line(exc.strerror or str(exc))}", 2)
    except Exception as exc:
        hint = _missing_extra(exc, sys.argv[1:] if argv is None else argv)
        if hint is not None:
            _fail(hint, 2)
        if os.environ.get("DISTSCOPE_DEBUG"):
            raise
        _fail(f"distscope: internal error: {type(exc).__name__}: {_one_line(str(exc))} "
              "(a bug: please report it; DISTSCOPE_DEBUG=1 shows the traceback)", 3)
    if isinstance(rv, int) and rv:
        sys.exit(rv)


# Each optional extra's top-level module -> the extra that installs it (pyproject.toml). The modules that
# import plotly, pyarrow, ray and chakra turn a missing one into their own DistscopeError hint; torch is
# imported in many places inside the measure/compress/capture commands, so its hint is made here, once.
_EXTRA_OF_MODULE = {"torch": "torch", "chakra": "chakra", "plotly": "report", "pyarrow": "parquet", "ray": "ray"}
# The README's advice: torch's CPU build first, so pip never resolves a CUDA wheel.
_TORCH_CPU = ("on a machine without a GPU, install torch's CPU build first, so pip never resolves a CUDA wheel: "
              "pip install torch --index-url https://download.pytorch.org/whl/cpu")


def _missing_extra(exc: BaseException, args: list[str]) -> str | None:
    """The install hint for an optional extra's module that is not installed, or None for any other error."""
    if not isinstance(exc, ModuleNotFoundError):
        return None
    module = (exc.name or "").split(".")[0]
    extra = _EXTRA_OF_MODULE.get(module)
    if extra is None:
        return None
    line = f"distscope: error: {_command_path(args)} needs {module}, which is not installed: pip install 'distscope[{extra}]'"
    return f"{line} ({_TORCH_CPU})" if extra == "torch" else line


def _command_path(args: list[str]) -> str:
    """'`distscope measure collectives`' for the sub-command the arguments name, else 'this command'.

    Read from the Typer apps' registrations: building the click command would evaluate every command's
    annotations, which is more than an error message should depend on."""
    words: list[str] = []
    group: typer.Typer | None = app
    try:
        for a in args:
            if group is None:
                break
            groups = {g.name: g.typer_instance for g in group.registered_groups}
            commands = {c.name or getattr(c.callback, "__name__", "").replace("_", "-") for c in group.registered_commands}
            if a in groups:
                group = groups[a]
            elif a in commands:
                group = None
            else:
                break
            words.append(a)
    except AttributeError:  # a typer that keeps its registrations elsewhere
        words = []
    return f"`distscope {' '.join(words)}`" if words else "this command"


def _given_value(param: object, args: list[str]) -> str:
    """' (got VALUE)' for a rejected option value, so the error names the value as well as the flag."""
    opts = getattr(param, "opts", None) or []
    for i, a in enumerate(args):
        for o in opts:
            if a == o and i + 1 < len(args):
                return f" (got {args[i + 1]!r})"
            if a.startswith(o + "="):
                return f" (got {a[len(o) + 1:]!r})"
    return ""


def _fail(line: str, code: int) -> None:
    print(line, file=sys.stderr)
    sys.exit(code)

