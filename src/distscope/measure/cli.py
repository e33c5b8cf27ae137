"""`distscope measure ...`: collective sweeps, nccl-tests ingestion, calibration, comm logging, stragglers.

torch is imported inside the commands that need it, never at import time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from distscope.errors import DistscopeError
from distscope.measure.result import CollectiveResult

app = typer.Typer(
    help="Measure real communication: sweeps, nccl-tests ingestion, calibration, comm logging.",
    no_args_is_help=True,
)
_console = Console(width=None if sys.stdout.isatty() else 150)
_err = Console(stderr=True)


def _split(values: list[str] | None) -> list[str]:
    return [v.strip() for item in values or [] for v in item.split(",") if v.strip()]


def _under_torchrun() -> bool:
    return all(k in os.environ for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"))


@app.command()
def collectives(
    nproc: Annotated[int, typer.Option(help="Local processes to spawn (ignored under torchrun).")] = 4,
    ops: Annotated[
        list[str] | None,
        typer.Option(
            help="Ops to sweep (repeat or comma list): all_reduce, all_gather, reduce_scatter, all_to_all, "
            "broadcast, send_recv. Default: all."
        ),
    ] = None,
    dtypes: Annotated[list[str] | None, typer.Option(help="torch dtypes (repeat or comma list).")] = None,
    min_bytes: Annotated[int, typer.Option(help="Smallest message, nccl-tests bytes.")] = 1024,
    max_bytes: Annotated[int, typer.Option(help="Largest message, nccl-tests bytes.")] = 1 << 22,
    steps: Annotated[int, typer.Option(help="Size multiplier between points (nccl-tests -f).")] = 4,
    step_bytes: Annotated[
        int, typer.Option(help="Linear step between sizes in bytes (nccl-tests -i); overrides --steps.")
    ] = 0,
    warmup: Annotated[int, typer.Option(help="Untimed calls per point.")] = 3,
    iters: Annotated[int, typer.Option(help="Timed calls per point (min/median/max reported).")] = 10,
    backend: Annotated[
        str, typer.Option(help="gloo or nccl; default nccl when CUDA is present, else gloo.")
    ] = "",
    level: Annotated[str, typer.Option(help="Topology level label stored with each result.")] = "default",
    out: Annotated[Path | None, typer.Option(help="Write results to FILE.json or FILE.csv.")] = None,
    timeout_s: Annotated[float, typer.Option(help="Give up after this many seconds (never hangs).")] = 600.0,
) -> None:
    """Sweep message sizes for real collectives; print time, algbw and busbw (nccl-tests factors)."""
    from distscope.comm.collective import Collective
    from distscope.measure.result import load_results, save_results
    from distscope.measure.tables import results_table

    op_list = [Collective.parse(o, field="ops") for o in _split(ops)] or None
    if out is not None and out.suffix not in (".json", ".csv"):
        raise DistscopeError(f"out={str(out)!r} must end in .json or .csv")
    if backend and backend not in ("gloo", "nccl"):
        raise DistscopeError(f"backend={backend!r} must be gloo or nccl")
    if nproc < 1:
        raise DistscopeError(f"nproc={nproc} must be >= 1")
    from distscope.measure.sweep import SweepConfig

    cfg_kw = dict(
        dtypes=tuple(_split(dtypes) or ["float32"]),
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        step_factor=steps,
        step_bytes=step_bytes,
        warmup=warmup,
        iters=iters,
        level=level,
    )
    cfg = SweepConfig(**cfg_kw, **({"ops": tuple(op_list)} if op_list else {}))  # type: ignore[arg-type]
    if _under_torchrun():
        results = _sweep_in_process(cfg, backend, timeout_s)
        if results is None:  # not rank 0
            return
    else:
        from distscope.measure.launch import SRC_DIR

        with tempfile.TemporaryDirectory(prefix="distscope-sweep-") as tmp:
            tmp_out = Path(tmp) / "results.json"
            argv = [a for a in sys.argv[1:] if a]
            cmd = [
                sys.executable,
                "-m",
                "torch.distributed.run",
                "--standalone",
                f"--nproc-per-node={nproc}",
                "-m",
                "distscope",
                "measure",
                "collectives",
                *_forwarded(argv),
                "--out",
                str(tmp_out),
            ]
            env = dict(
                os.environ, DISTSCOPE_SWEEP_QUIET="1", OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1")
            )
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SRC_DIR), env.get("PYTHONPATH", "")]))
            from distscope.report.progress import enabled

            # With a terminal, the child's stderr goes straight to it, so rank 0 can draw the progress bar.
            live = enabled()
            if live:
                env["DISTSCOPE_PROGRESS"] = "1"
                env.setdefault("PYTHONWARNINGS", "ignore::FutureWarning")  # torch's deprecation notes, once per rank
            try:
                proc = subprocess.run(cmd, env=env, timeout=timeout_s, stdout=subprocess.PIPE,
                                      stderr=None if live else subprocess.PIPE, text=True)
            except subprocess.TimeoutExpired:
                raise DistscopeError(f"timeout_s={timeout_s}: the sweep did not finish in time") from None
            if proc.returncode != 0 or not tmp_out.exists():
                tail = (proc.stderr or "(its output is above)").strip().splitlines()[-5:]
                raise DistscopeError(
                    f"sweep with nproc={nproc} failed (exit {proc.returncode}): {' | '.join(tail)}"
                )
            results = load_results(tmp_out)
    if out is not None:
        save_results(results, out)
    if not os.environ.get("DISTSCOPE_SWEEP_QUIET"):
        _console.print(
            results_table(results, title=f"collectives ({results[0].backend}, {results[0].nranks} ranks)")
        )


def _forwarded(argv: list[str]) -> list[str]:
    """The user's sweep options minus --out/--nproc (the child gets its own --out)."""
    out, skip = [], False
    it = iter(argv[argv.index("collectives") + 1 :] if "collectives" in argv else [])
    for a in it:
        if skip:
            skip = False
            continue
        if a in ("--out", "--nproc"):
            skip = True
            continue
        if a.startswith(("--out=", "--nproc=")):
            continue
        out.append(a)
    return out


