"""`distscope estimate --model torch:FILE.py:FACTORY --input ...`: a traced torch module's training step
(model/module_estimate.estimate_module) or, with --inference, its forward per batch size (infer_module)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from distscope import scenario as S

if TYPE_CHECKING:
    from distscope.system.topology import Cluster
    from distscope.trace.builder import StepSpec
    from distscope.workload.module_graph import InputSpec, ModuleGraph

# the plan fields a data-parallel module estimate reads; any other set flag is refused in one line
_MODULE_FLAGS = ("dp", "zero", "recompute", "pp")


def _recompute(plan: S.PlanFlags) -> bool:
    """--recompute none (default) or full (each top-level child checkpointed); one line otherwise."""
    from distscope.errors import DistscopeError

    if plan.recompute in (None, "none", "full"):
        return plan.recompute == "full"
    raise DistscopeError(f"--recompute={plan.recompute}: a torch module recomputes its top-level children whole "
                         "(full) or nothing (none); selective recompute needs a transformer's structure")


def _module_checks(workload: S.WorkloadFlags, plan: S.PlanFlags, other: bool) -> None:
    """The flags a module estimate refuses (one line each) and the torch it needs."""
    from distscope.errors import DistscopeError

    given = S.first_set_flag(plan, _MODULE_FLAGS)
    if given is not None:
        raise DistscopeError(f"{given[0]}={given[1]}: a torch module is planned data parallel (--dp, --zero 0 or "
                             "3) and pipelined over its top-level children (--pp); tensor, context and expert "
                             "parallelism need its structure (use a transformer model)")
    if other:
        raise DistscopeError("--report, --comm-volume and --quant-gbps are for transformer models")
    try:
        import torch  # noqa: F401  (the module is traced with it)
    except ImportError:
        raise DistscopeError(f"--model {workload.model}: tracing a torch module needs PyTorch, which is not "
                             "installed: pip install 'distscope[torch]'") from None
    if workload.mtp_layers is not None or workload.seq is not None:
        raise DistscopeError("--seq and --mtp-layers are for transformer models; a torch module is shaped by --input")


def _dp(plan: S.PlanFlags, cluster: Cluster) -> int:
    """--dp (every GPU by default; with --pp the GPUs over the stages), or one line when it does not fit."""
    from distscope.errors import DistscopeError

    if plan.pp > 1:
        if cluster.num_gpus % plan.pp or (plan.dp is not None and plan.dp * plan.pp != cluster.num_gpus):
            raise DistscopeError(f"--pp={plan.pp} x --dp={plan.dp} must be --gpus={cluster.num_gpus}: every GPU "
                                 "holds one stage of one replica")
        return cluster.num_gpus // plan.pp
    dp = cluster.num_gpus if plan.dp is None else plan.dp
    if dp < 1 or dp > cluster.num_gpus:
        raise DistscopeError(f"--dp={dp} must be in 1..{cluster.num_gpus} (--gpus)")
    return dp


def _traced(workload: S.WorkloadFlags, inputs: tuple[InputSpec, ...], device_name: str, *,
            inference: bool) -> ModuleGraph:
    """The module traced for `inputs`, with a warning for each kernel table that stands in for the device's."""
    from distscope.errors import warn
    from distscope.model.kernel_data import missing_tables
    from distscope.workload.module_graph import load_factory, trace_module

    factory, name = load_factory(workload.model)
    graph = trace_module(factory, inputs, name, inference=inference)
    for w in missing_tables(device_name, [graph.dtype]):
        warn(w)
    return graph


def module_cmd(workload: S.WorkloadFlags, system: S.SystemFlags, plan: S.PlanFlags, *, as_json: bool,
               inference: bool, batches: str | None, other: bool) -> None:
    """`estimate` of a torch module: its training step, or with --inference its forward per batch size."""
    if inference:
        infer_module_cmd(workload, system, plan, as_json=as_json, batches=batches, other=other)
        return
    if batches is not None:
        from distscope.errors import DistscopeError

        raise DistscopeError("--batches sweeps --inference batch sizes; add --inference")
    estimate_module_cmd(workload, system, plan, as_json=as_json, other=other)


