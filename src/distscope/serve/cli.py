"""`distscope serve estimate|simulate|plan|validate|measure|diffusion`: inference serving, estimated,
simulated, planned, validated against published serving results, and measured on a real torch model;
`diffusion` prices a diffusion denoiser's patch-parallel latency (serve/diffusion_cli.py)."""

from __future__ import annotations

import math
from typing import Annotated, Any

import typer

from distscope.scenario import PLANNER_WORKLOAD, SystemFlags, WorkloadFlags
from distscope.scenario.options import help_of
from distscope.serve import scenario as S

# the model and cluster every verb starts from (scenario/flags.py); serve plan, like plan, the planner's
WORKLOAD, SYSTEM = WorkloadFlags(), SystemFlags()

app = typer.Typer(help="Inference serving: estimate, simulate, plan, validate, measure; diffusion patch parallelism.",
                  no_args_is_help=True)


def _fmt_s(t: float) -> str:
    from distscope.report.console import secs

    return "∞" if not math.isfinite(t) else secs(t)


@app.command("estimate")
def estimate_cmd(
    model: S.ModelOpt = WORKLOAD.model, cluster: S.ClusterOpt = SYSTEM.cluster, gpus: S.GpusOpt = None, tp: S.TpOpt = 1,
    pp: S.PpOpt = 1, ep: S.EpOpt = 1, weights: S.WeightsOpt = "bf16", act: S.ActOpt = "auto", kv: S.KvOpt = "bf16",
    stack: S.StackOpt = "vllm", scheduler: S.SchedulerOpt = None, max_batch: S.MaxBatchOpt = None, chunk: S.ChunkOpt = None,
    batch: Annotated[int | None, typer.Option("--batch", help="Static batch size.")] = None,
    concurrency: Annotated[int | None, typer.Option("--concurrency", help="Closed-loop clients.")] = None,
    rate: Annotated[float | None, typer.Option("--rate", help="Requests per second (all replicas).")] = None,
    input_len: S.InputOpt = 1024, output_len: S.OutputOpt = 256, as_json: S.JsonOpt = False,
) -> None:
    """Closed-form TTFT, TPOT, latency, throughput, KV cache, max batch and memory per GPU."""
    from distscope.errors import DistscopeError
    from distscope.report.console import gib, out, print_json
    from distscope.serve.estimate import estimate

    if scheduler is not None:
        raise DistscopeError(f"--scheduler={scheduler!r} has no effect on serve estimate: its closed form is continuous "
                             "batching (--concurrency, --rate) or one static batch (--batch); serve simulate models schedulers")
    if batch is None and concurrency is None and rate is None:
        batch = 1
    sv = S.build_serving(model=model, cluster=cluster, gpus=gpus, tp=tp, pp=pp, ep=ep, weights=weights, act=act, kv=kv,
                         stack=stack, scheduler=scheduler, max_batch=max_batch, chunk=chunk, input_len=input_len,
                         output_len=output_len)
    e = estimate(sv.replica, input_len=input_len, output_len=output_len, batch=batch, concurrency=concurrency,
                 rate_per_s=rate, replicas=sv.replicas)
    d = e.to_dict()
    if as_json:
        print_json({"model": sv.replica.spec.name, "layout": sv.replica.layout.label(), "precision": sv.replica.prec.label(),
                    "stack": sv.replica.stack.name, **d})
        return
    r = sv.replica
    out.print(f"[bold]{r.spec.name}[/bold] on {sv.replicas} × ({r.layout.label()}) {r.cluster.device.name}, "
              f"{r.prec.label()}, stack {r.stack.name}")
    rows = [("ttft", _fmt_s(e.ttft_s)), ("tpot", _fmt_s(e.tpot_s)), ("latency", _fmt_s(e.latency_s)),
            ("throughput", f"{e.throughput_out_tok_s:,.0f} output tok/s ({e.throughput_req_s:.3g} req/s)"),
            ("batch (mean / max)", f"{e.batch:.1f} / {e.max_batch}"),
            ("kv cache per GPU", f"{gib(e.kv_cache_bytes)} ({e.kv_cache_tokens:,} tokens per replica)"),
            ("weights per GPU", gib(e.weights_bytes)), ("workspace per GPU", gib(e.workspace_bytes)),
            ("memory per GPU", gib(d["memory_per_gpu_bytes"])),
            ("decode compute-bound above", f"{e.decode_crossover_tokens:.0f} tokens per step"),
            ("comm per token per GPU", ", ".join(f"{k} {v / 1e3:.1f} kB" for k, v in e.comm_bytes_per_token.items()))]
    for k, v in rows:
        out.print(f"  {k:28s} {v}")
    if e.note:
        out.print(f"[yellow]note[/yellow] {e.note}")


