"""`distscope plan`: search every valid parallelization plan and print the fastest, ready to run."""

from __future__ import annotations

from typing import Annotated

import typer

from distscope import scenario as S
from distscope.errors import warn

# Re-ranking simulates one trace per class of equivalent ranks, but matching collectives still walks
# every member of each group: ~0.35 s at 16k GPUs, ~4 s at 262k, ~50 s at 1M (measured on the 2-core
# CI machine), so beyond this size the estimate's ranking stands.
RERANK_MAX_GPUS = 65536
RERANK_TIE = 1e-3  # simulated times closer than this do not reorder the estimator's ranking


def _degrees(value: str | None, flag: str) -> tuple[int, ...] | None:
    if not value:
        return None
    vals = S.parse_int_list(value, flag)
    if not vals or min(vals) < 1:
        from distscope.errors import DistscopeError

        raise DistscopeError(f"{flag}={value!r} must be a comma list of degrees >= 1")
    return vals


def _schedules(value: str) -> tuple:
    from distscope.errors import DistscopeError
    from distscope.plan import Schedule, parse_enum

    items = [x.strip().lower() for x in value.split(",") if x.strip()]
    if items == ["all"]:
        return tuple(s for s in Schedule if s is not Schedule.GPIPE)  # GPipe: 1F1B's time, more memory
    if not items:
        raise DistscopeError(f"--schedules={value!r} must name at least one schedule")
    return tuple(dict.fromkeys(parse_enum(Schedule, x, "--schedules") for x in items))


@S.with_flags(S.WorkloadFlags, S.SystemFlags, S.PlanFlags, defaults=(S.PLANNER_WORKLOAD, S.PLANNER_SYSTEM),
             only={S.PlanFlags: ("precision", "attention", "moe_dispatcher", "moe_balance", "software", "sharding", "compress")})