def _sweep_in_process(cfg: object, backend: str, timeout_s: float) -> list[CollectiveResult] | None:
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    from distscope.measure.sweep import SweepConfig, run_sweep

    assert isinstance(cfg, SweepConfig)
    backend = backend or ("nccl" if torch.cuda.is_available() else "gloo")
    if backend == "nccl":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group(backend, timeout=timedelta(seconds=min(timeout_s, 300)))
    from distscope.report.progress import progress

    try:
        rank = dist.get_rank()
        if rank != 0:
            os.environ["DISTSCOPE_PROGRESS"] = "0"  # one bar, drawn by rank 0
        with progress(None, f"sweeping collectives ({dist.get_world_size()} ranks, points)") as bar:
            results = run_sweep(cfg, progress=bar.update)
    finally:
        dist.destroy_process_group()
    if rank != 0:
        return None
    out = _out_arg()
    if out is not None:
        from distscope.measure.result import save_results

        save_results(results, out)
    return results


def _out_arg() -> Path | None:
    argv = sys.argv
    for i, a in enumerate(argv):
        if a == "--out" and i + 1 < len(argv):
            return Path(argv[i + 1])
        if a.startswith("--out="):
            return Path(a.split("=", 1)[1])
    return None


@app.command()
def algorithms(
    nproc: Annotated[int, typer.Option(help="Local gloo ranks to spawn (2-4 on this kind of host).")] = 4,
    min_bytes: Annotated[int, typer.Option(help="Smallest message, nccl-tests bytes.")] = 1024,
    max_bytes: Annotated[int, typer.Option(help="Largest message, nccl-tests bytes.")] = 1 << 22,
    steps: Annotated[int, typer.Option(help="Size multiplier between points.")] = 4,
    iters: Annotated[int, typer.Option(help="Timed calls per (size, candidate); the median is kept.")] = 7,
    out: Annotated[Path | None, typer.Option(help="Write the choice table to FILE.json.")] = None,
    timeout_s: Annotated[float, typer.Option(help="Give up after this many seconds (never hangs).")] = 600.0,
) -> None:
    """Time every implementation of all_reduce, all_gather and reduce_scatter (gloo's own and its
    decompositions: measure/algo_choice.py) over message sizes on local gloo ranks, and print which one is
    fastest at each size: the per-op, per-size choice table a Dispatcher applies (MCR-DL)."""
    from rich.table import Table

    from distscope.compress.launch import run_gloo
    from distscope.measure.algo_choice import table_worker
    from distscope.measure.sweep import SweepConfig
    from distscope.report.console import out as console
    from distscope.userfile import write_text

    if not 1 < nproc <= 64:
        raise DistscopeError(f"nproc={nproc} must be in 2..64 (a collective needs two ranks)")
    if min_bytes < 4:
        raise DistscopeError(f"min_bytes={min_bytes}, max_bytes={max_bytes}: need min >= 4 (one float32 element)")
    if out is not None and out.suffix != ".json":
        raise DistscopeError(f"out={str(out)!r} must end in .json")
    # the collectives sweep's own size range and checks (min <= max, steps >= 2, iters >= 1)
    sizes = list(SweepConfig(min_bytes=min_bytes, max_bytes=max_bytes, step_factor=steps, iters=iters).sizes())
    try:
        table = run_gloo(table_worker, nproc, sizes, iters, timeout_s=timeout_s)
    except RuntimeError as exc:
        raise DistscopeError(f"measure algorithms: {exc}") from None
    if out is not None:
        write_text(out, json.dumps(table, indent=1) + "\n", "--out")
    t = Table(title=f"fastest implementation per op and size, {nproc} gloo ranks (median of {iters})")
    t.add_column("op")
    t.add_column("bytes", justify="right")
    t.add_column("choice")
    t.add_column("its time", justify="right")
    t.add_column("gloo's own", justify="right")
    for op, rows in table["seconds"].items():
        for sz, cands in sorted(rows.items(), key=lambda kv: int(kv[0])):
            best = min(cands, key=cands.get)
            t.add_row(op, f"{int(sz):,}", best, f"{cands[best] * 1e6:,.0f} us", f"{cands['gloo'] * 1e6:,.0f} us")
    console.print(t)