@app.command("simulate")
def simulate_cmd(
    ctx: typer.Context,
    model: S.ModelOpt = WORKLOAD.model, cluster: S.ClusterOpt = SYSTEM.cluster, gpus: S.GpusOpt = None, tp: S.TpOpt = 1,
    pp: S.PpOpt = 1, ep: S.EpOpt = 1, weights: S.WeightsOpt = "bf16", act: S.ActOpt = "auto", kv: S.KvOpt = "bf16",
    stack: S.StackOpt = "vllm", scheduler: S.SchedulerOpt = None, max_batch: S.MaxBatchOpt = None, chunk: S.ChunkOpt = None,
    rate: Annotated[float | None, typer.Option("--rate", help="Poisson arrivals, requests per second.")] = None,
    concurrency: Annotated[int | None, typer.Option("--concurrency", help="Closed loop of this many clients.")] = None,
    burst: Annotated[bool, typer.Option("--burst", help="Every request at t = 0.")] = False,
    trace: Annotated[str | None, typer.Option("--trace", help="CSV or JSON lines of arrival_s, input_len, output_len.")] = None,
    requests: Annotated[int, typer.Option("--requests", help="Requests to simulate.")] = 1000,
    input_len: S.InputOpt = 1024, output_len: S.OutputOpt = 256,
    lengths: Annotated[str, typer.Option("--lengths", help="fixed, or exponential around the given means.")] = "fixed",
    seed: Annotated[int, typer.Option("--seed", help="Seed of the arrival and length draws.")] = 0,
    replicas: Annotated[int | None, typer.Option("--replicas", help="Replicas behind the router (default: gpus / (tp·pp); with --gpus it must equal it).")] = None,
    router: Annotated[str, typer.Option("--router", help="round-robin or least-loaded.")] = "round-robin",
    disagg: Annotated[str | None, typer.Option("--disagg", help="P:D — prefill and decode replicas (disaggregated serving); P + D replicas of tp·pp GPUs: --gpus, if given, must equal (P + D)·tp·pp, else it is derived.")] = None,
    slo: Annotated[str | None, typer.Option("--slo", help="ttft=0.5,tpot=0.05 (seconds, or with ms): goodput counts requests meeting both.")] = None,
    as_json: S.JsonOpt = False,
) -> None:
    """Discrete-event simulation: TTFT/TPOT/latency percentiles, throughput, goodput, preemptions."""
    import time

    from distscope.errors import DistscopeError
    from distscope.plan import parse_enum
    from distscope.report.console import out, print_json
    from distscope.serve.metrics import PCTS, parse_slo
    from distscope.serve.requests import Arrival, LengthDist, Workload, read_trace
    from distscope.serve.simulate import Router, simulate

    modes = [rate is not None, concurrency is not None, burst, trace is not None]
    if sum(modes) > 1:
        raise DistscopeError("give one of --rate, --concurrency, --burst, --trace")
    if trace:  # the trace gives every request's arrival and lengths
        flags = {"requests": requests, "input_len": input_len, "output_len": output_len, "lengths": lengths, "seed": seed}
        set_flags = [f"--{k.replace('_', '-')}={v}" for k, v in flags.items() if S.given(ctx, k)]
        if set_flags:
            raise DistscopeError(f"{', '.join(set_flags)} would be ignored with --trace={trace!r}: the trace gives every "
                                 "request's arrival, input_len and output_len")
    p_rep, d_rep, gpus = S.replica_pools(gpus=gpus, tp=tp, pp=pp, replicas=replicas, disagg=disagg)
    tr = read_trace(trace) if trace else ()
    check_in, check_out = (max(t[1] for t in tr), max(t[2] for t in tr)) if tr else (input_len, output_len)
    sv = S.build_serving(model=model, cluster=cluster, gpus=gpus, tp=tp, pp=pp, ep=ep, weights=weights, act=act, kv=kv,
                         stack=stack, scheduler=scheduler, max_batch=max_batch, chunk=chunk, input_len=check_in,
                         output_len=check_out)
    ld = parse_enum(LengthDist, lengths, "--lengths")
    assert isinstance(ld, LengthDist)
    if trace:
        w = Workload(arrival=Arrival.TRACE, requests=len(tr), trace=tr)
    elif concurrency is not None:
        w = Workload(arrival=Arrival.CONCURRENCY, requests=requests, input_len=input_len, output_len=output_len,
                     concurrency=concurrency, lengths=ld, seed=seed)
    elif rate is not None:
        w = Workload(arrival=Arrival.POISSON, requests=requests, input_len=input_len, output_len=output_len,
                     rate_per_s=rate, lengths=ld, seed=seed)
    else:
        w = Workload(arrival=Arrival.BURST, requests=requests, input_len=input_len, output_len=output_len, lengths=ld, seed=seed)
    rt = parse_enum(Router, router, "--router")
    assert isinstance(rt, Router)
    t0 = time.perf_counter()
    res = simulate(sv.replica, w, replicas=p_rep, router=rt, policy=sv.policy, slo=parse_slo(slo), decode_replicas=d_rep)
    wall = time.perf_counter() - t0
    m = res.metrics
    if as_json:
        print_json({"model": sv.replica.spec.name, "layout": sv.replica.layout.label(), "precision": sv.replica.prec.label(),
                    "stack": sv.replica.stack.name, "policy": sv.policy.value, "replicas": p_rep, "decode_replicas": d_rep,
                    "events": res.events, "wall_s": wall, **m})
        return
    r = sv.replica
    pools = f"{p_rep} prefill + {d_rep} decode replicas" if d_rep else f"{p_rep} replica(s)"
    out.print(f"[bold]{r.spec.name}[/bold], {pools} of ({r.layout.label()}) {r.cluster.device.name}, {r.prec.label()}, "
              f"stack {r.stack.name} ({sv.policy.value}); {int(m['requests'])} requests in {_fmt_s(m['duration_s'])} simulated")
    for name in ("ttft_s", "tpot_s", "latency_s"):
        vals = "  ".join(f"p{p} {_fmt_s(m[f'{name}_p{p}'])}" for p in PCTS)
        out.print(f"  {name[:-2]:8s} mean {_fmt_s(m[f'{name}_mean'])}  {vals}")
    out.print(f"  throughput {m['throughput_out_tok_s']:,.0f} output tok/s, {m['throughput_req_s']:.3g} req/s; "
              f"preemptions {int(m['preemptions'])}")
    if "goodput_req_s" in m:
        out.print(f"  goodput {m['goodput_req_s']:.3g} req/s ({m['slo_attainment']:.1%} of requests meet {parse_slo(slo).label()})")  # type: ignore[union-attr]
    out.print(f"  ({res.events} events, {wall:.2f} s wall)")


