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
    zero: S.ZeroOpt = 1,
    distributed_optimizer: S.DistOptOpt = False,
    micro_batch: S.MicroOpt = 1,
    global_batch: S.GlobalOpt = 128,
    seq: S.SeqOpt = 4096,
    recompute: S.RecomputeOpt = "none",
    recompute_layers: S.RecomputeLayersOpt = 0,
    schedule: S.ScheduleOpt = None,
    precision: S.PrecisionOpt = "bf16",
    overlap: S.OverlapOpt = "dp,tp,pp",
    attention: S.AttentionOpt = "flash",
    stage_layers: S.StageLayersOpt = None,
    link: S.LinkOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object instead of tables.")] = False,
) -> None:
    """Predict one training step: time with its breakdown, tokens/s, MFU/HFU and memory per GPU."""
    from distscope.model.estimate import estimate
    from distscope.report.console import out, print_json
    from distscope.report.estimate_table import estimate_json, estimate_tables

    sc = S.build_scenario(
        model=model, cluster=cluster, gpus=gpus, dp=dp, tp=tp, pp=pp, vp=vp, cp=cp, ep=ep,
        sequence_parallel=sequence_parallel, zero=zero, distributed_optimizer=distributed_optimizer,
        micro_batch=micro_batch, global_batch=global_batch, seq=seq, recompute=recompute,
        recompute_layers=recompute_layers, schedule=schedule, precision=precision, overlap=overlap,
        attention=attention, stage_layers=stage_layers, link=link,
    )
    est = estimate(sc.spec, sc.shape, sc.cluster, sc.plan)
    if as_json:
        print_json(estimate_json(sc, est))
        return
    for t in estimate_tables(sc, est):
        out.print(t)
