"""`serve plan` and `serve measure` of a torch module served on this host's CPU cores: Packrat's
instances × threads × batch (serve/cpu_plan.py), from a latency profile measured here
(serve/cpu_measure.py); `serve measure` also runs the plan and the one-wide-instance baseline for real."""

from __future__ import annotations

import dataclasses
from typing import Any

from distscope.errors import DistscopeError


@dataclasses.dataclass(frozen=True)
class CpuServeFlags:
    model: str
    input: str | None
    cores: int | None
    batches: str
    repeats: int


def refuse_gpu_flags(ctx: Any, names: tuple[str, ...]) -> None:
    """One line when a flag of the GPU serving path was given with a torch module."""
    from distscope.serve.scenario import given

    for n in names:
        if given(ctx, n):
            flag = "--" + n.replace("_", "-")
            raise DistscopeError(f"{flag} is for serving catalog models on GPUs; a torch module (--model torch:...) is "
                                 "planned on this host's CPU cores: --input, --batches, --cores")


def _setup(f: CpuServeFlags) -> tuple[list[int], int, Any]:
    from distscope.dtypes import DType
    from distscope.serve.cpu_measure import allowed_cores
    from distscope.workload.module_graph import parse_inputs

    try:
        import torch  # noqa: F401  (the module runs on it)
    except ImportError:
        raise DistscopeError("serving a torch module on CPU needs PyTorch: pip install 'distscope[torch]'") from None
    try:
        batches = sorted({int(b) for b in f.batches.split(",")})
    except ValueError:
        raise DistscopeError(f"--batches={f.batches!r} must be a comma list of positive integers") from None
    if not batches or batches[0] < 1:
        raise DistscopeError(f"--batches={f.batches!r} must be a comma list of positive integers")
    have = len(allowed_cores())
    cores = have if f.cores is None else f.cores
    if not 1 <= cores <= have:
        raise DistscopeError(f"--cores={cores} must be in 1..{have} (the cores this process may run on)")
    if f.repeats < 1:
        raise DistscopeError(f"--repeats={f.repeats} must be >= 1")
    inputs = parse_inputs(f.input)
    bad = next((x for x in inputs if x.dtype is not DType.FP32), None)
    if bad is not None:
        raise DistscopeError(f"--input {bad.text}: CPU serving runs fp32; give the inputs as fp32")
    return batches, cores, inputs


def _plans(f: CpuServeFlags, bar: Any) -> tuple[Any, list[int], int, Any, list[Any]]:
    from distscope.serve.cpu_measure import profile
    from distscope.serve.cpu_plan import plans_for

    batches, cores, inputs = _setup(f)
    bar.update(0, cores * batches[-1])
    prof = profile(f.model, inputs, cores, batches[-1], f.repeats, progress=bar)
    return prof, batches, cores, inputs, plans_for(prof, batches, cores)


def cpu_plan_cmd(f: CpuServeFlags, *, as_json: bool) -> None:
    from rich.table import Table

    from distscope.report.console import out, print_json
    from distscope.report.progress import progress

    with progress(None, "profiling the module on this host's cores") as bar:
        prof, batches, cores, _, plans = _plans(f, bar)
    rows = [{"batch": b, "best": best.to_dict(), "baseline": base.to_dict(),
             "predicted_speedup": base.latency_s / best.latency_s} for b, (best, base) in zip(batches, plans, strict=True)]
    if as_json:
        print_json({"model": f.model, "cores": cores, "profile": prof.to_dict(), "plans": rows})
        return
    t = Table(title=f"{f.model} on {cores} CPU cores: instances x threads x batch (Packrat), from a profile measured here")
    for c in ("batch", "best plan", "latency ms", "items/s", "1 instance x all cores ms", "gain"):
        t.add_column(c, justify="left" if c == "best plan" else "right")
    for r in rows:
        t.add_row(str(r["batch"]), r["best"]["label"], f"{r['best']['latency_s'] * 1e3:.2f}",
                  f"{r['best']['throughput_per_s']:,.1f}", f"{r['baseline']['latency_s'] * 1e3:.2f}",
                  f"{r['predicted_speedup']:.2f}x")
    out.print(t)


def cpu_measure(f: CpuServeFlags, bar: Any) -> dict[str, Any]:
    """Profile, plan, then run each batch's plan and baseline for real (serve/cpu_measure.run_plan)."""
    from distscope.serve.cpu_measure import run_plan

    prof, batches, cores, inputs, plans = _plans(f, bar)
    rows = []
    for b, (best, base) in zip(batches, plans, strict=True):
        got = run_plan(f.model, inputs, best, f.repeats)
        ref = run_plan(f.model, inputs, base, f.repeats) if base.instances != best.instances else got
        rows.append({"batch": b, "best": got, "baseline": ref, "measured_speedup": ref["latency_s"] / got["latency_s"],
                     "predicted_speedup": base.latency_s / best.latency_s})
    return {"model": f.model, "cores": cores, "profile": prof.to_dict(), "runs": rows}


def cpu_measure_cmd(f: CpuServeFlags, *, as_json: bool) -> None:
    from rich.table import Table

    from distscope.report.console import out, print_json
    from distscope.report.progress import progress

    with progress(None, "profiling, then serving each plan for real") as bar:
        res = cpu_measure(f, bar)
    if as_json:
        print_json(res)
        return
    t = Table(title=f"{f.model} on {res['cores']} CPU cores: the planned split and one wide instance, run here")
    for c in ("batch", "plan", "predicted ms", "measured ms", "error", "baseline measured ms", "gain measured",
              "gain predicted"):
        t.add_column(c, justify="left" if c == "plan" else "right")
    for r in res["runs"]:
        g, b = r["best"], r["baseline"]
        t.add_row(str(r["batch"]), g["plan"], f"{g['predicted_latency_s'] * 1e3:.2f}", f"{g['latency_s'] * 1e3:.2f}",
                  f"{g['error_pct']:+.1f}%", f"{b['latency_s'] * 1e3:.2f}", f"{r['measured_speedup']:.2f}x",
                  f"{r['predicted_speedup']:.2f}x")
    out.print(t)
