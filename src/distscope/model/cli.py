"""`distscope estimate`: closed-form step time, breakdown and memory for one scenario."""

from __future__ import annotations

from typing import Annotated

import typer

from distscope import scenario as S


def estimate_cmd(
    model: S.ModelOpt = "llama3-8b",
    cluster: S.ClusterOpt = "dgx-h100",
    gpus: S.GpusOpt = 8,
    dp: S.DpOpt = None,
    tp: S.TpOpt = 1,
    pp: S.PpOpt = 1,
    vp: S.VpOpt = 1,
    cp: S.CpOpt = 1,
    ep: S.EpOpt = 1,
    sequence_parallel: S.SpOpt = False,
    zero: S.ZeroOpt = 2,
    distributed_optimizer: S.DistOptOpt = False,
    micro_batch: S.MicroOpt = 1,
    global_batch: S.GlobalOpt = 128,
    seq: S.SeqOpt = None,
    recompute: S.RecomputeOpt = "none",
    recompute_layers: S.RecomputeLayersOpt = 0,
    schedule: S.ScheduleOpt = None,
    precision: S.PrecisionOpt = "bf16",
    overlap: S.OverlapOpt = "dp,tp,pp",
    attention: S.AttentionOpt = "flash",
    stage_layers: S.StageLayersOpt = None,
    first_stage_layers: S.FirstStageOpt = None,
    last_stage_layers: S.LastStageOpt = None,
    reshard_after_forward: S.ReshardOpt = True,
    etp: S.EtpOpt = None,
    capacity_factor: S.CapacityOpt = None,
    moe_a2a_overlap: S.A2AOverlapOpt = False,
    moe_dispatcher: S.DispatcherOpt = "alltoall",
    link: S.LinkOpt = None,
    profile: S.ProfileOpt = None,
    max_memory: S.MaxMemoryOpt = None,
    headroom: S.HeadroomOpt = None,
    framework: S.FrameworkOpt = "any",
    compress: Annotated[str | None, typer.Option("--compress", help="Quantized communication per class, e.g. dp-grad=int4-hs,weights=int4-diff,tp=fp8.")] = None,
    quant_gbps: Annotated[float | None, typer.Option("--quant-gbps", help="Quantize/dequantize throughput for --compress, GB of input per s (default: HBM-bound estimate).")] = None,
    software: S.SoftwareOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object instead of tables.")] = False,
    report: Annotated[str | None, typer.Option("--report", help="Also write a self-contained HTML report (plotly) to this file.")] = None,
    comm_volume: Annotated[bool, typer.Option(
        "--comm-volume", help="Print bytes per (op, dim) per training step per rank (each pipeline stage) instead."
    )] = False,
) -> None:
    """Predict one training step: time with its breakdown, tokens/s, MFU/HFU and memory per GPU."""
    from distscope.model.estimate import estimate
    from distscope.report.cli import check_report
    from distscope.report.console import out, print_json
    from distscope.report.estimate_table import estimate_json, estimate_tables

    check_report(report)
    sc = S.build_scenario(
        model=model, cluster=cluster, gpus=gpus, dp=dp, tp=tp, pp=pp, vp=vp, cp=cp, ep=ep,
        sequence_parallel=sequence_parallel, zero=zero, distributed_optimizer=distributed_optimizer,
        micro_batch=micro_batch, global_batch=global_batch, seq=seq, recompute=recompute,
        recompute_layers=recompute_layers, schedule=schedule, precision=precision, overlap=overlap,
        attention=attention, stage_layers=stage_layers, link=link, profile=profile,
        max_memory=max_memory, headroom=headroom, framework=framework,
        flags=S.PlanFlags(etp=etp, capacity_factor=capacity_factor, moe_a2a_overlap=moe_a2a_overlap,
                          moe_dispatcher=moe_dispatcher,
                          reshard_after_forward=reshard_after_forward, first_stage_layers=first_stage_layers,
                          last_stage_layers=last_stage_layers),
    )
    if comm_volume:
        from distscope.model.comm_volume import comm_volume_report, comm_volume_table

        volume = comm_volume_report(sc.spec, sc.shape, sc.plan)
        print_json(volume) if as_json else out.print(comm_volume_table(volume))
        return
    if compress:
        import dataclasses

        from distscope.compress.spec import parse_compression_config

        sc = dataclasses.replace(sc, plan=dataclasses.replace(sc.plan, compression=parse_compression_config(compress)))
    if quant_gbps is not None and quant_gbps <= 0:
        from distscope.errors import DistscopeError

        raise DistscopeError(f"--quant-gbps={quant_gbps} must be > 0")
    from distscope.software.presets import get_software

    sw = get_software(software) if software is not None else None
    est = estimate(sc.spec, sc.shape, sc.cluster, sc.plan, quant_GBps=quant_gbps, software=sw)
    from distscope.errors import warn
    from distscope.validate.envelope import outside

    beyond = outside(sc.cluster.device.name, sc.plan.precision.value, est.mfu) if est.feasible else None
    if beyond:
        warn(beyond)
    plain = None
    if sc.plan.compression is not None:
        import dataclasses

        plain = estimate(sc.spec, sc.shape, sc.cluster, dataclasses.replace(sc.plan, compression=None))
    d = estimate_json(sc, est)
    d["plan"]["compression"] = compress or "none"
    if plain is not None:
        d["uncompressed_step_time_s"] = plain.step_time_s
    if report:
        from distscope.report.cli import write_report
        from distscope.report.step_view import step_view

        d["step_view"] = step_view(sc.spec, sc.shape, sc.cluster, sc.plan)
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