@app.command("nccl-tests")
def nccl_tests(
    file: Annotated[Path, typer.Argument(help="Text output of an nccl-tests binary (e.g. all_reduce_perf).")],
    op: Annotated[str, typer.Option(help="Op, when the text does not name its binary.")] = "",
    nranks: Annotated[int, typer.Option(help="Ranks, when the text has no '#  Rank' lines.")] = 0,
    level: Annotated[str, typer.Option(help="Topology level label for these results.")] = "default",
    device: Annotated[str, typer.Option(help="Device name to store with the results.")] = "",
    out: Annotated[Path | None, typer.Option(help="Write results to FILE.json or FILE.csv.")] = None,
) -> None:
    """Parse nccl-tests output into distscope results (same model as `collectives`)."""
    from distscope.comm.collective import Collective
    from distscope.measure.nccl_tests import parse_nccl_tests
    from distscope.measure.result import save_results
    from distscope.measure.tables import results_table
    from distscope.userfile import read_text

    results = parse_nccl_tests(
        read_text(file, "nccl-tests output"),
        op=Collective.parse(op) if op else None,
        nranks=nranks or None,
        level=level,
        source=str(file),
        device=device,
    )
    if out is not None:
        save_results(results, out)
    _console.print(results_table(results, title=f"nccl-tests: {file.name}"))