@app.command("plan")
def plan_cmd(
    ctx: typer.Context,
    model: S.ModelOpt = PLANNER_WORKLOAD.model, cluster: S.ClusterOpt = SYSTEM.cluster,
    gpus: Annotated[int, typer.Option("--gpus", "-n", help="GPU budget.")] = 8,
    stack: S.StackOpt = "vllm", input_len: S.InputOpt = 1024, output_len: S.OutputOpt = 256,
    rate: Annotated[float | None, typer.Option("--rate", help="Offered load, requests/s (default: as much as the plan takes).")] = None,
    slo: Annotated[str | None, typer.Option("--slo", help="ttft=..,tpot=.. (seconds, or ms); plans then rank by their maximum sustainable rate under it.")] = None,
    attainment: Annotated[float, typer.Option("--attainment", help="Share of requests that must meet the SLO (with --slo).")] = 0.9,
    precisions: Annotated[str | None, typer.Option("--precisions", help="Comma list among bf16, fp8, int4, fp4 (default: all the GPU runs).")] = None,
    batches: Annotated[str, typer.Option("--batches", help="Batch limits to try.")] = "64,128,256,512",
    chunks: Annotated[str | None, typer.Option("--chunks", help="Chunked-prefill budgets to try (implies --scheduler chunked).")] = None,
    disaggregate: Annotated[bool, typer.Option("--disaggregate/--no-disaggregate", help="Also try prefill/decode pools.")] = True,
    simulate_top: Annotated[int, typer.Option("--simulate-top", help="Candidates to simulate after the closed-form ranking.")] = 8,
    requests: Annotated[int, typer.Option("--requests", help="Requests per simulation.")] = 1500,
    top: Annotated[int, typer.Option("--top", "-k", help="Plans to print.")] = 8,
    input: Annotated[str | None, typer.Option("--input", help="With --model torch:FILE.py:FACTORY: the sample input, name:shape:fp32 (CPU serving).")] = None,
    cores: Annotated[int | None, typer.Option("--cores", help="With a torch module: CPU cores to plan over (default: all this process may use).")] = None,
    repeats: Annotated[int, typer.Option("--repeats", help="With a torch module: forwards timed per profile point.")] = 3,
    as_json: S.JsonOpt = False,
) -> None:
    """Search TP/PP/EP, replicas, precision, batch limit, chunk size and disaggregated pools; simulate the
    closed-form best and explain the winner. With --model torch:FILE.py:FACTORY: serve it on this host's
    CPU cores instead, as Packrat plans it: instances x threads x batch per total batch in --batches, from
    a latency profile measured here (serve/cpu_plan.py).

    With --slo each simulated plan gets its maximum sustainable rate: the highest Poisson rate at which
    --attainment of the requests meet the SLO and the plan keeps up with its arrivals, found by bracketing
    and bisection over the rate with the simulator (same seed for every plan and rate) to 2%. Plans rank by
    whether they sustain --rate, then by that rate; without --slo by simulated goodput. Plans whose max
    rates agree to 2% (goodputs to 1%) are a tie: the table says so and --json lists them under "tie"."""
    import dataclasses

    from rich.table import Table

    from distscope.errors import DistscopeError
    from distscope.report.console import out, print_json
    from distscope.report.progress import progress
    from distscope.scenario import build_cluster, parse_int_list
    from distscope.serve.context import check_lengths, context_len
    from distscope.serve.metrics import parse_slo
    from distscope.serve.plan import (
        GOODPUT_TIE_RTOL,
        TIE_RTOL,
        candidate_json,
        explain,
        no_plan_message,
        search,
        short_run_note,
        tie_group,
        tie_message,
    )
    from distscope.serve.stack import Policy, get_stack
    from distscope.workload.catalog import get_model
    from distscope.workload.module_graph import is_module_ref

    if is_module_ref(model):
        from distscope.serve.cpu_cli import CpuServeFlags, cpu_plan_cmd, refuse_gpu_flags

        refuse_gpu_flags(ctx, ("cluster", "gpus", "stack", "input_len", "output_len", "rate", "slo", "attainment",
                               "precisions", "chunks", "disaggregate", "simulate_top", "requests", "top"))
        cpu_plan_cmd(CpuServeFlags(model=model, input=input, cores=cores,
                                   batches=batches if S.given(ctx, "batches") else "1,2,4,8", repeats=repeats),
                     as_json=as_json)
        return
    if input is not None or cores is not None or S.given(ctx, "repeats"):
        raise DistscopeError("--input, --cores and --repeats are for a torch module served on CPU (--model torch:...)")
    if gpus < 1:
        raise DistscopeError(f"--gpus={gpus} must be >= 1")
    if not 0 < attainment <= 1:
        raise DistscopeError(f"--attainment={attainment} must be in (0, 1]")
    s = parse_slo(slo)
    if s is None and S.given(ctx, "attainment"):
        raise DistscopeError(f"--attainment={attainment} needs --slo: it is the share of requests that must meet the SLO")
    spec = get_model(model)
    window = context_len(spec, model)
    check_lengths(spec, input_len, output_len, window)
    st = get_stack(stack)
    ch = parse_int_list(chunks, "--chunks") if chunks else ()
    if ch:
        st = dataclasses.replace(st, policy=Policy.CHUNKED)
    prec = tuple(x.strip().lower() for x in precisions.split(",")) if precisions else None
    cl = build_cluster(SystemFlags(cluster=cluster, gpus=gpus))
    with progress(None, "searching serving plans (simulating the top ones)") as bar:
        ranked = search(spec=spec, cluster=cl, gpus=gpus, stack=st, input_len=input_len,
                        output_len=output_len, rate_per_s=rate, slo=s, attainment=attainment, requests=requests,
                        allowed_precisions=prec, batches=parse_int_list(batches, "--batches"), chunks=ch,
                        disaggregate=disaggregate, simulate_top=simulate_top, context=window, progress=bar.update)
    best = ranked[0]
    why = explain(best, ranked[1]) if len(ranked) > 1 else "the only feasible plan"
    miss = no_plan_message(ranked, s, attainment) if s is not None else None
    tied = tie_group(ranked, s)
    tie_line = tie_message(tied, s, rate)
    if len(ranked) > 1 and any(ranked[1] is c for c in tied):
        why = f"a tie with the runner-up ({why})"
    note = short_run_note(best, s, requests)
    if as_json:
        d: dict[str, Any] = {"best": candidate_json(best), "why": why,
                             "ranked_by": "max_rate_req_s" if s is not None else "goodput_req_s",
                             "tie": [c.label() for c in tied[1:]], "tie_rtol": TIE_RTOL if s is not None else GOODPUT_TIE_RTOL,
                             "plans": [candidate_json(c) for c in ranked[:top]]}
        if miss:
            d["no_plan_meets_slo"] = miss
        if note:
            d["note"] = note
        print_json(d)
        return
    if miss:
        out.print(f"[red]{miss}[/red]", soft_wrap=True)
    t = Table(title=f"{spec.name} on {gpus} × {cl.device.name}, {input_len}/{output_len} tokens"
                    + (f", {rate:g} req/s" if rate else "") + (f", SLO {s.label()}" if s else ""))
    cols = ["layout", "pools", "w/a/kv", "batch", "chunk"] + (["max rate/s"] if s else []) + [
        "goodput/s", "tok/s", "p50 ttft", "p50 tpot", "SLO"]
    for col in cols:
        t.add_column(col, justify="left" if col in ("layout", "pools", "w/a/kv") else "right")
    for c in ranked[:top]:
        if c.sim is None:
            continue
        m, f = c.sim, c.fields()
        mr = []
        if s:
            assert c.max_rate is not None
            mark = "= " if len(tied) > 1 and any(c is x for x in tied) else ""
            met = c.max_rate.met_req_s
            mr = [mark + ("none" if not met > 0 else f"≥{met:.3g}" if not math.isfinite(c.max_rate.missed_req_s) else f"{met:.3g}")]
        t.add_row(f"{c.layout.label()} ×{c.replicas}", f["disaggregated"],
                  f"{f['weights']}/{f['act']}/{f['kv']}", f["max_batch"], f["chunk"], *mr,
                  f"{m.get('goodput_req_s', m['throughput_req_s']):.3g}", f"{m['throughput_out_tok_s']:,.0f}",
                  _fmt_s(m["ttft_s_p50"]), _fmt_s(m["tpot_s_p50"]), f"{m.get('slo_attainment', 1.0):.0%}")
    out.print(t)
    if s and rate is None:
        out.print("each plan simulated at its max rate (or at its closed-form capacity where no rate meets the SLO)")
    out.print(f"[bold]best[/bold]: {best.label()}", soft_wrap=True)
    out.print(f"[bold]why[/bold]: {why}", soft_wrap=True)
    if tie_line:
        out.print(f"[bold]tie[/bold]:{tie_line.removeprefix('tie:')}", soft_wrap=True)
    if note:
        out.print(f"[yellow]note[/yellow]:{note.removeprefix('note:')}", soft_wrap=True)


