"""`distscope trace ...`: inspect and generate Chakra execution traces."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from distscope import scenario as S

if TYPE_CHECKING:
    from distscope.trace.traceset import TraceSet

trace_app = typer.Typer(help="Chakra execution traces: inspect and generate.", no_args_is_help=True)


@trace_app.command("info")
def info(
    target: Annotated[str, typer.Argument(help="Trace directory with one trace, or PREFIX of PREFIX.<rank>.et.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Ranks, node counts by kind, collectives and process groups of a trace set."""
    from distscope.report.progress import progress
    from distscope.sim.cli import _resolve_prefix
    from distscope.trace.chakra_io import read_traces, trace_files

    prefix = _resolve_prefix(target)
    with progress(len(trace_files(prefix)), "reading traces") as advance:
        traces = read_traces(prefix, on_rank=advance)
    kinds: Counter[str] = Counter()
    colls: Counter[str] = Counter()
    for graph in traces.graphs.values():
        for node in graph.nodes:
            kinds[node.kind.value] += 1
            if node.comm_kind is not None:
                colls[node.comm_kind.value] += 1
    out = {
        "ranks": traces.num_ranks,
        "nodes": sum(kinds.values()),
        "by_kind": dict(sorted(kinds.items())),
        "collectives": dict(sorted(colls.items())),
        "process_groups": len(traces.process_groups),
    }
    if as_json:
        sys.stdout.write(json.dumps(out) + "\n")
        return
    for key, value in out.items():
        typer.echo(f"{key}: {value}")


