"""The `estimate` report: step time, where it goes, and memory per GPU."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from distscope.model.result import Estimate
from distscope.model.routing import routed_load
from distscope.plan import Plan
from distscope.report.console import gib, secs
from distscope.scenario import Scenario
from distscope.search.compression import config_label
from distscope.workload.params import total_params


def plan_dict(plan: Plan) -> dict[str, Any]:
    moe = {"etp": plan.expert_tp, "capacity_factor": plan.capacity_factor, "moe_a2a_overlap": plan.moe_a2a_overlap,
           "moe_dispatcher": plan.moe_dispatcher.value, "moe_balance": plan.balance.value} if plan.ep > 1 else {}
    return {
        "dp": plan.dp, "tp": plan.tp, "pp": plan.pp, "vp": plan.vp, "cp": plan.cp, "ep": plan.ep,
        "sequence_parallel": plan.sp, "zero_stage": plan.zero_stage,
        "distributed_optimizer": plan.distributed_optimizer, "micro_batch": plan.micro_batch,
        "recompute": plan.recompute.value, "recompute_layers": plan.recompute_layers,
        "schedule": plan.schedule.value, "precision": plan.precision.value,
        "overlap": sorted(d.value for d in plan.overlap), "attention": plan.attention.value,
        "stage_layers": list(plan.stage_layers), "framework": plan.framework.value,
        "reshard_after_forward": plan.reshard_after_forward, "compression": config_label(plan.compression), **moe,
    }


def estimate_json(sc: Scenario, est: Estimate) -> dict[str, Any]:
    return {
        "model": sc.spec.name, "cluster": sc.cluster.name, "gpus": sc.cluster.num_gpus,
        "seq": sc.shape.seq_len, "global_batch": sc.shape.global_batch, "plan": plan_dict(sc.plan),
        "software": sc.software.name if sc.software is not None else None,
        **est.to_dict(),
    }


def estimate_tables(sc: Scenario, est: Estimate) -> list[Table]:
    p = sc.plan
    head = Table(title=f"{sc.spec.name} ({total_params(sc.spec) / 1e9:.1f}B) on {sc.cluster.gpus_per_node}x"
                 f"{sc.cluster.device.name} · {sc.cluster.num_gpus} GPUs ({sc.cluster.name})", show_header=False)
    head.add_column(style="bold")
    head.add_column()
    head.add_row("plan", p.degrees() + f" sp={int(p.sp)} do={int(p.distributed_optimizer)} "
                 f"recompute={p.recompute.value} schedule={p.schedule.value} precision={p.precision.value} "
                 f"overlap={','.join(sorted(d.value for d in p.overlap)) or 'none'}")
    head.add_row("step time", secs(est.step_time_s) + f"  ({est.microbatches} micro-batches per pipeline)")
    head.add_row("throughput", f"{est.tokens_per_s:,.0f} tokens/s · {est.tflops_per_gpu:.0f} model TFLOP/s per GPU")
    head.add_row("MFU / HFU", f"{100 * est.mfu:.1f}% / {100 * est.hfu:.1f}%")
    fits = (f"fits, {gib(est.margin_bytes)} to spare" if est.feasible
            else f"[red]DOES NOT FIT: {est.infeasible_reason}[/red]")
    head.add_row("memory per GPU", f"{gib(est.memory.total_bytes)} of {gib(est.capacity_bytes)} "
                 f"({gib(est.usable_bytes)} usable less {100 * sc.cluster.headroom_frac:.0f}% headroom"
                 f"{'' if sc.cluster.max_memory_bytes is None else ', capped by --max-memory'}) — {fits}")
    if sc.spec.moe is not None and p.ep > 1:
        load = routed_load(sc.spec, p, sc.shape.seq_len * p.micro_batch // p.cp)
        head.add_row("MoE routing", f"{p.balance.value} balancing: the busiest of {p.ep} EP ranks gets {load:.3f}x "
                     "the mean routed tokens (it sets each MoE layer's pace; model/routing.py)")
    if p.compression is not None:
        from distscope.search.compression import config_label

        head.add_row("compression", f"{config_label(p.compression)} (wire bytes scaled by each method's ratio; "
                     "quantize/dequantize time is in the tp/dp rows)")

    bd = Table(title="Where the step goes (exposed time)")
    bd.add_column("part")
    bd.add_column("seconds", justify="right")
    bd.add_column("share", justify="right")
    bd.add_column("comm before overlap", justify="right")
    for k, v in est.breakdown_s.items():
        tot = est.comm_total_s.get(k)
        bd.add_row(k, f"{v:.4f}", f"{100 * v / est.step_time_s:.1f}%", "" if tot is None else f"{tot:.4f}")

    mem = Table(title="Memory per GPU (worst pipeline stage)")
    mem.add_column("term")
    mem.add_column("size", justify="right")
    for k, v in est.memory.terms().items():
        mem.add_row(k, gib(v))
    return [head, bd, mem]