@app.command("validate")
def validate_cmd(
    files: Annotated[list[str], typer.Argument(help="CSV files with the columns of data/validation/serving_runs.csv.")],
    cv: Annotated[str | None, typer.Option("--cv", help="Cross-validate: refit the global parameters leaving out each source_id.")] = None,
    as_json: S.JsonOpt = False,
) -> None:
    """Predict every row's throughput / TTFT / TPOT; errors per row, MAPE per metric (and CV MAPE)."""
    from rich.table import Table

    from distscope.errors import DistscopeError
    from distscope.report.console import err, out, print_json
    from distscope.serve.rows import read_rows
    from distscope.serve.validate import report

    parsed: list[Any] = []
    for f in files:
        parsed += read_rows(f)
    with err.status("predicting rows ...", spinner="dots"):
        rep = report(parsed)
    good = [r for r in parsed if not isinstance(r, DistscopeError)]
    if cv:
        from rich.progress import Progress

        from distscope.serve.calibrate import cross_validate

        with Progress(console=err, transient=True) as prog:
            task = prog.add_task("cross-validating (refit per held-out source)", total=None)
            res = cross_validate(good, cv, progress=lambda: prog.advance(task))
        rep.update({k: v for k, v in res.items() if k != "cv_rows"})
    rows_out = [{k: r[k] for k in ("run_id", "metric", "predicted", "measured", "error_pct")} for r in rep["rows"]]
    if as_json:
        print_json({**rep, "rows": rows_out})
        return
    t = Table(title="predicted vs measured")
    for col in ("run_id", "metric", "predicted", "measured", "error"):
        t.add_column(col, justify="left" if col in ("run_id", "metric") else "right")
    for r in rep["rows"]:
        t.add_row(r["run_id"], r["metric"], f"{r['predicted']:.4g}", f"{r['measured']:.4g}", f"{r['error_pct']:+.1f}%")
    out.print(t)
    for k, v in rep["mape_pct"].items():
        line = f"{k}: MAPE {v:.1f}% over {rep['n'][k]} rows (max {rep['max_ape_pct'][k]:.1f}%)"
        if "cv_mape_pct" in rep and k in rep["cv_mape_pct"]:
            line += f"; leave-one-source-out CV {rep['cv_mape_pct'][k]:.1f}%"
        out.print(line)
    if rep["skipped"]:
        out.print(f"skipped {len(rep['skipped'])} metric values (e.g. {rep['skipped'][0]['run_id']}: {rep['skipped'][0]['reason']})")
    for f in rep["failed"]:
        out.print(f"[yellow]problem[/yellow] {f}")