def estimate_module_cmd(workload: S.WorkloadFlags, system: S.SystemFlags, plan: S.PlanFlags, *, as_json: bool,
                        other: bool) -> None:
    """`estimate --model torch:FILE.py:FACTORY --input ...`: model/module_estimate.estimate_module."""
    from distscope.model.module_estimate import estimate_module
    from distscope.report.console import breakdown_table, out, print_json
    from distscope.workload.module_graph import parse_inputs

    _module_checks(workload, plan, other)
    inputs = parse_inputs(workload.input)
    cluster = S.build_cluster(system)
    recompute = _recompute(plan)
    dp = _dp(plan, cluster)
    graph = _traced(workload, inputs, cluster.device.name, inference=False)
    if plan.pp > 1:
        from distscope.model.module_pipeline import estimate_module_pipeline

        est = estimate_module_pipeline(graph, cluster, pp=plan.pp, zero=plan.zero or 0,
                                       global_batch=workload.global_batch, recompute=recompute)
    else:
        est = estimate_module(graph, cluster, dp=dp, zero=plan.zero or 0, global_batch=workload.global_batch,
                              recompute=recompute)
    name = graph.name
    d = {"model": workload.model, "params": graph.params, "dtype": graph.dtype.value, "dp": dp, "pp": plan.pp,
         "zero": plan.zero or 0, "recompute": "full" if recompute else "none", "global_batch": workload.global_batch,
         "ops": len(graph.ops)} | est.to_dict()
    if as_json:
        print_json(d)
        return
    out.print(breakdown_table(f"{name}: {graph.params / 1e6:,.1f}M params, {dp * plan.pp} GPUs of {cluster.device.name}"
                              + (f" ({plan.pp} stages x {dp} replicas)" if plan.pp > 1 else "") + ", "
                              f"{est.micro_batches} micro-batch(es) of {graph.micro_batch}", est.breakdown_s,
                              est.step_time_s))
    gib = 2**30
    out.print(f"step {est.step_time_s:.4f} s, {est.samples_per_s:,.0f} samples/s, MFU {est.mfu:.1%}; memory per GPU "
              f"{sum(est.memory_bytes.values()) / gib:.1f} GiB of {est.capacity_bytes / gib:.1f} GiB"
              + ("" if est.feasible else " (does not fit)"), markup=False)


def module_step(workload: S.WorkloadFlags, system: S.SystemFlags, plan: S.PlanFlags) -> tuple[StepSpec, dict[str, Any]]:
    """`trace generate --model torch:...`: the StepSpec of the module's step, data parallel and with --pp
    pipelined (trace/from_module.py), and its plan fields, from the same flags and checks as its estimate."""
    from distscope.model.module_estimate import micro_batch_count
    from distscope.trace.from_module import module_step_spec
    from distscope.workload.module_graph import parse_inputs

    _module_checks(workload, plan, False)
    inputs = parse_inputs(workload.input)
    cluster = S.build_cluster(system)
    dp, zero, recompute = _dp(plan, cluster), plan.zero or 0, _recompute(plan)
    m = micro_batch_count(inputs[0].shape[0], dp=dp, zero=zero, global_batch=workload.global_batch)  # before tracing
    graph = _traced(workload, inputs, cluster.device.name, inference=False)
    return (module_step_spec(graph, cluster, dp=dp, zero=zero, micro_batches=m, recompute=recompute, pp=plan.pp),
            {"dp": dp, "zero": zero, "micro_batches": m, "recompute": "full" if recompute else "none", "pp": plan.pp})


def infer_module_cmd(workload: S.WorkloadFlags, system: S.SystemFlags, plan: S.PlanFlags, *, as_json: bool,
                     batches: str | None, other: bool) -> None:
    """`estimate --inference`: forward latency and utilization per batch size (model/module_estimate.py)."""
    from rich.table import Table

    from distscope.errors import DistscopeError
    from distscope.model import host
    from distscope.model.module_estimate import infer_module
    from distscope.report.console import out, print_json
    from distscope.workload.module_graph import at_batch, parse_inputs

    _module_checks(workload, plan, other)
    if plan.dp is not None or plan.zero is not None:
        raise DistscopeError("--dp and --zero are training flags; --inference prices one GPU's forward")
    inputs = parse_inputs(workload.input)
    sizes = [inputs[0].shape[0]]
    if batches is not None:
        try:
            sizes = [int(b) for b in batches.split(",")]
        except ValueError:
            raise DistscopeError(f"--batches={batches!r} must be a comma list of positive integers") from None
        if any(b < 1 for b in sizes):
            raise DistscopeError(f"--batches={batches!r} must be a comma list of positive integers")
    device = S.build_cluster(system).device
    runs = [infer_module(_traced(workload, at_batch(inputs, b), device.name, inference=True), device) for b in sizes]
    if as_json:
        print_json({"model": workload.model, "device": device.name, "runs": [r.to_dict() for r in runs]})
        return
    t = Table(title=f"{workload.model} forward on one {device.name}")
    for c in ("batch", "latency ms", "samples/s", "FLOP/s / peak"):
        t.add_column(c, justify="right")
    for r in runs:
        t.add_row(str(r.batch), f"{r.latency_s * 1e3:.3f}", f"{r.samples_per_s:,.0f}", f"{r.utilization:.1%}")
    out.print(t)
    last = runs[-1]
    per = Table(title=f"per top-level child at batch {last.batch}")
    for c in ("module", "GPU ms", "FLOP/s / peak"):
        per.add_column(c, justify="right" if c != "module" else "left")
    for m, sec, u in last.per_module:
        per.add_row(m or "(root)", f"{sec * 1e3:.3f}", f"{u:.1%}")
    out.print(per)
    out.print(f"latency: {host.EAGER_MODULE_NOTE}", markup=False)