def plan_cmd(
    workload: S.WorkloadFlags,
    system: S.SystemFlags,
    plan: S.PlanFlags,
    overlap: Annotated[str | None, typer.Option("--overlap", help="Communication the software can overlap (all of it is used): comma list of dp,tp,pp, or none (default: what the --software preset hides; none named: dp,tp,pp).")] = None,
    top: Annotated[int, typer.Option("--top", "-k", help="How many ranked plans to print.")] = 10,
    tp: Annotated[str | None, typer.Option("--tp", help="Restrict tp to these degrees (comma list).")] = None,
    pp: Annotated[str | None, typer.Option("--pp", help="Restrict pp to these degrees (comma list).")] = None,
    cp: Annotated[str | None, typer.Option("--cp", help="Restrict cp to these degrees (comma list).")] = None,
    ep: Annotated[str | None, typer.Option("--ep", help="Restrict ep to these degrees (comma list).")] = None,
    max_tp: Annotated[int | None, typer.Option("--max-tp", help="Largest tp (default: GPUs per node, the NVLink domain).")] = None,
    max_vp: Annotated[int, typer.Option("--max-vp", help="Largest virtual pipeline degree.")] = 8,
    max_micro_batch: Annotated[int, typer.Option("--max-micro-batch", help="Largest micro-batch.")] = 16,
    schedules: Annotated[str, typer.Option("--schedules", help="Pipeline schedules to search, comma list of 1f1b, interleaved-1f1b, zb-h1, zb-v, dualpipe, 2bw, or all.")] = "1f1b,interleaved-1f1b",
    compression: Annotated[bool, typer.Option("--compression/--no-compression", help="Also search quantized communication (DP grads, ZeRO weights, TP activations).")] = True,
    quant_gbps: Annotated[float | None, typer.Option("--quant-gbps", help="Quantize/dequantize throughput, GB of input per s (default: HBM-bound estimate).")] = None,
    simulate_top: Annotated[int, typer.Option("--simulate-top", help="Re-rank the best K plans with the discrete-event simulator (0 = off).")] = 3,
    network_mode: Annotated[str, typer.Option("--network-mode", help="Simulator network model for --simulate-top: shared (concurrent transfers share a level's bandwidth) or unaware.")] = "shared",
    fabric: Annotated[str | None, typer.Option("--fabric", help="Simulate the --simulate-top plans with the scale-out on a fabric (switches, links, routing): a fabric YAML, or 'preset' for the cluster's rail-optimized Clos.")] = None,
    routing: Annotated[str, typer.Option("--routing", help="With --fabric: ecmp, spray or adaptive.")] = "ecmp",
    seed: Annotated[int, typer.Option("--seed", help="With --fabric: the ECMP hash seed.")] = 0,
    cc: Annotated[str, typer.Option("--cc", help="With --fabric: congestion control, none (max-min fair rates) or "
                                    "dcqcn (RoCE's: each flow's rate state machine on fluid queues).")] = "none",
    report: Annotated[str | None, typer.Option("--report", help="Also write a self-contained HTML report (plotly) to this file.")] = None,
    framework: Annotated[str | None, typer.Option("--framework", help="Search only plans this framework runs: megatron, torchtitan or any (no framework's limits; default: the --software preset's framework, else megatron).")] = None,
    write_sharding: Annotated[str | None, typer.Option("--write-sharding", help="With --model dlrm:...: write the "
                                                       "embedding sharding found to this YAML file (estimate --sharding reads it).")] = None,
    torchrec: Annotated[bool, typer.Option("--torchrec", help="With --model dlrm:...: also run TorchRec's own sharding "
                                           "planner on the same tables (where TorchRec imports), price its plan with "
                                           "distscope's model and show each rank's costs beside TorchRec's estimates.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object instead of tables.")] = False,
    workers: Annotated[int, typer.Option("--workers", "-j", help="Processes for the plan search of a large space (0 = one per core); the plans found are the same.")] = 0,
) -> None:
    """Search tp, pp, vp, cp, ep, dp, sequence parallel, ZeRO/distributed optimizer, micro-batch and
    recompute; rank by predicted step time; explain the winner; print Megatron-LM and torchtitan config.
    With --software the attention kernel comes from the preset and --overlap is capped to what it hides."""
    from distscope.dtypes import Precision
    from distscope.errors import DistscopeError
    from distscope.plan import AttentionImpl, Framework, MoeBalance, MoeDispatcher, parse_enum
    from distscope.report.cli import check_report
    from distscope.report.console import out, print_json
    from distscope.search.compression import best_compressed, caveats, config_label
    from distscope.search.explain import explain
    from distscope.search.planner import merge, search
    from distscope.search.report import (
        breakdown_table,
        candidate_json,
        compression_json,
        compression_table,
        other_layout,
        partition_json,
        runner_up,
        top_table,
    )
    from distscope.search.settings import auto_precisions, planner_space
    from distscope.search.space import SearchSpace

    check_report(report)
    if top < 1:
        raise DistscopeError(f"--top={top} must be >= 1")
    if simulate_top < 0:
        raise DistscopeError(f"--simulate-top={simulate_top} must be >= 0")
    from distscope.sim.network import NetworkMode

    mode = parse_enum(NetworkMode, network_mode, "--network-mode")
    from distscope.workload.embedding import is_dlrm_ref
    from distscope.workload.module_graph import is_module_ref

    given = [name for name, v in (("--tp", tp), ("--pp", pp), ("--cp", cp), ("--ep", ep), ("--fabric", fabric),
                                  ("--report", report), ("--framework", framework), ("--overlap", overlap)) if v]
    if is_dlrm_ref(workload.model):
        if given:
            raise DistscopeError(f"{given[0]}: a recommendation model is planned by its embedding sharding; its dense "
                                 "part is data-parallel over every GPU")
        from distscope.model.dlrm_cli import plan_dlrm_cmd

        plan_dlrm_cmd(workload, system, plan, write=write_sharding, codec_gbps=quant_gbps, torchrec=torchrec,
                      as_json=as_json)
        return
    if write_sharding is not None or torchrec:
        raise DistscopeError(f"{'--write-sharding' if write_sharding else '--torchrec'} is for recommendation models "
                             "(--model dlrm:...)")
    if plan.sharding is not None:
        raise DistscopeError(f"--sharding={plan.sharding} is for recommendation models (--model dlrm:...)")
    if plan.compress is not None:
        raise DistscopeError(f"--compress={plan.compress}: plan searches a transformer's compression itself "
                             "(--compression/--no-compression); --compress is plan's choice for recommendation "
                             "models (--model dlrm:...)")
    if is_module_ref(workload.model):
        if given:
            raise DistscopeError(f"{given[0]}: plan searches a torch module's plans itself (DDP or FSDP, recompute, "
                                 "a pipeline split over its top-level children, the micro-batch); use a transformer "
                                 "model for the rest")
        from distscope.model.module_cli import plan_module_cmd

        plan_module_cmd(workload, system, top=top, as_json=as_json)
        return
    if fabric is not None and simulate_top == 0:
        raise DistscopeError("--fabric prices the plans --simulate-top simulates: give --simulate-top K > 0")
    spec, shape = S.build_workload(workload)
    model, cluster, gpus, global_batch, seq = workload.model, system.cluster, system.gpus, shape.global_batch, shape.seq_len
    precision = plan.precision
    c = S.build_cluster(system)
    sw = S.software_of(plan)
    auto = plan.precision.strip().lower() == "auto"
    precisions = auto_precisions(c.device) if auto else [Precision.parse(plan.precision, "--precision")]
    spaces = [planner_space(
        spec=spec, device=c.device, precision=prec, software=sw,
        framework=None if framework is None else parse_enum(Framework, framework, "--framework"),  # type: ignore[arg-type]
        attention=None if plan.attention is None else parse_enum(AttentionImpl, plan.attention, "--attention"),  # type: ignore[arg-type]
        overlap=None if overlap is None else S.parse_overlap(overlap),
        moe_dispatcher=parse_enum(MoeDispatcher, plan.moe_dispatcher, "--moe-dispatcher"),  # type: ignore[arg-type]
        moe_balance=(None if plan.moe_balance is None
                     else parse_enum(MoeBalance, plan.moe_balance, "--moe-balance")),  # type: ignore[arg-type]
        limits=SearchSpace(tp=_degrees(tp, "--tp"), pp=_degrees(pp, "--pp"), cp=_degrees(cp, "--cp"),
                           ep=_degrees(ep, "--ep"), max_tp=max_tp, max_vp=max_vp, max_micro_batch=max_micro_batch,
                           schedules=_schedules(schedules)),
    ) for prec in precisions]
    from distscope.report.progress import progress
    from distscope.search.parallel import cpu_count

    if not 0 <= workers <= 1024:
        raise DistscopeError(f"--workers={workers} must be in 0..1024 (0 = one per core)")
    n_workers = min(workers or cpu_count(), cpu_count())  # CPU-bound: more processes than cores only cost memory
    if workers > n_workers:
        warn(f"--workers={workers}: this host runs {n_workers} at a time; searching with {n_workers}")
    results = []
    for sp in spaces:
        S.warn_kernel_fallbacks(c.device, sp.precision)
        with progress(None, f"searching layouts ({sp.precision.value})") as bar:
            results.append(search(spec, shape, c, sp, top_k=top, progress=bar.update, workers=n_workers))
    res = merge(results, top) if auto else results[0]
    space = spaces[0] if res.best is None else next(sp for sp in spaces if sp.precision is res.best.plan.precision)
    fw = space.framework
    if res.best is None:
        if res.layouts == 0:
            from distscope.search.space import why_no_layout

            raise DistscopeError(f"no plan for model={model} on gpus={gpus} of {cluster}: "
                                 + why_no_layout(space, spec, shape, c))
        raise DistscopeError(f"no plan fits: model={model} on gpus={gpus} of {cluster} (global_batch={global_batch}, "
                             f"seq={seq}, precision={precision}); evaluated {res.evaluated} plans over {res.layouts} "
                             f"layouts, none within {c.memory_capacity_bytes / 2**30:.1f} GiB per GPU (usable "
                             f"{c.device.usable_bytes / 2**30:.1f} GiB less {100 * c.headroom_frac:.0f}% headroom)")
    ranked = list(res.top)
    simulated = []
    if fabric is not None:
        from distscope.fabric.network import fabric_choice

        on_fabric = fabric_choice(fabric, routing, seed, c.name, c.num_gpus, cc)
    if simulate_top and spec.special_layers is not None:
        warn(f"--simulate-top skipped: the simulator does not model {spec.special_layers}; ranking by the estimate")
    elif simulate_top and c.num_gpus > RERANK_MAX_GPUS:
        warn(f"--simulate-top skipped: {c.num_gpus:,} GPUs > {RERANK_MAX_GPUS:,} (the simulator's cost grows with "
             "the data-parallel group); ranking by the estimate")
    elif simulate_top:
        from distscope.search.report import rerank_status
        from distscope.search.rerank import simulate_candidates

        with progress(min(simulate_top, len(ranked)), "simulating the top plans") as bar:
            simulated = simulate_candidates(spec, shape, c, ranked[:simulate_top], mode=mode,  # type: ignore[arg-type]
                                            progress=bar.update, software=sw,
                                            status=rerank_status(bar.describe, ranked[:simulate_top]),
                                            fabric=on_fabric if fabric is not None else None)
        first = next(x for x in simulated if x.candidate is res.top[0])
        if simulated[0].simulated_step_s < first.simulated_step_s * (1 - RERANK_TIE):
            head = [x.candidate for x in simulated]  # a real reordering; else the estimate's order stands
            ranked = head + [x for x in ranked if all(x is not h for h in head)]
    best = ranked[0]
    from distscope.search.planner import partition_gain
    from distscope.search.report import fabric_lines, partition_line, tie_json, tie_line
    from distscope.validate.envelope import outside

    sim_of = {id(x.candidate): x.simulated_step_s for x in simulated}
    sim_ordered = len(simulated) if simulated and best is not res.top[0] else 0  # rows the simulator ordered
    tie = tie_json(ranked, res.pool, spec.moe is not None)
    tied = [i in tie["ranks"] for i in range(1, len(ranked) + 1)]
    split = partition_gain(spec, shape, c, best, sw)  # about the plan printed as #1

    beyond = outside(c.device.name, best.plan.precision.value, best.estimate.mfu)
    if beyond:
        warn(beyond)
    if simulated and best is not res.top[0]:
        why = (f"the simulator ({mode.value} network) puts it first: {simulated[0].simulated_step_s:.3f} s simulated vs "
               f"{next(x.simulated_step_s for x in simulated if x.candidate is res.top[0]):.3f} s for the "
               f"estimator's #1; vs that plan: {explain(best, res.top[0], spec.layers)}")
    else:
        second = runner_up(tuple(ranked))
        why = explain(best, second, spec.layers) if second is not None else "only one feasible plan"
    other = other_layout((best, *[x for x in res.pool if x is not best]))
    why_layout = explain(best, other, spec.layers) if other is not None else ""
    cr = (best_compressed(spec, shape, c, res.pool, res.comm_pool, quant_GBps=quant_gbps, base=best, software=sw)
          if compression else None)
    configs = framework_configs(best.plan, spec, shape, c)
    import dataclasses

    again = reproduce_command(best.plan, dataclasses.replace(workload, seq=seq), system,
                              software=sw.name if sw else None)
    result = {
        "model": spec.name, "cluster": c.name, "gpus": c.num_gpus, "seq": seq, "global_batch": global_batch,
        "capacity_bytes": c.memory_capacity_bytes, "usable_bytes": c.device.usable_bytes,
        "best": candidate_json(best),
        "top": [{**candidate_json(x), "simulated_step_s": sim_of.get(id(x)), "tie": f} for x, f in zip(ranked, tied, strict=True)],
        "ranked_by_simulation": sim_ordered, "tie": tie,
        "evaluated": res.evaluated, "feasible": res.feasible, "layouts": res.layouts, "search_s": res.search_s,
        "search_processes": res.processes,
        "precisions_searched": [p.value for p in precisions], "why": why, "why_layout": why_layout, "partition": partition_json(split, best.plan), "compression": compression_json(cr),
        "framework": fw.value, "software": sw.name if sw else None, **configs, "estimate_command": again,
        "simulated": [{**candidate_json(x.candidate), "estimated_step_s": x.estimated_step_s,
                       "simulated_step_s": x.simulated_step_s, "sim_wall_s": x.sim_wall_s,
                       "fabric": [dataclasses.asdict(v) for v in x.fabric]} for x in simulated],
        "fabric": None if fabric is None else {"name": on_fabric.fabric.name, "routing": on_fabric.routing.value,
                                               "seed": on_fabric.seed, "cc": on_fabric.cc.value},
        "network_mode": mode.value,
    }
    if report:
        from distscope.report.cli import write_report
        from distscope.report.step_view import step_view

        result["step_view"] = step_view(spec, shape, c, best.plan, software=sw)
        write_report(result, report)
    if as_json:
        print_json(result)
        return
    title = (f"{spec.name} on {c.num_gpus} GPUs of {c.name} · global batch {global_batch} · seq {seq} · "
             f"{'/'.join(p.value for p in precisions)}: top {len(ranked)} of {res.feasible:,} feasible plans"
             + (f", first {sim_ordered} ranked by simulation" if sim_ordered
                else f", first {len(simulated)} simulated" if simulated else ""))
    out.print(top_table(ranked, title, simulated_s=[sim_of.get(id(x)) for x in ranked], sim_ordered=sim_ordered,
                        tie=tied))
    line = tie_line(tie, ranked)
    if line:
        out.print(line)
    out.print(breakdown_table(best))
    on = f" on {res.processes} processes" if res.processes > 1 else ""
    out.print(f"searched {res.evaluated:,} plans over {res.layouts:,} layouts in {res.search_s:.2f} s{on}")
    if simulated:
        wall = sum(x.sim_wall_s for x in simulated)
        order = ("they are ranked by simulated step time (sim s)" if sim_ordered else
                 f"no plan beats the estimator's #1 by more than {100 * RERANK_TIE:.1f}%, so the estimate's order stands")
        on = f", scale-out on fabric {on_fabric.fabric.name} ({on_fabric.routing.value}, cc {on_fabric.cc.value})" if fabric is not None else ""
        out.print(f"[bold]simulated[/bold] the top {len(simulated)} ({mode.value} network{on}, symmetric traces; "
                  f"{wall:.2f} s of simulation): {order}")
        if fabric is not None:
            out.print(fabric_lines(simulated, best), markup=False)
    out.print(f"[bold]why #1 wins[/bold] (vs the next distinct plan): {why}")
    if auto and best.plan.precision is not Precision.BF16:
        out.print(f"[bold]precision[/bold]: #1 trains in {best.plan.precision.value} (searched "
                  f"{', '.join(p.value for p in precisions)}): a numerics choice as well as a speed one; check "
                  "convergence at this precision before committing to it")
    if why_layout:
        out.print(f"[bold]vs the best other tp/pp layout[/bold]: {why_layout}")
    if split is not None:
        out.print(partition_line(split, best.plan))
    if cr is not None:
        out.print(compression_table(cr))
        if cr.speedup <= 1.0:
            out.print(f"no compression option beats the uncompressed #1 ({cr.uncompressed.step_time_s:.3f} s): "
                      "communication is already hidden or small")
        else:
            out.print(f"with {config_label(cr.compressed.plan.compression)}: {cr.uncompressed.step_time_s:.3f} s -> "
                      f"{cr.compressed.step_time_s:.3f} s ({cr.speedup:.3f}x). Convergence risk:")
            for line in caveats(cr.compressed.plan.compression):
                out.print(f"  - {line}")
    for name, key, what in (("Megatron-LM", "megatron", f"{configs['megatron']['script']} arguments; model/data flags "
                                                         "not shown"),
                            ("torchtitan", "torchtitan", "a recipe: torchtitan's Python configuration")):
        cfg = configs[key]
        if cfg["problems"]:
            out.print(f"[bold]{name}[/bold]: not offered for this plan: {'; '.join(cfg['problems'])} "
                      f"(`--framework {key}` searches only plans {name} runs)")
        else:
            out.print(f"[bold]{name}[/bold] ({what}):")
            out.print(cfg["text"], markup=False, soft_wrap=True)
    out.print("[bold]reproduce #1[/bold]:")
    out.print(again, markup=False, soft_wrap=True)