@app.command("measure")
def measure_cmd(
    ctx: typer.Context,
    rate: Annotated[float, typer.Option("--rate", help="Poisson arrivals per second.")] = 4.0,
    requests: Annotated[int, typer.Option("--requests", help="Requests to serve.")] = 40,
    input_len: S.InputOpt = 32, output_len: S.OutputOpt = 16,
    max_batch: Annotated[int, typer.Option("--max-batch", help="Most sequences decoding at once.")] = 8,
    layers: Annotated[int, typer.Option("--layers", help="GPT layers.")] = 4,
    hidden: Annotated[int, typer.Option("--hidden", help="GPT hidden size.")] = 256,
    heads: Annotated[int, typer.Option("--heads", help="GPT attention heads.")] = 4,
    seed: Annotated[int, typer.Option("--seed", help="Seed of arrivals and weights.")] = 0,
    clock: Annotated[str, typer.Option("--clock", help="thread (the serving thread's CPU time: immune to other processes on the core) or wall.")] = "thread",
    kernels: Annotated[bool, typer.Option("--kernels/--no-kernels", help="Also predict from a kernel profile measured here (distscope measure kernels).")] = False,
    profile: Annotated[str | None, typer.Option("--profile", help="Also predict from this kernel profile JSON (distscope measure kernels).")] = None,
    model: Annotated[str | None, typer.Option("--model", "-m", help="A torch module (torch:FILE.py:FACTORY) to serve on CPU cores as `serve plan` plans it, instead of the GPT.")] = None,
    input: Annotated[str | None, typer.Option("--input", help="With --model: the sample input, name:shape:fp32.")] = None,
    cores: Annotated[int | None, typer.Option("--cores", help="With --model: CPU cores to use (default: all this process may use).")] = None,
    batches: Annotated[str, typer.Option("--batches", help="With --model: comma list of total batch sizes.")] = "1,2,4,8",
    repeats: Annotated[int, typer.Option("--repeats", help="With --model: forwards timed per profile point and per run.")] = 3,
    as_json: S.JsonOpt = False,
) -> None:
    """Serve the examples' GPT (random weights, CPU) under continuous batching with Poisson arrivals,
    record per-request TTFT/TPOT, and compare with `serve simulate` of the same load. With --model
    torch:FILE.py:FACTORY: profile it on this host, plan instances x threads x batch (as `serve plan`),
    and run each plan and one all-cores instance side by side for real."""
    if model is not None:
        from distscope.serve.cpu_cli import CpuServeFlags, cpu_measure_cmd, refuse_gpu_flags

        refuse_gpu_flags(ctx, ("rate", "requests", "input_len", "output_len", "max_batch", "layers", "hidden", "heads",
                               "seed", "clock", "kernels", "profile"))
        cpu_measure_cmd(CpuServeFlags(model=model, input=input, cores=cores, batches=batches, repeats=repeats),
                        as_json=as_json)
        return
    from distscope.errors import DistscopeError

    if input is not None or cores is not None or S.given(ctx, "batches") or S.given(ctx, "repeats"):
        raise DistscopeError("--input, --cores, --batches and --repeats are for a torch module served on CPU (--model)")
    from distscope.report.console import out, print_json
    from distscope.serve.measure import MeasureConfig, measure_and_predict

    cfg = MeasureConfig(rate_per_s=rate, requests=requests, input_len=input_len, output_len=output_len,
                        max_batch=max_batch, layers=layers, hidden=hidden, heads=heads, seed=seed, clock=clock)
    res = measure_and_predict(cfg, profile, kernels)
    if as_json:
        print_json(res)
        return
    for k in ("ttft_s_p50", "tpot_s_p50", "ttft_s_mean", "tpot_s_mean", "throughput_out_tok_s"):
        line = (f"  {k:22s} measured {res['measured'][k]:.4g}  predicted {res['predicted'][k]:.4g}  "
                f"error {res['error_pct'][k]:+.1f}%")
        if "predicted_from_kernels" in res:
            line += f"  (from kernels {res['predicted_from_kernels'][k]:.4g}, {res['error_pct_from_kernels'][k]:+.1f}%)"
        out.print(line)