@app.command()
def calibrate(
    inputs: Annotated[
        list[Path],
        typer.Argument(help="Results (.json/.csv from `collectives`) or nccl-tests text files (.txt/.log)."),
    ],
    out: Annotated[Path, typer.Option(help="System profile JSON to write.")],
    name: Annotated[str, typer.Option(help="Cluster or device name stored in the profile.")] = "measured",
    device: Annotated[str, typer.Option(help="Device description stored in the profile.")] = "",
    stat: Annotated[
        str, typer.Option(help="Time to fit: median (time_s) or min (fastest iteration).")
    ] = "median",
    report: Annotated[
        str | None, typer.Option("--report", help="Also write an HTML report: measured points vs the fitted lines.")
    ] = None,
) -> None:
    """Fit alpha (latency) and beta (s/byte) per level and op; report max relative error; save a profile."""
    from distscope.measure.calibrate import calibrate as fit
    from distscope.measure.nccl_tests import parse_nccl_tests
    from distscope.measure.profile import save_profile
    from distscope.measure.result import load_results
    from distscope.measure.tables import profile_table
    from distscope.report.cli import check_report
    from distscope.report.progress import progress
    from distscope.userfile import read_text

    check_report(report)
    results = []
    with progress(len(inputs), "reading measurements (files)") as advance:
        for p in inputs:
            if p.suffix in (".json", ".csv"):
                results.extend(load_results(p))
            else:
                results.extend(parse_nccl_tests(read_text(p, "nccl-tests output"), source=str(p)))
            advance()
    dev = device or next((r.device for r in results if r.device), "")
    profile = fit(results, name=name, device=dev, source=", ".join(str(p) for p in inputs), stat=stat)
    save_profile(profile, out)
    _console.print(profile_table(profile))
    if report is not None:
        from distscope.report.cli import write_report

        # the points the fit used: out-of-place results, at the fitted statistic
        points = [{**r.to_dict(), "time_s": r.time_s if stat == "median" else r.time_min_s}
                  for r in results if not r.in_place]
        write_report({"kind": "calibration", "profile": profile.to_dict(), "points": points}, report)
    from distscope.errors import warn
    from distscope.measure.profile import profile_warnings

    for w in profile_warnings(profile, profile.device.split("-")[0].lower() or "cpu"):
        if "measured on" not in w:  # the device check needs a target cluster; fit errors stand alone
            warn(w)