def plan_module_cmd(workload: S.WorkloadFlags, system: S.SystemFlags, *, top: int, as_json: bool) -> None:
    """`plan --model torch:FILE.py:FACTORY --input ...`: search/module_plan.py."""
    from rich.table import Table

    from distscope.errors import DistscopeError
    from distscope.report.console import out, print_json
    from distscope.report.progress import progress
    from distscope.search.module_plan import micro_batches, per_gpu_batch, plan_module, ranked_rows, why
    from distscope.search.report import TIE_REL
    from distscope.workload.module_graph import at_batch, parse_inputs

    _module_checks(workload, S.PlanFlags(), False)
    inputs = parse_inputs(workload.input)
    cluster = S.build_cluster(system)

    def trace(mb: int) -> ModuleGraph:
        return _traced(workload, at_batch(inputs, mb), cluster.device.name, inference=False)

    gb = workload.global_batch
    with progress(len(micro_batches(per_gpu_batch(gb, cluster.num_gpus))), "tracing the module per micro-batch") as bar:
        plans = plan_module(trace, cluster, global_batch=gb, progress=bar)
    if not plans.ranked:
        gib = 2**30
        need = min(sum(c.estimate.memory_bytes.values()) for c in plans.infeasible) / gib
        raise DistscopeError(f"no plan fits: model={workload.model} on gpus={cluster.num_gpus} of {cluster.name} "
                             f"(global_batch={gb}); the smallest needs {need:.1f} GiB per GPU of "
                             f"{cluster.memory_capacity_bytes / gib:.1f} (micro-batches {list(plans.micro_batches)}, "
                             "DDP and FSDP)")
    best = plans.ranked[0]
    tied = sum(1 for c in plans.ranked if c.estimate.step_time_s <= best.estimate.step_time_s * (1 + TIE_REL))
    first = ",".join(x.text for x in at_batch(inputs, best.micro_batch))
    again = (f"distscope estimate --model {workload.model} --input {first} --cluster {cluster.name} --gpus "
             f"{cluster.num_gpus} --global-batch {gb} --zero {best.zero}" + (f" --pp {best.pp}" if best.pp > 1 else "")
             + (" --recompute full" if best.recompute else ""))
    result = {"model": workload.model, "cluster": cluster.name, "gpus": cluster.num_gpus, "global_batch": gb,
              "micro_batches_searched": list(plans.micro_batches), "feasible": len(plans.ranked),
              "infeasible": len(plans.infeasible), "best": best.to_dict(),
              "top": [c.to_dict() for c in plans.ranked[:top]], "why": why(plans), "estimate_command": again,
              "tie": tied}
    if as_json:
        print_json(result)
        return
    t = Table(title=f"{workload.model} on {cluster.num_gpus} GPUs of {cluster.name} · global batch {gb}: top "
                    f"{min(top, len(plans.ranked))} of {len(plans.ranked)} plans that fit ({len(plans.infeasible)} "
                    "do not)")
    for col in ("#", "plan", "micro-batch", "steps acc.", "step s", "samples/s", "MFU", "GiB/GPU"):
        t.add_column(col, justify="left" if col == "plan" else "right")
    for row in ranked_rows(plans.ranked[:top]):
        t.add_row(*row)
    out.print(t)
    out.print(f"[bold]why #1 wins[/bold]: {result['why']}")
    if tied > 1:
        out.print(f"statistical tie: #1-#{tied} are within {TIE_REL:.0%} of #1's step time, the estimator's error in "
                  "comparing two plans of one job: choose among them on memory margin or simplicity (DDP), or measure")
    out.print("[bold]reproduce #1[/bold]:")
    out.print(again, markup=False, soft_wrap=True)