@app.command("diffusion")
def diffusion_cmd(
    model: Annotated[str, typer.Option("--model", "-m", help="The denoiser: torch:FILE.py:FACTORY (its first input is the latent, N×C×H×W).")] = "torch:examples/modules/sdxl.py:unet",
    input: Annotated[str | None, typer.Option("--input", help="Sample inputs name:shape:dtype, comma-separated; the first is the latent, its batch the CFG halves (default: SDXL at 1024x1024 with guidance).")] = "x:2x4x128x128:fp16,ctx:2x77x2048:fp16",
    cluster: S.ClusterOpt = "dgx-a100",
    gpus: Annotated[str, typer.Option("--gpus", "-n", help="Comma list of GPU counts per image.")] = "1,2,4,8",
    mode: Annotated[str, typer.Option("--mode", help="Comma list of displaced (DistriFusion), sync, pcpp, naive, or all.")] = "displaced",
    steps: Annotated[int, typer.Option("--steps", help="Denoising steps.")] = 50,
    warmup_steps: Annotated[int, typer.Option("--warmup-steps", help="Synchronous warm-up steps after the first (DistriFusion's default 4).")] = 4,
    pcpp_ratio: Annotated[float, typer.Option("--pcpp-ratio", help="PCPP: fraction of each neighbouring patch a patch attends to.")] = 0.5,
    cfg_split: Annotated[bool, typer.Option("--cfg-split/--no-cfg-split", help="Run the conditional and unconditional halves on two GPU groups.")] = True,
    cuda_graph: Annotated[bool, typer.Option("--cuda-graph/--eager", help="Replay each step as a CUDA graph (no host bound), as DistriFusion does.")] = True,
    vae: Annotated[str | None, typer.Option("--vae", help="A decoder run once after the loop, whole on every GPU (not split), e.g. torch:examples/modules/sdxl.py:vae_decoder.")] = None,
    vae_input: Annotated[str | None, typer.Option("--vae-input", help="The decoder's latent name:shape:dtype[:layout], e.g. z:1x4x128x128:tf32:nchw (SDXL decodes in fp32).")] = None,
    host_op_us: Annotated[float | None, typer.Option("--host-op-us", help=help_of(SystemFlags, "host_op_us"))] = None,
    as_json: S.JsonOpt = False,
) -> None:
    """Latency and speed-up of one image's denoising loop split into patches over GPUs (DistriFusion,
    PCPP): compute per patch, the activations exchanged per step, overlapped or synchronous; with --vae the
    decode after the loop, which is not split and caps the speed-up."""
    from distscope.serve.diffusion_cli import DiffusionFlags
    from distscope.serve.diffusion_cli import diffusion_cmd as run

    run(DiffusionFlags(model=model, input=input, cluster=cluster, gpus=gpus, modes=mode, steps=steps,
                       warmup_steps=warmup_steps, pcpp_ratio=pcpp_ratio, cfg_split=cfg_split, cuda_graph=cuda_graph,
                       vae=vae, vae_input=vae_input, host_op_us=host_op_us),
        as_json=as_json)