def reproduce_command(plan, workload, system, software: str | None) -> str:
    """The `distscope estimate` command that gives this plan's prediction (scenario/argv.py)."""
    from distscope.scenario.argv import command, plan_flags

    return command("estimate", workload, system, plan_flags(plan, software=software))


def framework_configs(plan, spec, shape, cluster) -> dict:
    """Megatron-LM arguments and a torchtitan recipe for `plan`, each with the reasons its framework
    cannot run it (then no text) or the problems its pinned-commit check finds (a bug if any)."""
    from distscope.search import megatron_check, torchtitan_check
    from distscope.search.emit import megatron_args, megatron_command, megatron_env, megatron_script, torchtitan_recipe
    from distscope.search.frameworks import Framework, pre_blackwell, unsupported

    pb = pre_blackwell(cluster.device)
    out = {}
    why = unsupported(Framework.MEGATRON, plan, spec, cluster.device)
    text = "" if why else megatron_command(plan, spec, shape, pb)
    if not why:
        why = megatron_check.check(megatron_args(plan, spec, shape), megatron_env(plan, pb), pb)
    out["megatron"] = {"text": text, "problems": why, "pinned_commit": megatron_check.pinned_commit(),
                       "script": megatron_script(spec)}
    why = unsupported(Framework.TORCHTITAN, plan, spec, cluster.device)
    text = "" if why else torchtitan_recipe(plan, spec, shape, cluster.gpus_per_node)
    if not why:
        why = torchtitan_check.check(text, gpus=cluster.num_gpus, layers=spec.layers)
    out["torchtitan"] = {"text": text, "problems": why, "pinned_commit": torchtitan_check.pinned_commit()}
    return out
