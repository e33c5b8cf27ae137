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
    inference: Annotated[bool, typer.Option(
        "--inference", help="With a torch module: one forward per batch on one GPU instead of a training step: latency, "
                            "throughput and FLOP/s over peak, per model and per top-level child.")] = False,
    batches: Annotated[str | None, typer.Option(
        "--batches", help="With --inference: comma list of batch sizes to sweep (default: the --input's leading dim).")] = None,
) -> None:
    """Predict one training step: time with its breakdown, tokens/s, MFU/HFU and memory per GPU. Plan
    choices left out take the --software preset's defaults (none named: see the README)."""
    from distscope.model.estimate import estimate
    from distscope.report.cli import check_report
    from distscope.report.console import out, print_json
    from distscope.report.estimate_table import estimate_json, estimate_tables

    check_report(report)
    from distscope.workload.embedding import is_dlrm_ref
    from distscope.workload.module_graph import is_module_ref

    if is_dlrm_ref(workload.model):
        from distscope.model.dlrm_cli import estimate_dlrm_cmd

        estimate_dlrm_cmd(workload, system, plan, as_json=as_json, codec_gbps=quant_gbps,
                          other=bool(report or comm_volume or inference or batches))
        return
    if is_module_ref(workload.model):
        from distscope.model.module_cli import module_cmd

        module_cmd(workload, system, plan, as_json=as_json, inference=inference, batches=batches,
                   other=bool(report or comm_volume or quant_gbps))
        return
    if inference or batches is not None:
        from distscope.errors import DistscopeError

        raise DistscopeError("--inference and --batches are for torch modules (--model torch:FILE.py:FACTORY); "
                             "transformer serving is `distscope serve`")
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