@app.command()
def kernels(
    out: Annotated[Path, typer.Option(help="Profile JSON to write (an existing profile's links are kept).")] = Path(
        "kernel_profile.json"),
    device: Annotated[str, typer.Option(help="cpu or cuda[:N]; default: cuda when present, else cpu.")] = "",
    dtypes: Annotated[
        list[str] | None, typer.Option(help="Dtypes (repeat or comma list) among fp32, fp16, bf16, fp8; default: "
                                            "bf16,fp16,fp8 on a GPU (fp8 where supported), fp32,bf16 on CPU.")
    ] = None,
    quick: Annotated[bool, typer.Option(help="Small CPU-sized sweep (default on CPU; --no-quick for the GPU grid).")
                     ] = False,
    gemm_m: Annotated[str | None, typer.Option(help="GEMM M values (tokens), comma list; overrides the sweep's.")] = None,
    gemm_nk: Annotated[str | None, typer.Option(help="GEMM N and K values, comma list; overrides the sweep's.")] = None,
    iters: Annotated[int | None, typer.Option(help="Timed calls per point (median kept).")] = None,
    name: Annotated[str, typer.Option(help="Profile name (when a new file is written).")] = "measured",
) -> None:
    """Time matmul, scaled-dot-product attention and element-wise kernels with torch here; write the
    tables as the `kernels` section of a system profile (use it with --profile)."""
    import dataclasses

    import torch

    from distscope.dtypes import DType
    from distscope.measure.kernels import KernelSweep, fp8_supported, measure_kernels, sweep_points
    from distscope.measure.profile import SystemProfile, load_profile, save_profile
    from distscope.report.progress import progress
    from distscope.scenario import parse_int_list

    dev = device or ("cuda" if torch.cuda.is_available() else "cpu")
    on_cpu = dev == "cpu"
    picked = [DType.parse(d, "--dtypes") for d in _split(dtypes)]
    base = KernelSweep.quick() if (quick or on_cpu) else KernelSweep.full()
    sweep = dataclasses.replace(
        base, dtypes=tuple(picked) or base.dtypes,
        gemm_m=parse_int_list(gemm_m, "--gemm-m") if gemm_m else base.gemm_m,
        gemm_nk=parse_int_list(gemm_nk, "--gemm-nk") if gemm_nk else base.gemm_nk,
        iters=iters if iters is not None else base.iters,
    )
    existing = load_profile(out) if out.exists() else None
    total = sweep_points(sweep, fp8_supported(dev) if not on_cpu else False)
    with progress(total, f"timing kernels on {dev}") as advance:
        kp = measure_kernels(sweep, dev, progress=advance)
    if existing is not None:
        prof = dataclasses.replace(existing, kernels=kp)
        _err.print(f"kept the links of the existing profile {out} and replaced its kernels section")
    else:
        prof = SystemProfile(name=name, levels={}, device=kp.device, source=kp.source, kernels=kp)
    save_profile(prof, out)
    for dt, g in kp.gemm.items():
        _console.print(f"gemm {dt.value}: {len(g.values)} shapes, best {g.max_value:.2f} TFLOP/s")
    for (dt, causal), t in kp.attention.items():
        _console.print(f"attention {dt.value} {'causal' if causal else 'full'}: best fwd {t.fwd_tflops.max_value:.2f} "
                       f"/ bwd {t.bwd_tflops.max_value:.2f} TFLOP/s")
    if kp.elementwise is not None:
        _console.print(f"element-wise: best {kp.elementwise.max_value:.1f} GB/s")
    _console.print(f"wrote {out} ({kp.device})")


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def log(
    ctx: typer.Context,
    out: Annotated[Path, typer.Option(help='Merged log, {"calls": [...]} JSON.')],
    dims: Annotated[
        str,
        typer.Option(
            help="Explicit group labels, e.g. 'tp=0,1|2,3;dp=0,2|1,3' "
            "(DeviceMesh dim names are used automatically)."
        ),
    ] = "",
    watchdog_s: Annotated[
        float, typer.Option(help="Hang watchdog timeout per call in seconds (0: off).")
    ] = 0.0,
    timeout_s: Annotated[float, typer.Option(help="Kill the command after this many seconds.")] = 3600.0,
) -> None:
    """Run COMMAND (after '--', e.g. torchrun --nproc-per-node 4 train.py) with comm logging in every rank."""
    from distscope.measure.calls import save_calls
    from distscope.measure.launch import run_logged
    from distscope.measure.summary import summarize
    from distscope.measure.tables import summary_table

    run = run_logged(
        ctx.args, dims=dims, watchdog_timeout_s=watchdog_s or None, timeout_s=timeout_s, capture=False
    )
    save_calls(run.calls, out)
    rows, per_dim = summarize(run.calls)
    _console.print(summary_table(rows, per_dim))
    if run.returncode != 0:
        raise DistscopeError(
            f"command exited with code {run.returncode} ({len(run.calls)} calls logged to {out})"
        )


@app.command()
def stragglers(
    log_file: Annotated[Path, typer.Argument(help="Log written by `distscope measure log`.")],
    threshold_ms: Annotated[float, typer.Option(help="Minimum median skew to call a rank slow.")] = 5.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """Arrival skew per rank per collective; names ranks that consistently arrive late."""
    import dataclasses

    from distscope.measure.calls import load_calls
    from distscope.measure.straggler import find_stragglers
    from distscope.measure.tables import straggler_table

    report = find_stragglers(load_calls(log_file), threshold_s=threshold_ms / 1e3)
    if as_json:
        print(json.dumps(dataclasses.asdict(report)))
        return
    _console.print(straggler_table(report))
    _console.print(f"stragglers: {report.stragglers or 'none'}")