@trace_app.command("generate")
@S.with_flags(S.WorkloadFlags, S.SystemFlags, S.PlanFlags)
def generate(
    workload: S.WorkloadFlags,
    system: S.SystemFlags,
    plan: S.PlanFlags,
    out: Annotated[str, typer.Option("-o", "--out", help="Directory to write the traces into.")],
    steps: Annotated[int, typer.Option("--steps", help="Consecutive steps in one trace (only --schedule 2bw, which has no flush).")] = 1,
    prefix: Annotated[str, typer.Option("--prefix", help="File prefix: PREFIX.<rank>.et.")] = "step",
    symmetric: Annotated[
        bool,
        typer.Option(
            "--symmetric/--full",
            help="--symmetric: one trace per pipeline stage (its ranks are equivalent) plus manifest.json; "
            "--full: one trace per rank.",
        ),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print a one-line JSON summary.")] = False,
) -> None:
    """Write Chakra execution traces of one training step of a plan (the same flags and defaults as
    `distscope estimate`)."""

    from distscope.errors import DistscopeError
    from distscope.report.estimate_table import plan_dict
    from distscope.report.progress import progress
    from distscope.trace.builder import build_traces, traced_ranks
    from distscope.trace.from_plan import step_spec
    from distscope.userfile import out_path
    from distscope.workload.module_graph import is_module_ref

    out_dir = out_path(out, "--out")
    if steps < 1:
        raise DistscopeError(f"--steps={steps} must be >= 1")
    from distscope.workload.embedding import is_dlrm_ref

    if is_dlrm_ref(workload.model):
        from distscope.model.dlrm_cli import dlrm_step_traces

        if steps != 1 or symmetric:
            raise DistscopeError(("--symmetric" if symmetric else f"--steps={steps}") + ": a recommendation model's "
                                 "ranks hold different tables; one step, one trace per rank (--full)")
        traces, fields = dlrm_step_traces(workload, system, plan)
        _write(out_dir, prefix, traces, symmetric=False, as_json=as_json, degrees=f"dp={traces.num_ranks}",
               fields=fields)
        return
    if is_module_ref(workload.model):
        from distscope.model.module_cli import module_step

        if steps != 1:
            raise DistscopeError(f"--steps={steps}: a torch module's step has a flush; one step per trace")
        step, fields = module_step(workload, system, plan)
        degrees = step.degrees
    else:
        sc = S.build_scenario(workload, system, plan)
        step = step_spec(sc.spec, sc.shape, sc.cluster, sc.plan, steps=steps, software=sc.software)
        degrees, fields = sc.plan.degrees(), plan_dict(sc.plan)
    with progress(traced_ranks(step, symmetric), "building traces") as advance:
        traces = build_traces(step, symmetric=symmetric, on_rank=advance)
    _write(out_dir, prefix, traces, symmetric=symmetric, as_json=as_json, degrees=degrees, fields=fields)


def _write(out_dir: Path, prefix: str, traces: TraceSet, *, symmetric: bool, as_json: bool, degrees: str,
           fields: dict[str, Any]) -> None:
    """Write a trace set as Chakra files and print its summary."""
    from distscope.report.progress import progress
    from distscope.trace.chakra_io import write_symmetric, write_traces
    from distscope.userfile import check_writable_dir

    check_writable_dir(out_dir, "-o")
    with progress(len(traces.graphs), f"writing trace files to {out_dir}") as advance:
        if symmetric:
            write_symmetric(out_dir, traces, prefix=prefix, on_rank=advance)
        else:
            write_traces(out_dir / prefix, traces, on_rank=advance)
    summary = {
        "out": str(out_dir),
        "ranks": traces.num_ranks,
        "files": len(traces.graphs),
        "nodes": sum(len(g.nodes) for g in traces.graphs.values()),
        "symmetric": symmetric,
        "plan": degrees,
        "plan_fields": fields,
    }
    if as_json:
        sys.stdout.write(json.dumps(summary) + "\n")
        return
    for key, value in summary.items():
        typer.echo(f"{key}: {value}")


@trace_app.command("capture", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def capture_cmd(
    ctx: typer.Context,
    out_arg: Annotated[str, typer.Option("--out", "-o", help="Folder for the traces (created; earlier capture files in it are replaced).")],
    step: Annotated[
        int | None, typer.Option(help="Step to capture: the one that starts when the N-th optimizer.step() returns "
                                 "(0: the first). Default: --warmup + --timed-steps.")
    ] = None,
    warmup: Annotated[
        int, typer.Option(help="Steps (optimizer.step() calls) left out of the unprofiled timing: start-up, first iterations.")
    ] = 2,
    timed_steps: Annotated[
        int, typer.Option(help="Steps timed without the profiler before the captured one (steps after it are timed too).")
    ] = 3,
    profiled_steps: Annotated[
        int, typer.Option(help="Profile this many consecutive steps from --step and replay the median one (by its "
                          "slowest rank's profiled time): a host disturbance during one step is not replayed.")
    ] = 3,
    dims: Annotated[
        str, typer.Option(help="Explicit group labels, e.g. 'tp=0,1|2,3;dp=0,2|1,3' (DeviceMesh dim names are used automatically).")
    ] = "",
    timeout_s: Annotated[float, typer.Option(help="Kill the job (torchrun and its workers) after this many seconds.")] = 1800.0,
    retries: Annotated[
        int, typer.Option(help="Run the job again, this many times at most, when it fails with no rank exiting through "
                          "Python: a crash in native code (e.g. the profiler's SIGABRT), not an error of the script.")
    ] = 1,
    convert: Annotated[
        bool, typer.Option("--convert/--no-convert", help="Also convert with mlc-chakra's own converter into OUT/chakra/.")
    ] = True,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as one JSON object.")] = False,
) -> None:
    """Capture one step of COMMAND (after '--', e.g. torchrun --nproc-per-node 4 train.py) as Chakra ET.

    No change to the script: every worker records its host execution trace and Kineto trace for the
    step, plus the process group of each collective; distscope links them and writes OUT/step.<rank>.et.
    """
    import signal

    from rich.console import Console

    from distscope.errors import DistscopeError
    from distscope.trace.capture_files import (
        choose_profiled_step,
        clear,
        postprocess,
        ranks_that_exited,
        ranks_with_traces,
    )
    from distscope.trace.capture_launch import capture_env, run_job
    from distscope.trace.chakra_io import chakra
    from distscope.userfile import out_path

    if warmup < 0:
        raise DistscopeError(f"--warmup={warmup} must be >= 0")
    if timed_steps < 0:
        raise DistscopeError(f"--timed-steps={timed_steps} must be >= 0")
    step = warmup + timed_steps if step is None else step
    if step < 0:
        raise DistscopeError(f"--step={step} must be >= 0")
    if profiled_steps < 1:
        raise DistscopeError(f"--profiled-steps={profiled_steps} must be >= 1")
    if retries < 0:
        raise DistscopeError(f"--retries={retries} must be >= 0")
    if not ctx.args:
        raise DistscopeError("command is empty: give it after '--', e.g. -- torchrun --nproc-per-node 4 train.py")
    out = out_path(out_arg, "--out")
    chakra()  # the capture is written as Chakra ET: say so before the job runs, not after
    out.mkdir(parents=True, exist_ok=True)
    for attempt in range(retries + 1):
        clear(out)
        rc = run_job(ctx.args, capture_env(out, step, dims, warmup, profiled_steps), timeout_s)
        why = f"signal {signal.Signals(-rc).name}" if rc < 0 else f"code {rc}"
        if rc == 0 or ranks_that_exited(out) or attempt == retries:
            break
        print(f"distscope: the job exited with {why} and none of its ranks exited through Python (a crash in native "
              f"code, or a kill); capturing again (retry {attempt + 1} of {retries})", file=sys.stderr)
    choose_profiled_step(out)
    if rc != 0:
        code = 128 + -rc if rc < 0 else rc
        ranks = ranks_with_traces(out)
        print(
            f"distscope: error: the job exited with {why}; partial capture left in {str(out)!r} "
            f"(ranks with traces: {ranks or 'none'})",
            file=sys.stderr,
        )
        raise typer.Exit(code=code)
    console = Console(stderr=True)
    if not ranks_with_traces(out):
        raise DistscopeError(f"the job ended before step {step} (--step, default --warmup + --timed-steps = "
                             f"{warmup} + {timed_steps}): it needs at least {step + 1} optimizer.step() calls "
                             f"({step + profiled_steps} for all {profiled_steps} --profiled-steps); run "
                             "more steps or lower --warmup/--timed-steps")
    with console.status("linking and converting traces", spinner="dots"):
        summary = postprocess(out, convert=convert)
    if as_json:
        sys.stdout.write(json.dumps(summary.to_json()) + "\n")
        return
    typer.echo(f"captured step {summary.step} of {summary.world_size} ranks into {out}/{'step'}.<rank>.et")
    off = summary.start_offset_s_by_rank
    typer.echo(f"profiled step: {summary.step_s * 1e3:.2f} ms (first rank's start to last rank's end; per rank "
               + ", ".join(f"r{r} {s * 1e3:.1f}" + (f" from +{off[r] * 1e3:.1f}" if off.get(r) else "")
                           for r, s in sorted(summary.step_s_by_rank.items())) + ")")
    if len(summary.profiled_steps_s) > 1:
        typer.echo("profiled steps (slowest rank): " + ", ".join("-" if t is None else f"{t * 1e3:.1f} ms"
                                                                 for t in summary.profiled_steps_s)
                   + f"; replayed the median one, step {summary.step}")
    unprof = summary.unprofiled_step_s
    if unprof is None:
        typer.echo("no step was timed without the profiler (the job ended right after the captured step)")
    else:
        n = len(summary.unprofiled_steps_s)
        typer.echo(f"unprofiled step: {unprof * 1e3:.2f} ms (median of {n} timed steps, "
                   f"{min(summary.unprofiled_steps_s) * 1e3:.2f}-{max(summary.unprofiled_steps_s) * 1e3:.2f}); "
                   f"profiling made the captured step {summary.step_s / unprof:.2f}x as long")
    for group, ops in summary.comm_bytes_by_group.items():
        typer.echo(f"  {group}: " + ", ".join(f"{op} {b:,} B" for op, b in sorted(ops.items())) + " (all ranks)")
    if summary.converted:
        typer.echo(f"mlc-chakra converter output: {out}/chakra/step.<rank>.et")
