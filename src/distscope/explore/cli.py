"""`distscope explore`: sweep models × GPU counts × presets × parametric hardware × batch/sequence, plan
each point, and report the best plan per point, the Pareto fronts and the objectives."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated

import typer

from distscope import scenario as S


def explore_cmd(
    sweep_file: Annotated[str | None, typer.Argument(metavar="[SWEEP.yaml]", help="A YAML sweep file (flags below override its fields).")] = None,
    model: Annotated[str | None, typer.Option("--model", "-m", help="Base model: catalog key or HF config.json (default llama3-70b).")] = None,
    cluster: Annotated[str | None, typer.Option("--cluster", "-c", help="Base cluster preset (default dgx-h100).")] = None,
    gpus: Annotated[int | None, typer.Option("--gpus", "-n", help="Base GPU count (default 64).")] = None,
    global_batch: Annotated[int | None, typer.Option("--global-batch", help="Base global batch in sequences (default 128).")] = None,
    seq: Annotated[int | None, typer.Option("--seq", help="Base sequence length (default 4096, or the model's context if shorter).")] = None,
    vary: Annotated[list[str] | None, typer.Option("--vary", help="An axis: name=lo:hi:count or name=a,b,c (repeat the flag for a grid). Axes: model, cluster, gpus, global_batch, seq, tflops_<dtype>, hbm_GiB, hbm_GBps, nvlink_size, nvlink_GBps, nvlink_latency_us, nic_GBps, nic_latency_us.")] = None,
    precision: Annotated[str | None, typer.Option("--precision", help="fp16, bf16 or fp8 (default bf16).")] = None,
    compression: Annotated[bool | None, typer.Option("--compression/--no-compression", help="Search quantized communication as a plan dimension (default on).")] = None,
    software: Annotated[str | None, typer.Option("--software", help=S.help_of(S.PlanFlags, "software"))] = None,
    input: Annotated[str | None, typer.Option("--input", help="With --model torch:FILE.py:FACTORY (or torchvision:NAME, timm:NAME): its input, name:shape:dtype (the leading dim is replaced by each micro-batch searched); global batch and --train-tokens then count samples.")] = None,
    train_tokens: Annotated[float | None, typer.Option("--train-tokens", help="Tokens to train, for time/cost/energy (default 1e12).")] = None,
    price: Annotated[float | None, typer.Option("--price", help="Price per GPU-hour of the preset's GPU (default 1: cost reads in GPU-hours).")] = None,
    tdp: Annotated[float | None, typer.Option("--tdp", help="GPU power in W for the energy objective (default: the device's datasheet TDP).")] = None,
    budget: Annotated[float | None, typer.Option("--budget", help="Cost cap: report the fastest point within it.")] = None,
    out: Annotated[str | None, typer.Option("--out", "-o", help="Output table: .json, .csv or .parquet; a stopped sweep resumes from it.")] = None,
    fresh: Annotated[bool, typer.Option("--fresh", help="Ignore what --out and its journal already hold; recompute every point.")] = False,
    plot: Annotated[str | None, typer.Option("--plot", help="Write an HTML page with the Pareto plots.")] = None,
    workers: Annotated[int, typer.Option("--workers", "-j", help="Local worker processes (0 = one per core).")] = 0,
    ray: Annotated[str | None, typer.Option("--ray", help="Run on Ray: local (start one here), auto (the one running here), HOST:PORT or ray://HOST:PORT.")] = None,
    ray_cpus: Annotated[int, typer.Option("--ray-cpus", help="CPUs of a Ray instance started with --ray local (0 = all).")] = 0,
    ray_timeout: Annotated[float, typer.Option("--ray-timeout", help="Seconds to wait for a Ray address to answer.")] = 30.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result JSON on stdout instead of tables.")] = False,
) -> None:
    """Sweep any product of models, GPU counts, cluster presets, parametric hardware (peak FLOP/s, HBM size
    and bandwidth, NVLink domain size and bandwidth, NIC bandwidth, latency), global batch and sequence; plan
    every point (compression included) and keep its best plan. Objectives: step time, tokens/s, time,
    cost and energy to train N tokens; Pareto fronts of time vs cost and time vs GPUs."""
    from distscope.dtypes import Precision
    from distscope.explore.axes import parse_vary
    from distscope.explore.formats import json_doc
    from distscope.explore.local import LocalEngine
    from distscope.explore.objectives import Objectives, PriceModel
    from distscope.explore.point import PlanSettings
    from distscope.explore.ray_engine import RayEngine
    from distscope.explore.runner import Engine, run_sweep
    from distscope.explore.spec_file import load_sweep
    from distscope.explore.sweep import Base, Sweep
    from distscope.report.console import print_json

    sw = load_sweep(sweep_file) if sweep_file is not None else Sweep()
    b = sw.base
    base = Base(model=model if model is not None else b.model, cluster=cluster if cluster is not None else b.cluster,
                gpus=gpus if gpus is not None else b.gpus,
                global_batch=global_batch if global_batch is not None else b.global_batch,
                seq=seq if seq is not None else b.seq)
    plan = PlanSettings(precision=Precision.parse(precision, "--precision") if precision is not None else sw.plan.precision,
                        compression=compression if compression is not None else sw.plan.compression,
                        software=software if software is not None else sw.plan.software,
                        input=input if input is not None else sw.plan.input)
    o = sw.objectives
    objectives = Objectives(
        train_tokens=train_tokens if train_tokens is not None else o.train_tokens,
        price=dataclasses.replace(o.price, per_gpu_hour=price) if price is not None else o.price,
        tdp_W=tdp if tdp is not None else o.tdp_W, budget=budget if budget is not None else o.budget)
    sweep = Sweep(base=base, axes=(*sw.axes, *(parse_vary(v) for v in vary or ())), plan=plan, objectives=objectives)
    engine: Engine = (RayEngine(address=ray, cpus=ray_cpus, connect_timeout_s=ray_timeout) if ray is not None
                      else LocalEngine(workers=workers))
    if plot is not None:
        from distscope.explore.plot import check_plot_path

        check_plot_path(plot)
    res = run_sweep(sweep, engine, out=Path(out) if out is not None else None, fresh=fresh)
    if plot is not None:
        from distscope.explore.plot import write_plot

        write_plot(Path(plot), res.doc, list(res.sweep["axes"]))
    if as_json:
        print_json(json_doc(res.doc, res.sweep))
        return
    from distscope.explore.summary import print_summary

    print_summary(res, out_path=out, plot=plot, price_given=objectives.price != PriceModel())
