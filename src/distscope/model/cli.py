"""`distscope estimate`: closed-form step time, breakdown and memory for one scenario."""

from __future__ import annotations

from typing import Annotated

import typer

from distscope import scenario as S


@S.with_flags(S.WorkloadFlags, S.SystemFlags, S.PlanFlags)
def estimate_cmd(
    workload: S.WorkloadFlags,
    system: S.SystemFlags,
    plan: S.PlanFlags,
    quant_gbps: Annotated[float | None, typer.Option("--quant-gbps", help="Quantize/dequantize throughput for --compress, GB of input per s (default: HBM-bound estimate).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object instead of tables.")] = False,
    report: Annotated[str | None, typer.Option("--report", help="Also write a self-contained HTML report (plotly) to this file.")] = None,
    comm_volume: Annotated[bool, typer.Option(
        "--comm-volume", help="Print bytes per (op, group) per training step per rank (each pipeline stage) instead."
    )] = False,
) -> None:
    """Predict one training step: time with its breakdown, tokens/s, MFU/HFU and memory per GPU. Plan
    choices left out take the --software preset's defaults (none named: see the README)."""
    from distscope.model.estimate import estimate
    from distscope.report.cli import check_report
    from distscope.report.console import out, print_json
    from distscope.report.estimate_table import estimate_json, estimate_tables

    check_report(report)
    from distscope.workload.module_graph import is_module_ref

    if is_module_ref(workload.model):
        _estimate_module(workload, system, plan, as_json=as_json, other=bool(report or comm_volume or quant_gbps))
        return
    sc = S.build_scenario(workload, system, plan)
    if comm_volume:
        from distscope.trace.volume import volume_report, volume_table

        volume = volume_report(sc.spec, sc.shape, sc.cluster, sc.plan, software=sc.software)
        print_json(volume) if as_json else out.print(volume_table(volume))
        return
    if quant_gbps is not None and not (quant_gbps > 0 and quant_gbps < float("inf")):
        from distscope.errors import DistscopeError

        raise DistscopeError(f"--quant-gbps={quant_gbps} must be a finite number > 0")
    sw = sc.software
    est = estimate(sc.spec, sc.shape, sc.cluster, sc.plan, quant_GBps=quant_gbps, software=sw)
    from distscope.errors import warn
    from distscope.validate.envelope import outside

    beyond = outside(sc.cluster.device.name, sc.plan.precision.value, est.mfu) if est.feasible else None
    if beyond:
        warn(beyond)
    plain = None
    if sc.plan.compression is not None:
        import dataclasses

        plain = estimate(sc.spec, sc.shape, sc.cluster, dataclasses.replace(sc.plan, compression=None), software=sw)
    d = estimate_json(sc, est)
    if plain is not None:
        d["uncompressed_step_time_s"] = plain.step_time_s
    if report:
        from distscope.report.cli import write_report
        from distscope.report.step_view import step_view

        d["step_view"] = step_view(sc.spec, sc.shape, sc.cluster, sc.plan, software=sw)
        write_report(d, report)
    if as_json:
        print_json(d)
        return
    for t in estimate_tables(sc, est):
        out.print(t)
    if plain is not None:
        from distscope.search.explain import MIN_TERM_S

        diffs = [f"{k} {'+' if v > 0 else '−'}{abs(v):.3f} s" for k in est.breakdown_s
                 if abs(v := est.breakdown_s[k] - plain.breakdown_s.get(k, 0.0)) >= MIN_TERM_S]
        verdict = "faster" if est.step_time_s < plain.step_time_s else "slower"
        out.print(f"with compression the step is {verdict}: {est.step_time_s:.3f} s vs {plain.step_time_s:.3f} s "
                  f"uncompressed ({', '.join(diffs) or 'no term moves by 1 ms'})"
                  + ("; the quantize/dequantize passes cost more than the wire time they save"
                     if verdict == "slower" else ""), markup=False)


# the plan fields a data-parallel module estimate reads; any other set flag is refused in one line
_MODULE_FLAGS = {"dp", "zero"}


def _estimate_module(workload: S.WorkloadFlags, system: S.SystemFlags, plan: S.PlanFlags, *, as_json: bool,
                     other: bool) -> None:
    """`estimate --model torch:FILE.py:FACTORY --input ...`: model/module_estimate.py."""
    import dataclasses

    from rich.table import Table

    from distscope.errors import DistscopeError
    from distscope.model.module_estimate import estimate_module
    from distscope.report.console import out, print_json
    from distscope.workload.module_graph import load_factory, parse_inputs, trace_module

    default = S.PlanFlags()
    for f in dataclasses.fields(plan):
        if f.name not in _MODULE_FLAGS and getattr(plan, f.name) != getattr(default, f.name):
            flag = f.metadata["decls"][0].split("/")[0]
            raise DistscopeError(f"{flag}={getattr(plan, f.name)}: a torch module is planned data-parallel only "
                                 "(--dp, --zero 0 or 3); tensor, pipeline, context and expert parallelism need its "
                                 "structure (use a transformer model)")
    if other:
        raise DistscopeError("--report, --comm-volume and --quant-gbps are for transformer models")
    try:
        import torch  # noqa: F401  (the module is traced with it)
    except ImportError:
        raise DistscopeError(f"--model {workload.model}: tracing a torch module needs PyTorch, which is not "
                             "installed: pip install 'distscope[torch]'") from None
    if workload.mtp_layers is not None or workload.seq is not None:
        raise DistscopeError("--seq and --mtp-layers are for transformer models; a torch module is shaped by --input")
    inputs = parse_inputs(workload.input)
    cluster = S.build_cluster(system)
    dp = cluster.num_gpus if plan.dp is None else plan.dp
    if dp < 1 or dp > cluster.num_gpus:
        raise DistscopeError(f"--dp={dp} must be in 1..{cluster.num_gpus} (--gpus)")
    factory, name = load_factory(workload.model)
    graph = trace_module(factory, inputs, name)
    from distscope.errors import warn
    from distscope.model.kernel_data import missing_tables

    for w in missing_tables(cluster.device.name, [graph.dtype]):
        warn(w)
    est = estimate_module(graph, cluster, dp=dp, zero=plan.zero or 0, global_batch=workload.global_batch)
    d = {"model": workload.model, "params": graph.params, "dtype": graph.dtype.value, "dp": dp,
         "zero": plan.zero or 0, "global_batch": workload.global_batch, "ops": len(graph.ops)} | est.to_dict()
    if as_json:
        print_json(d)
        return
    t = Table(title=f"{name}: {graph.params / 1e6:,.1f}M params, {dp} GPUs of {cluster.device.name}, "
                    f"{est.micro_batches} micro-batch(es) of {graph.micro_batch}")
    t.add_column("term")
    t.add_column("seconds", justify="right")
    t.add_column("share", justify="right")
    for k, v in est.breakdown_s.items():
        t.add_row(k, f"{v:.4f}", f"{v / est.step_time_s:.1%}")
    out.print(t)
    gib = 2**30
    out.print(f"step {est.step_time_s:.4f} s, {est.samples_per_s:,.0f} samples/s, MFU {est.mfu:.1%}; memory per GPU "
              f"{sum(est.memory_bytes.values()) / gib:.1f} GiB of {est.capacity_bytes / gib:.1f} GiB"
              + ("" if est.feasible else " (does not fit)"), markup=False)
